"""benchmarks/bench_gpu.py: refuses clearly without a device, and runs end to end in the simulator
on a tiny input (a smoke test of the script; its timings there mean nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    clean.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), *args],
                          env=clean, capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_without_a_device_it_says_so_and_fails():
    proc = bench()
    assert proc.returncode == 2
    assert "no CUDA device is visible" in proc.stderr and not proc.stdout


def test_runs_in_the_simulator_on_a_tiny_input(tmp_path):
    out = tmp_path / "rows.json"
    proc = bench("--events", "300", "--queries", "1", "3", "--repeat", "1", "--json", str(out),
                 NUMBA_ENABLE_CUDASIM="1")
    assert proc.returncode == 0, proc.stderr
    assert "simulator" in proc.stdout and "nvidia-smi" in proc.stdout.lower()
    for line in ("   1 queries float:", "   1 queries exact:", "   3 queries float:",
                 "   3 queries exact:"):
        assert line in proc.stdout, proc.stdout
    rows = json.loads(out.read_text())
    assert [(r["queries"], r["numeric"]) for r in rows] == [
        (1, "float"), (1, "exact"), (3, "float"), (3, "exact")]
    assert all(r["calls"] >= r["queries"] and r["gpu_kernel_s"] > 0 for r in rows)

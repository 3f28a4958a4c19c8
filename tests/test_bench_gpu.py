"""benchmarks/bench_gpu.py: refuses clearly without a device, and runs end to end in the simulator
on a tiny input (a smoke test of the script; its timings there mean nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu  # the GPU backend's kernels (numba's CUDA simulator without a device)

ROOT = Path(__file__).resolve().parents[1]


def bench(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    clean.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), *args],
        env=clean,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def test_without_a_device_it_says_so_and_fails():
    proc = bench()
    assert proc.returncode == 2
    assert "no CUDA device is visible" in proc.stderr and not proc.stdout


def test_runs_in_the_simulator_on_a_tiny_input(tmp_path):
    out = tmp_path / "rows.json"
    proc = bench(
        "--events",
        "300",
        "--queries",
        "1",
        "3",
        "--repeat",
        "1",
        "--json",
        str(out),
        NUMBA_ENABLE_CUDASIM="1",
    )
    assert proc.returncode == 0, proc.stderr
    assert "simulator" in proc.stdout and "nvidia-smi" in proc.stdout.lower()
    for line in (
        "   1 queries  float: ",
        "   1 queries  exact: ",
        "   3 queries  float: ",
        "   3 queries  exact: ",
    ):
        assert line in proc.stdout, proc.stdout
    rows = json.loads(out.read_text())
    assert [(r["queries"], r["numeric"]) for r in rows] == [
        (1, "float"),
        (1, "exact"),
        (3, "float"),
        (3, "exact"),
    ]
    assert all(r["calls"] >= r["queries"] and r["gpu_kernel_s"] > 0 for r in rows)
    assert all(0 < r["runs"] <= r["rows"] for r in rows)
    assert all(r["cpu_all_cores_s"] > 0 and r["speedup_vs_all_cores"] > 0 for r in rows)
    assert f" {os.cpu_count()} cores " in proc.stdout


def test_all_cores_pieces_compute_what_the_whole_call_does():
    """The CPU's all-cores measurement cuts each call between its runs: the pieces' results,
    concatenated, are the whole call's."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_gpu
        from bench_engine import TYPES, kleene_queries
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from cpu_fallback import CpuBackend
    from gpu_hamlet.datagen import kleene_stream

    events = kleene_stream(
        3000, seed=7, types=TYPES, mean_burst=20.0, n_groups=8, duplicate_time_fraction=0.1
    )
    cpu = CpuBackend()
    for numeric in ("float", "exact"):
        for args in bench_gpu.record_segment_calls(events, kleene_queries(2), numeric):
            whole = cpu.segment_maps(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
            pieces = bench_gpu._split(args, 3)
            assert len(pieces) == 3
            parts = [cpu.segment_maps(*p) for p in pieces]
            for i in range(3):
                assert np.array_equal(np.concatenate([p[i] for p in parts]), whole[i])


def test_memory_benchmark_without_a_device_says_so():
    clean = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    clean.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_memory.py")],
        env=clean,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "needs a CUDA device" in proc.stderr


def test_memory_benchmark_fits_its_peaks_and_fills_the_device(monkeypatch, tmp_path, capsys):
    """benchmarks/gpu_memory.py's steps, with the device's memory read from a stand-in (peaks
    rise with the events; 64 MiB free whatever is allocated): the fit, the largest input, and
    the two budgets on a filled device, each call equal to the CPU's or the engine's own error."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_memory
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))

    class Used:
        """Peaks of 1 MiB plus 100 bytes per event of the call."""

        def __init__(self) -> None:
            self.calls = 0

        def name(self) -> str:
            return "stand-in"

        def during(self, fn):
            out = fn()
            n = (2000, 6000)[self.calls]
            self.calls += 1
            return out, (1 << 20) + 100 * n

    monkeypatch.setattr(gpu_memory, "cuda_visible", lambda: True)
    monkeypatch.setattr(gpu_memory, "UsedMemory", Used)
    monkeypatch.setattr(gpu_memory, "device_memory", lambda: (64 << 20, 128 << 20))
    out = tmp_path / "memory.json"
    args = ["--events", "2000", "6000", "--queries", "2", "--json", str(out)]
    assert gpu_memory.main(args) == 0
    text = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["per_event_bytes"] == 100 and report["fixed_bytes"] == 1 << 20
    assert report["largest"] == (63 << 20) // 100
    assert "largest input that fits about" in text
    assert [b["budget_bytes"] for b in report["beyond"]] == [4 * (64 << 20), (64 << 20) // 8]
    assert all(
        b["outcome"] == "equal to the CPU" or b["outcome"].startswith("GpuHamletError")
        for b in report["beyond"]
    )


def test_device_steps_script_parses_and_knows_its_steps():
    """benchmarks/gpu_steps.sh runs only on a lent GPU machine: here, bash parses it and every
    step the docs name has its case."""
    script = ROOT / "benchmarks" / "gpu_steps.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    text = script.read_text()
    for step in (
        "tests",
        "bench",
        "calibrate",
        "stages",
        "sharing",
        "memory",
        "profile",
        "fma",
        "host",
        "gloria",
    ):
        assert f"\n    {step})\n" in text, step


def test_device_tests_step_collects_without_pyspark():
    """The device machines have no PySpark: gpu_steps.sh's tests step leaves out the modules its
    pattern finds, and what is left must collect with pyspark unimportable."""
    import re

    text = (ROOT / "benchmarks" / "gpu_steps.sh").read_text()
    pattern = re.search(r'grep -l -E "([^"]+)" tests/test_\*\.py', text)
    assert pattern is not None
    found = subprocess.run(
        ["grep", "-l", "-E", pattern.group(1), *sorted(map(str, ROOT.glob("tests/test_*.py")))],
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.split()
    assert "tests/test_spark.py" in {str(Path(f).relative_to(ROOT)) for f in found}
    block = "import sys, pytest; sys.modules['pyspark'] = None; sys.exit(pytest.main(sys.argv[1:]))"
    args = ["--collect-only", "-q", "-p", "no:cacheprovider", "-m", "not spark", "tests"]
    done = subprocess.run(
        [sys.executable, "-c", block, *args, *(f"--ignore={f}" for f in found)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_gloria_benchmark_runs_on_the_gpu_backend(tmp_path):
    """`bench_gloria.py --backend gpu` (gpu_steps.sh's `gloria` step) in the simulator, on a tiny
    bursty stream: a row per workload kind, every mode timed (its timings mean nothing here)."""
    clean = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    clean.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT), NUMBA_ENABLE_CUDASIM="1")
    args = ["--events", "200", "--queries", "2", "--lengths", "2", "--repeat", "1"]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_gloria.py"), *args,
         "--seconds", "0.01", "--streams", "bursty", "--backend", "gpu", "--out", str(tmp_path)],
        env=clean, capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "GPU backend" in proc.stdout
    points = json.loads((tmp_path / "results.json").read_text())
    assert [p["kind"] for p in points] == ["SEQ", "Kleene", "mixed 1:2"]
    assert all(s > 0 for p in points for s in p["seconds"].values())

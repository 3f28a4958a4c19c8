"""`gpu-hamlet demo` explains itself, and the CPU kernels it warms up are cached on disk."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpu_hamlet.cli import DEMO_WORKLOAD, main
from gpu_hamlet.datagen import ridesharing
from gpu_hamlet.demo import describe_data

ROOT = Path(__file__).resolve().parents[1]


def test_demo_prints_workload_data_and_why_counts_are_huge(spark, capsys):
    assert main(["demo", "--events", "2000", "--rows", "2"]) == 0
    out = capsys.readouterr().out
    assert DEMO_WORKLOAD.strip() in out
    assert "generated 2,000 ridesharing events (gpu_hamlet/datagen.py" in out
    assert "10 districts" in out and "Travel" in out
    assert "a burst of n matching events holds 2^n - 1 trends" in out
    assert "CPU kernels: " in out and " signatures" in out
    assert "on Spark 4.1.1" in out
    assert "== rides:" in out and "== premium:" in out


def test_data_line_names_types_districts_and_time_span():
    line = describe_data(ridesharing(5000, seed=1))
    assert line.startswith("generated 5,000 ridesharing events (gpu_hamlet/datagen.py")
    assert "20 event types (Travel" in line and "10 districts" in line
    assert " drivers, 5 min from 2026-01-01 00:00" in line


def test_every_kernel_is_cached_on_disk():
    """The rings and recursions of gpu_hamlet/core are plain functions, compiled into the cached
    kernels that call them: no compiled function of the project is left uncached."""
    for module in (
        "cpu_fallback.bursts",
        "cpu_fallback.kernels",
        "gpu_hamlet.core.numeric",
        "gpu_hamlet.engine.partitions",
        "gpu_hamlet.engine.pruning",
        "gpu_hamlet.engine.window_copies",
    ):
        importlib.import_module(module)
    from gpu_hamlet.kernel_cache import dispatchers

    found = dispatchers()
    uncached = {d.__module__ for d in found if d.stats.cache_path is None}
    assert len(found) > 10  # the kernels were found
    assert uncached == set()


WARM_UP = textwrap.dedent("""
    import sys
    import numpy as np
    import gpu_hamlet.core.compile_cache as cc
    if sys.argv[1:] == ["edited"]:  # as if a file of gpu_hamlet/core had changed
        cc.core_stamp = lambda: ("edited",)
    from cpu_fallback.kernels import reduce_sorted
    from gpu_hamlet.core.rings import make_tag
    from gpu_hamlet.kernel_cache import warm_up

    vals = np.ones((4, 1, 2))
    w = warm_up(lambda: reduce_sorted(make_tag("xfloat"), vals, np.array([0, 2])))
    print(w.compiled, w.loaded, w.cache_dirs)
""")


@pytest.mark.slow
def test_a_second_process_loads_the_kernels_from_the_cache(tmp_path):
    """A kernel over a ring is compiled by the first process and loaded from NUMBA_CACHE_DIR by
    the next: what every Spark worker relies on. An edit of gpu_hamlet/core, which the kernel
    inlines, makes the next process compile it again."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))

    def run(*args: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", WARM_UP, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=ROOT,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.split(maxsplit=2)

    compiled, loaded, where = run()
    assert int(compiled) >= 1 and int(loaded) == 0 and str(tmp_path) in where
    assert list(tmp_path.rglob("kernels.reduce_sorted-*.nbi"))
    compiled, loaded, _ = run()
    assert int(compiled) == 0 and int(loaded) >= 1
    compiled, loaded, _ = run("edited")
    assert int(compiled) >= 1 and int(loaded) == 0

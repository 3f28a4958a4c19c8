"""Shared fixtures: one local Spark session for the whole test run (every test that uses it runs
on one pytest-xdist worker, see pytest_collection_modifyitems); the CUDA simulator.

Without a visible CUDA device the GPU kernels run in numba's CUDA simulator (the same tests run
on the device where there is one). That must be decided before anything imports numba.cuda.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from unittest import mock

import numpy as np
import pytest
from hypothesis import settings

from gpu_hamlet.devices import cuda_visible, enable_simulator

if not cuda_visible():
    enable_simulator()

# CI runs the same examples every time (a red CI blocks landing, so it must be reproducible);
# local runs draw new examples and so keep exploring.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


@pytest.fixture(autouse=True, scope="session")
def exact_from_float_checked():
    """Every exact result the float pass gives by itself (gpu_hamlet/engine/results.py
    `ExactBounds.in_float`) is checked against the residue passes it skips, which then run as
    before: the oracle tests' small counts would otherwise never reach the residues."""
    from gpu_hamlet.engine import results

    def checked(self, win, keep, lin):
        bounds = self._exact_bounds(lin)
        if not bounds.in_float:
            return (yield from self._residue_ints(win, keep, bounds, lin))
        got = self._float_ints(lin, bounds)
        every_row = dataclasses.replace(bounds, row_in_float=np.zeros_like(bounds.row_in_float))
        want = yield from self._residue_ints(win, keep, every_row, lin)
        for ch, ints in want.items():
            assert got[ch].tolist() == ints.tolist(), f"{self.plan.query.name}, {ch}"
        return got

    with mock.patch.object(results.QueryResults, "_exact", checked):
        yield


@pytest.fixture(scope="session")
def spark():
    """local[2] Spark, the same Python for workers (functions ship inside the installed package)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("gpu-hamlet-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(items):
    """Every test that uses the Spark session is marked `spark`, so `-m "not spark"` leaves
    them out whether or not the test says so itself; and they all go to one xdist worker
    (`--dist loadgroup`), so one session (one JVM) serves them all."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.xdist_group("spark-session"))


def pytest_collection_finish(session):
    """pytest-xdist groups tests by suffixing their node ids with the group; where that no longer
    takes (pytest 9.2 with xdist 3.8, pytest-xdist issue 1386), say so rather than quietly start
    a Spark session on every worker."""
    if not getattr(session.config.option, "loadgroup", False):  # set on xdist's workers
        return
    lost = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid
    ]
    if lost:
        warnings.warn(
            f"pytest-xdist did not group {len(lost)} tests (e.g. {lost[0]}): the Spark tests "
            "spread over the workers, each starting its own session; pyproject.toml's test "
            "extra names the pytest versions it groups with",
            stacklevel=1,
        )

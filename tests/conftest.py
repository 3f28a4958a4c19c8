"""Shared fixtures: one local Spark session for the whole test run; the CUDA simulator.

Without a visible CUDA device the GPU kernels run in numba's CUDA simulator (the same tests run
on the device where there is one). That must be decided before anything imports numba.cuda.
"""

from __future__ import annotations

import os
import sys

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

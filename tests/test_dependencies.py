"""Dependencies: upper bounds where the next major version already warns, and the project's own
pandas paths free of the warnings that announce it."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

from packaging.requirements import Requirement

import gpu_hamlet
from gpu_hamlet.cli import DEMO_WORKLOAD, _format
from gpu_hamlet.datagen import ridesharing

ROOT = Path(__file__).resolve().parents[1]
#: The first major version each dependency must stay below, and why (see pyproject.toml).
UPPER = {
    "pandas": "4",  # PySpark 4.1.1's toPandas() warns Pandas4Warning under pandas 3
    "pyspark": "4.1.2",  # pinned: the RAPIDS Accelerator's Spark version
}


def test_dependencies_carry_their_upper_bounds():
    deps = {
        r.name: r
        for r in map(
            Requirement,
            tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"],
        )
    }
    for name, below in UPPER.items():
        spec = deps[name].specifier
        assert below not in spec, f"{name}{spec} admits {below}"


def test_pandas_paths_raise_no_deprecation_or_future_warning():
    """A pandas DataFrame as input (every numeric mode) and the CLI's text tables (decimals,
    timestamps, floats) under warnings as errors: Pandas4Warning is a DeprecationWarning."""
    events = ridesharing(20_000, seed=3).to_pandas()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for numeric in ("exact", "bigint", "float"):
            results = gpu_hamlet.aggregate(
                events, DEMO_WORKLOAD, numeric=numeric, on_overflow="null", backend="cpu"
            )
            for table in results.values():
                assert table.num_rows and _format(table)

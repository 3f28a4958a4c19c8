"""Options (gpu_hamlet/engine/options.py): checked once on construction with the messages the
keyword APIs give (docs/semantics.md section 11), picklable for Spark's tasks, and with the
defaults the keyword APIs and the command line spell out."""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import pyarrow as pa
import pytest

import gpu_hamlet
from cpu_fallback import CpuBackend
from gpu_hamlet.cli import build_parser
from gpu_hamlet.engine.evaluate import result_schemas
from gpu_hamlet.engine.options import DEFAULTS, Options
from gpu_hamlet.spark import trend_aggregate

EVENTS = pa.table({"time": [1, 2], "type": ["A", "B"]})
TEXT = "RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 10 s"
BAD = [
    ("numeric", "decimal", "numeric must be one of 'exact', 'bigint', 'float', not 'decimal'"),
    (
        "sharing",
        "gloria",
        "sharing must be one of 'dynamic', 'static', 'none', 'hamlet', not 'gloria'",
    ),
    ("on_overflow", "wrap", "on_overflow must be one of 'error', 'null', not 'wrap'"),
    ("backend", "tpu", "backend must be 'auto', 'cpu' or 'gpu', not 'tpu'"),
    ("time_col", None, "time_col must be a column name (a str), not None"),
    ("type_col", 1, "type_col must be a column name (a str), not 1"),
    ("type_col", "time", "time_col and type_col must be two columns, not both 'time'"),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD)
def test_a_bad_value_is_the_same_error_everywhere(name, value, message):
    with pytest.raises(ValueError) as made:
        Options(**{name: value})
    with pytest.raises(ValueError) as called:
        gpu_hamlet.aggregate(EVENTS, TEXT, **{name: value})
    with pytest.raises(ValueError) as spark:  # before anything touches the DataFrame
        trend_aggregate(None, TEXT, **{name: value})
    assert str(made.value) == str(called.value) == str(spark.value) == message
    with pytest.raises(ValueError, match="must be"):
        dataclasses.replace(DEFAULTS, **{name: value})


def test_options_pickle_and_are_frozen():
    options = Options(backend="cpu", numeric="bigint", on_overflow="null", time_col="ts")
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.numeric = "float"  # type: ignore[misc]


def test_keyword_apis_and_the_command_line_have_its_defaults():
    defaults = dataclasses.asdict(DEFAULTS)
    for api in (gpu_hamlet.aggregate, trend_aggregate):
        params = inspect.signature(api).parameters
        assert {name: params[name].default for name in defaults} == defaults
    args = build_parser().parse_args(["run", "--workload", "w", "--events", "e", "--out", "o"])
    assert {name: getattr(args, name) for name in defaults} == defaults


def test_option_objects_of_the_wrong_kind_are_named():
    """A backend that is neither a name nor a Backend, and stats that are no RunStats, are
    refused up front (they raised AttributeError from inside the engine)."""
    with pytest.raises(ValueError, match=r"\(or a Backend object\), not None"):
        gpu_hamlet.aggregate(EVENTS, TEXT, backend=None)
    with pytest.raises(TypeError, match="stats must be a gpu_hamlet.RunStats, not int"):
        gpu_hamlet.aggregate(EVENTS, TEXT, backend="cpu", stats=5)


def test_the_other_arguments_of_the_wrong_kind_are_named_before_any_work():
    """Each of these ran first: a Backend class (its steps unbound: a TypeError inside), a
    truthy `part` (part mode on), `rows_per_chunk=True` (chunks of one row), and `stats` of a
    stream or a Spark job (an AttributeError after the first chunk, or after the whole job)."""
    with pytest.raises(ValueError, match=r"\(or a Backend object\), not <class"):
        gpu_hamlet.aggregate(EVENTS, TEXT, backend=CpuBackend)
    with pytest.raises(TypeError, match="part must be True or False, not 'no'"):
        gpu_hamlet.aggregate(EVENTS, TEXT, backend="cpu", part="no")
    with pytest.raises(ValueError, match="rows_per_chunk must be a positive int, got True"):
        gpu_hamlet.aggregate_stream([EVENTS], TEXT, rows_per_chunk=True)
    with pytest.raises(TypeError, match="stats must be a gpu_hamlet.RunStats, not dict"):
        gpu_hamlet.aggregate_stream([], TEXT, stats={})
    with pytest.raises(TypeError, match="stats must be a gpu_hamlet.RunStats, not dict"):
        trend_aggregate(None, TEXT, stats={})  # (before anything touches the DataFrame)
    with pytest.raises(TypeError, match="result_schemas takes a pyarrow Schema, not Table"):
        result_schemas(EVENTS, TEXT)
    with pytest.raises(TypeError, match="options must be a gpu_hamlet Options, not NoneType"):
        result_schemas(EVENTS.schema, TEXT, None)  # type: ignore[arg-type]

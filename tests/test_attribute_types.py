"""Aggregates over decimal and boolean columns against the oracle (docs/semantics.md sections 5
and 7): COUNT and SUM exact at the column's scale in `exact` and `bigint` mode, AVG float64,
MIN and MAX of the column's own type, with nulls, in every numeric and sharing mode. The other
oracle tests draw int64 and float64 attributes only."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpu_hamlet
from gpu_hamlet.engine.options import SHARING_MODES

try:
    from compare import NUMERIC_MODES, ORACLE_SETTINGS, assert_matches_oracle
    from oracle import oracle
    from strategies import event_streams, workload_cases, workload_types
except ImportError:  # pragma: no cover
    from tests.compare import NUMERIC_MODES, ORACLE_SETTINGS, assert_matches_oracle
    from tests.oracle import oracle
    from tests.strategies import event_streams, workload_cases, workload_types

#: The types `x` takes: scales positive, zero and negative, every decimal width, and booleans.
X_TYPES = [
    pa.decimal128(9, 2),
    pa.decimal32(7, 1),
    pa.decimal64(12, 3),
    pa.decimal128(6, -2),
    pa.decimal256(45, 4),
    pa.decimal128(38, 0),
    pa.bool_(),
]


def as_type(typ: pa.DataType, v: int | None) -> object:
    """The drawn integer v as a value of `typ`: a decimal whose unscaled integer is v, or v > 0."""
    if v is None:
        return None
    return v > 0 if pa.types.is_boolean(typ) else decimal.Decimal(v).scaleb(-typ.scale)


@st.composite
def typed_cases(draw):
    """A workload, events with nulls, and the type their attribute x takes (booleans only where
    no filter compares x with a number)."""
    text, wl = draw(workload_cases(max_queries=3))
    events = draw(event_streams(workload_types(wl), nulls=True))
    compared = any(f.attr == "x" for q in wl for f in q.filters)
    typ = draw(st.sampled_from(X_TYPES[:-1] if compared else X_TYPES))
    return text, wl, [dict(e, x=as_type(typ, e["x"])) for e in events], typ


def table_of(events: list[dict], typ: pa.DataType) -> pa.Table:
    """The events as tests/compare.py's EVENT_SCHEMA has them, x of `typ`."""
    schema = pa.schema(
        [
            ("time", pa.int64()),
            ("type", pa.string()),
            ("g", pa.string()),
            ("k", pa.int64()),
            ("x", typ),
            ("y", pa.float64()),
            ("s", pa.string()),
        ]
    )
    return pa.Table.from_pylist(events, schema=schema)


@ORACLE_SETTINGS
@given(typed_cases(), st.sampled_from(NUMERIC_MODES), st.sampled_from(SHARING_MODES))
def test_decimal_and_boolean_attributes_match_the_oracle(case, numeric, sharing):
    text, wl, events, typ = case
    table = table_of(events, typ)
    got = gpu_hamlet.aggregate(table, text, backend="cpu", numeric=numeric, sharing=sharing)
    expected = oracle(events, wl, with_magnitudes=True)
    assert_matches_oracle(got, expected, wl, numeric, event_schema=table.schema)


@pytest.mark.gpu  # the GPU backend's kernels, in numba's CUDA simulator without a device
@settings(ORACLE_SETTINGS, max_examples=10)
@given(typed_cases(), st.sampled_from(SHARING_MODES))
def test_decimal_and_boolean_attributes_on_the_gpu_backend(case, sharing):
    text, wl, events, typ = case
    table = table_of(events, typ)
    expected = oracle(events, wl, with_magnitudes=True)
    for numeric in NUMERIC_MODES:
        got = gpu_hamlet.aggregate(table, text, backend="gpu", numeric=numeric, sharing=sharing)
        assert_matches_oracle(got, expected, wl, numeric, event_schema=table.schema)

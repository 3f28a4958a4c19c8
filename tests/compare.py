"""Comparing engine results (dict of pyarrow Tables) with the oracle (dict of row lists).

``assert_matches_oracle(tables, expected, workload, numeric)`` checks, for every query of the
workload: the column names and order (GROUPBY columns, ``window_start``, ``window_end``, then the
aggregates in RETURN order), the Arrow types of the value columns for the numeric mode
(docs/semantics.md sections 5 and 7), the row order, and every value:

* ``numeric="exact"``: COUNT(*), COUNT(E) and SUM of int and bool attributes are
  ``decimal128(38, 0)``, SUM of a ``decimal(p, s)`` attribute ``decimal128(38, s)``, and equal
  exactly (null where the exact value has 38 digits or more at that scale and
  ``on_overflow="null"``);
* ``numeric="bigint"``: those are Arrow strings of decimal digits (with a decimal's scale s > 0,
  s digits after the point), equal exactly;
* ``numeric="float"``: those are float64 within 1e-9 relative;
* in every mode SUM over a float attribute and AVG are float64 within 1e-9 relative, plus an
  absolute slack of 1e-9 times the sum of the absolute values of the terms (cancellation) when the
  oracle was run with ``with_magnitudes=True``; MIN and MAX keep the attribute's type and are equal.
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

try:
    from oracle import MAGNITUDE_KEY
except ImportError:  # pragma: no cover - tests/ imported as a package
    from tests.oracle import MAGNITUDE_KEY

__all__ = [
    "NUMERIC_MODES",
    "ORACLE_SETTINGS",
    "EVENT_SCHEMA",
    "DECIMAL_LIMIT",
    "REL_TOL",
    "events_to_table",
    "to_datetime",
    "expected_value_type",
    "assert_matches_oracle",
    "close",
    "same",
]

#: Every numeric mode, as the oracle tests run them.
NUMERIC_MODES = ("exact", "bigint", "float")

#: Hypothesis settings of the oracle property tests: the oracle is exponential, so no deadline.
ORACLE_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Schema of the event dicts drawn by tests/strategies.py (time as int seconds).
EVENT_SCHEMA = pa.schema(
    [
        ("time", pa.int64()),
        ("type", pa.string()),
        ("g", pa.string()),
        ("k", pa.int64()),
        ("x", pa.int64()),
        ("y", pa.float64()),
        ("s", pa.string()),
    ]
)

DECIMAL_LIMIT = 10**38
REL_TOL = 1e-9
_EPOCH_NAIVE = datetime(1970, 1, 1)


def events_to_table(
    events: Sequence[dict],
    *,
    time_type: pa.DataType | str = "int",
    schema: pa.Schema = EVENT_SCHEMA,
) -> pa.Table:
    """Arrow table of event dicts with int-second times, as ``time_type``.

    ``time_type``: ``"int"`` (int64 seconds), ``"float"`` (float64 seconds) or a timestamp type
    such as ``pa.timestamp("us")`` (the int seconds from the epoch). Works for an empty list.
    """
    if isinstance(time_type, str):
        time_type = {"int": pa.int64(), "float": pa.float64()}.get(time_type, time_type)
    if time_type == pa.int64():
        rows, arrow_time = list(events), pa.int64()
    elif time_type == pa.float64():
        rows, arrow_time = [dict(e, time=float(e["time"])) for e in events], pa.float64()
    elif isinstance(time_type, pa.TimestampType):
        rows = [
            dict(e, time=to_datetime(e["time"], aware=time_type.tz is not None)) for e in events
        ]
        arrow_time = time_type
    else:
        raise ValueError(f"unsupported time_type {time_type!r}")
    fields = [pa.field(f.name, arrow_time) if f.name == "time" else f for f in schema]
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


def to_datetime(seconds: int | float, *, aware: bool = False) -> datetime:
    """UTC datetime of seconds since the epoch: naive (what Arrow timestamps without a time zone
    read back as) or, with ``aware=True``, with ``tzinfo=timezone.utc``."""
    d = _EPOCH_NAIVE + timedelta(seconds=seconds)
    return d.replace(tzinfo=UTC) if aware else d


def _is_exact_count(agg: Any, attr_types: Mapping[str, pa.DataType]) -> bool:
    """COUNT(*), COUNT(E) and SUM over an integer, boolean or decimal attribute: the
    exact-capable values."""
    if agg.func == "COUNT":
        return True
    if agg.func == "SUM":
        t = attr_types[agg.attr]
        return pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t)
    return False


def _scale(agg: Any, attr_types: Mapping[str, pa.DataType]) -> int:
    """The scale of an exact-capable aggregate's values: a decimal's for its SUM, else 0."""
    t = attr_types[agg.attr] if agg.func == "SUM" else None
    return t.scale if t is not None and pa.types.is_decimal(t) else 0


def expected_value_type(
    agg: Any, numeric: str, attr_types: Mapping[str, pa.DataType]
) -> pa.DataType:
    """The Arrow type the contract gives an aggregate column."""
    if _is_exact_count(agg, attr_types):
        exact = pa.decimal128(38, _scale(agg, attr_types))
        return {"exact": exact, "bigint": pa.string(), "float": pa.float64()}[numeric]
    if agg.func in ("SUM", "AVG"):
        return pa.float64()
    if agg.func in ("MIN", "MAX"):
        return attr_types[agg.attr]
    raise AssertionError(f"unknown aggregate {agg}")


def close(got: float, exp: Any, *, magnitude: Any = 0, rel: float = REL_TOL) -> bool:
    """``|got - exp| <= rel * |exp| + rel * magnitude`` with ``exp`` exact (int/Fraction/float)."""
    if got is None or isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    if got != got or got in (float("inf"), float("-inf")):
        return False
    exp = Fraction(exp)
    err = abs(Fraction(got) - exp)
    return err <= Fraction(rel) * (abs(exp) + abs(Fraction(magnitude or 0)))


_DIGITS = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def _check_value(
    agg: Any,
    got: Any,
    exp: Any,
    mag: Any,
    numeric: str,
    on_overflow: str,
    attr_types: Mapping[str, pa.DataType],
) -> str | None:
    """None if ``got`` is right for ``exp``, else a description of what is wrong."""
    if exp is None:  # SUM, AVG, MIN, MAX over events whose values are all null
        return None if got is None else f"expected null, got {got!r}"
    if _is_exact_count(agg, attr_types):
        assert isinstance(exp, (int, decimal.Decimal)), f"oracle gave {exp!r} for {agg}"
        scale = _scale(agg, attr_types)
        if numeric == "exact":
            if abs(Fraction(exp)) * Fraction(10) ** scale >= DECIMAL_LIMIT:
                if on_overflow == "null":
                    return None if got is None else f"expected null ({exp} >= 10^38), got {got!r}"
                return f"expected an overflow error ({exp} >= 10^38), got a value {got!r}"
            if not isinstance(got, decimal.Decimal):
                return f"expected Decimal {exp}, got {type(got).__name__} {got!r}"
            return None if got == exp else f"expected {exp}, got {got!r}"
        if numeric == "bigint":
            if not isinstance(got, str) or not _DIGITS.fullmatch(got):
                return f"expected decimal digits of {exp}, got {got!r}"
            want = str(int(exp)) if scale <= 0 else format(decimal.Decimal(exp), f".{scale}f")
            return None if got == want else f"expected {want!r}, got {got!r}"
        if numeric == "float":
            return (
                None if close(got, exp, magnitude=mag) else f"expected ~{float(exp)!r}, got {got!r}"
            )
        raise AssertionError(f"unknown numeric mode {numeric!r}")
    if agg.func in ("SUM", "AVG"):
        if exp is None:
            return None if got is None else f"expected null, got {got!r}"
        return (
            None
            if close(got, exp, magnitude=mag)
            else f"expected ~{float(exp)!r} ({exp}), got {got!r}"
        )
    if agg.func in ("MIN", "MAX"):
        floats = isinstance(got, float) and isinstance(exp, float)
        both_nan = floats and math.isnan(got) and math.isnan(exp)  # (NaN equals nothing)
        if not (got == exp or both_nan) or type(got) is not type(exp):
            return f"expected {exp!r}, got {got!r}"
        return None
    raise AssertionError(f"unknown aggregate {agg}")


def _row_key(row: dict, keys: list[str]) -> tuple:
    """The row's GROUPBY values and window, NaN as a value equal to itself (NaN is one group,
    docs/semantics.md section 8; as a float it equals nothing, so its rows seemed missing and
    extra at once)."""
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in map(row.get, keys))


def assert_matches_oracle(
    tables: Mapping[str, pa.Table],
    expected: Mapping[str, list[dict]],
    workload: Any,
    numeric: str = "exact",
    *,
    on_overflow: str = "error",
    event_schema: pa.Schema = EVENT_SCHEMA,
    time_type: pa.DataType | None = None,
) -> None:
    """Assert that the engine's ``tables`` equal the oracle's ``expected`` for every query.

    ``event_schema`` gives the attribute types (for MIN/MAX and for SUM over int vs float);
    ``time_type`` (default: the schema's ``time`` field) is the expected type of the window bounds.
    """
    attr_types = {f.name: f.type for f in event_schema}
    if time_type is None and "time" in attr_types:
        time_type = attr_types["time"]
    assert set(tables) == set(workload.names), (
        f"result queries {sorted(tables)} != {sorted(workload.names)}"
    )
    problems: list[str] = []
    for q in workload:
        table = tables[q.name]
        assert isinstance(table, pa.Table), (
            f"{q.name}: result is {type(table).__name__}, not a pyarrow.Table"
        )
        want_cols = (
            list(q.groupby) + ["window_start", "window_end"] + [a.name for a in q.aggregates]
        )
        assert table.column_names == want_cols, (
            f"{q.name}: columns {table.column_names} != {want_cols}"
        )
        schema = table.schema
        for g in q.groupby:
            if g in attr_types:
                assert schema.field(g).type == attr_types[g], (
                    f"{q.name}: group column {g} is {schema.field(g).type}, "
                    f"input is {attr_types[g]}"
                )
        if time_type is not None:
            for c in ("window_start", "window_end"):
                assert schema.field(c).type == time_type, (
                    f"{q.name}: {c} is {schema.field(c).type}, the time column is {time_type}"
                )
        for a in q.aggregates:
            want = expected_value_type(a, numeric, attr_types)
            assert schema.field(a.name).type == want, (
                f"{q.name}: {a.name} ({a}) is {schema.field(a.name).type}, expected {want} "
                f"for numeric={numeric!r}"
            )

        got_rows = table.to_pylist()
        exp_rows = expected[q.name]
        keys = list(q.groupby) + ["window_start", "window_end"]
        got_keys = [_row_key(r, keys) for r in got_rows]
        exp_keys = [_row_key(r, keys) for r in exp_rows]
        if got_keys != exp_keys:
            missing = [k for k in exp_keys if k not in got_keys]
            extra = [k for k in got_keys if k not in exp_keys]
            problems.append(
                f"{q.name} ({q}): row keys {keys} differ: missing {missing[:5]}, extra {extra[:5]}"
                + ("" if missing or extra else f", order {got_keys[:8]} vs expected {exp_keys[:8]}")
            )
            continue
        for got, exp in zip(got_rows, exp_rows):
            mags = exp.get(MAGNITUDE_KEY, {})
            for a in q.aggregates:
                why = _check_value(
                    a,
                    got[a.name],
                    exp[a.name],
                    mags.get(a.name, 0),
                    numeric,
                    on_overflow,
                    attr_types,
                )
                if why:
                    where = ", ".join(f"{c}={got[c]!r}" for c in keys)
                    problems.append(f"{q.name} ({q}) [{where}] {a.name} = {a}: {why}")
    assert not problems, f"{len(problems)} mismatches (numeric={numeric!r}):\n" + "\n".join(
        problems[:20]
    )


def same(got: pa.Table, want: pa.Table) -> bool:
    """Equal tables, but float columns (AVG) to 1e-9 relative: sharing modes, and a stream's
    chunks, may add in another order (docs/semantics.md section 12)."""
    if got.schema != want.schema or got.num_rows != want.num_rows:
        return False
    for name in want.column_names:
        a, b = got.column(name), want.column(name)
        if not pa.types.is_floating(b.type):
            if not a.equals(b):
                return False
            continue
        if a.null_count != b.null_count or not a.is_null().equals(b.is_null()):
            return False
        x = a.fill_null(0.0).to_numpy()
        y = b.fill_null(0.0).to_numpy()
        if not np.allclose(x, y, rtol=1e-9, atol=0.0, equal_nan=True):
            return False
    return True


def drawn_rows(draw, events: list[tuple[int, str]], types: str) -> list[dict]:
    """Rows of (time, type) `events` with a drawn group `g` and attributes `x`, `y` (a
    Hypothesis `draw`), then one event of each of `types` after them (every pattern type
    occurs)."""
    rows = [
        {
            "time": tm,
            "type": ty,
            "g": draw(st.sampled_from(["u", "v"])),
            "x": draw(st.integers(0, 5)),
            "y": draw(st.integers(0, 8)) / 4,
        }
        for tm, ty in events
    ]
    t = max((tm for tm, _ in events), default=0)
    return rows + [{"time": t + 1, "type": ty, "g": "u", "x": 1, "y": 0.5} for ty in types]


def sorted_rows(table: pa.Table) -> pa.Table:
    """A result table in a canonical row order: Spark returns rows in no particular order."""
    keys = [c for c in table.column_names if c != "window_end"][
        : table.column_names.index("window_start") + 1
    ]
    # (Arrow sorts no dictionary column: by its values, the rows taken in that order)
    plain = pa.table(
        {
            k: col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col
            for k, col in ((k, table.column(k)) for k in keys)
        }
    )
    return table.take(pc.sort_indices(plain, [(k, "ascending") for k in keys]))

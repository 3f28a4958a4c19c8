"""A RETURN of GROUPBY names alone (DESIGN.md section 2's grammar: every item a NAME): the query
lists the (group, window) pairs that hold at least one trend, the rows COUNT(*) would give,
without aggregate columns (docs/semantics.md section 5)."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpu_hamlet
from gpu_hamlet.engine.options import SHARING_MODES
from gpu_hamlet.query.workload import Workload

try:  # tests/ is a rootdir-inserted folder (no __init__.py) or a package
    from compare import NUMERIC_MODES, events_to_table
    from strategies import event_streams, workload_cases, workload_types
except ImportError:  # pragma: no cover
    from tests.compare import NUMERIC_MODES, events_to_table
    from tests.strategies import event_streams, workload_cases, workload_types


def without_aggregates(wl: Workload) -> Workload:
    """Each grouped query RETURNs its GROUPBY names alone (a RETURN names at least one item)."""
    return Workload(
        tuple(replace(q, aggregates=(), group_items=q.groupby) if q.groupby else q for q in wl)
    )


def keys_of(table: pa.Table) -> pa.Table:
    """The group and window columns of a result table."""
    return table.select(table.column_names[: table.column_names.index("window_end") + 1])


@st.composite
def cases(draw):
    general, adjacent = draw(st.booleans()), draw(st.booleans())
    _, wl = draw(workload_cases(max_queries=4, general=general, adjacent=adjacent))
    events = draw(event_streams(workload_types(wl)))
    return wl, events, draw(st.sampled_from(SHARING_MODES)), draw(st.sampled_from(NUMERIC_MODES))


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases())
def test_groups_alone_are_the_rows_count_gives(case):
    """Every grouped query of random workloads (AND, NOT, NEXT, sliding windows), run without
    its aggregates in one workload with the others: its table is COUNT(*)'s keys, in every
    sharing and numeric mode (and null counts beyond a range keep their rows)."""
    wl, events, sharing, numeric = case
    table = events_to_table(events)
    opts = dict(backend="cpu", sharing=sharing, numeric=numeric, on_overflow="null")
    full = gpu_hamlet.aggregate(table, wl, **opts)
    bare = gpu_hamlet.aggregate(table, without_aggregates(wl), **opts)
    for q in wl:
        want = keys_of(full[q.name]) if q.groupby else full[q.name]
        assert bare[q.name].equals(want), q.name


@pytest.mark.parametrize("numeric", NUMERIC_MODES)
def test_groups_alone_from_text_through_a_stream_and_an_and(numeric):
    """Parsed text, `aggregate_stream` in chunks of 3 rows, and an AND whose pair count passes
    float64 in float mode (its row stays: no aggregate to overflow)."""
    table = pa.table(
        {"time": list(range(1, 9)), "type": list("ABBCABCC"), "g": [1, 1, 2, 1, 2, 2, 2, 1]}
    )
    text = (
        "q: RETURN g PATTERN SEQ(A, B+, C) GROUPBY g WITHIN 10 s;"
        "r: RETURN g, COUNT(*) PATTERN SEQ(A, B+, C) GROUPBY g WITHIN 10 s;"
        "p: RETURN g PATTERN SEQ(A, C) AND SEQ(B, C) GROUPBY g WITHIN 10 s"
    )
    got = gpu_hamlet.aggregate(table, text, backend="cpu", numeric=numeric)
    assert got["q"].to_pylist() == [
        {"g": 1, "window_start": 0, "window_end": 10},
        {"g": 2, "window_start": 0, "window_end": 10},
    ]
    assert got["q"].equals(keys_of(got["r"]))
    assert got["p"].column_names == ["g", "window_start", "window_end"]
    assert got["p"].num_rows == 2
    batches = table.to_batches(max_chunksize=3)
    streamed = gpu_hamlet.aggregate_stream(batches, text, backend="cpu", numeric=numeric)
    for name in got:
        assert streamed[name].equals(got[name]), name
    huge = pa.table({"time": range(1, 1100), "type": ["A"] * 1099, "g": [7] * 1099})
    pairs = "PATTERN A+ AND A+ GROUPBY g WITHIN 1 h"  # (2^1099 - 1 trends a side)
    if numeric == "float":  # beyond float64: the count is an error, the group's row is not
        with pytest.raises(gpu_hamlet.NumericOverflowError):
            gpu_hamlet.aggregate(huge, f"RETURN COUNT(*) {pairs}", backend="cpu", numeric=numeric)
    got = gpu_hamlet.aggregate(huge, f"RETURN g {pairs}", backend="cpu", numeric=numeric)["q1"]
    assert got.to_pylist() == [{"g": 7, "window_start": 0, "window_end": 3600}]

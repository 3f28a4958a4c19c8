"""Exact results straight from the float pass (gpu_hamlet/engine/results.py `ExactBounds`).

Where every exact channel of a query stays below 2^FLOAT_EXACT_BITS, the float pass's values are
the exact ints and no residue pass runs. These tests place values on both sides of that bound,
with negative and decimal terms, and check the ints against closed forms and which path gave
them. (Every other test's exact results are also checked against the residue passes:
tests/conftest.py `exact_from_float_checked`.)
"""

from __future__ import annotations

from decimal import Decimal
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpu_hamlet
from gpu_hamlet.core.numeric import FLOAT_EXACT_BITS
from gpu_hamlet.engine import query_rows, results
from gpu_hamlet.engine.options import SHARING_MODES
from gpu_hamlet.engine.query_rows import QueryRows
from gpu_hamlet.engine.results import QueryResults
from gpu_hamlet.errors import NumericOverflowError

try:  # tests/ is a rootdir-inserted folder (no __init__.py) or a package
    from compare import assert_matches_oracle, events_to_table
    from oracle import oracle
    from strategies import event_streams, workload_cases, workload_types
except ImportError:  # pragma: no cover
    from tests.compare import assert_matches_oracle, events_to_table
    from tests.oracle import oracle
    from tests.strategies import event_streams, workload_cases, workload_types


@st.composite
def cases(draw):
    text, wl = draw(workload_cases(max_queries=4))
    return text, wl, draw(event_streams(workload_types(wl)))


def run(events: pa.Table, workload: str, numeric: str, sharing: str = "none"):
    """The tables, and how many queries took their exact ints from the float pass."""
    with mock.patch.object(
        QueryResults, "_float_ints", autospec=True, side_effect=QueryResults._float_ints
    ) as spy:
        tables = gpu_hamlet.aggregate(
            events, workload, backend="cpu", numeric=numeric, sharing=sharing
        )
    return tables, spy.call_count


@pytest.mark.parametrize("numeric", ["exact", "bigint"])
@pytest.mark.parametrize("sharing", ["none", "dynamic"])
def test_counts_on_both_sides_of_the_bound(numeric, sharing):
    """COUNT(*) of SEQ(B+) over one window of n B events is 2^n - 1: from the float pass below
    2^FLOAT_EXACT_BITS, from residues from there on, exact either way."""
    for n, from_float in [(FLOAT_EXACT_BITS - 1, True), (FLOAT_EXACT_BITS + 1, False)]:
        events = pa.table({"time": list(range(n)), "type": ["B"] * n})
        tables, floats = run(
            events, "q: RETURN COUNT(*) PATTERN SEQ(B+) WITHIN 1 h", numeric, sharing
        )
        (value,) = tables["q"].column("count").to_pylist()
        assert int(value) == 2**n - 1
        assert floats == from_float, n


def _sums(values: list[int | Decimal], dtype: pa.DataType) -> pa.Table:
    """One A, then a B per value: SEQ(A, B) has one trend per B, so SUM(B.x) adds the values."""
    n = len(values)
    return pa.table(
        {
            "time": list(range(n + 1)),
            "type": ["A"] + ["B"] * n,
            "x": pa.array([values[0], *values], dtype),
        }
    )


SUM = "q: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B) WITHIN 1 h"


@pytest.mark.parametrize("numeric", ["exact", "bigint"])
def test_signed_sums_take_the_bound_of_their_magnitudes(numeric):
    """A sum that cancels to a small value is still weighed by the sum of its terms' magnitudes:
    below the bound it comes from the float pass, above it from residues; both exact."""
    big = 2 ** (FLOAT_EXACT_BITS - 2)
    below = [big + 3, -(big + 1), 5]  # magnitudes add to under 2^FLOAT_EXACT_BITS
    above = [big + 3, -(big + 1), big, -big + 7]  # magnitudes over it; the sum is 9
    for values, from_float in [(below, True), (above, False)]:
        tables, floats = run(_sums(values, pa.int64()), SUM, numeric)
        got = tables["q"].column("sum_B_x").to_pylist()
        assert [int(v) for v in got] == [sum(values)]
        assert floats == from_float, values


def test_decimal_sums_from_the_float_pass():
    """Decimal values add as unscaled integers: cents here, negative ones among them."""
    values = [Decimal("-5.25"), Decimal("123456789.01"), Decimal("0.07"), Decimal("-0.99")]
    tables, floats = run(_sums(values, pa.decimal128(20, 2)), SUM, "exact")
    assert tables["q"].column("sum_B_x").to_pylist() == [sum(values)]
    assert floats == 1


@pytest.mark.parametrize("sharing", ["none", "dynamic"])
def test_nulls_beyond_decimal38_need_no_residues(sharing):
    """In exact mode a count certainly beyond decimal(38) is null with on_overflow='null', so
    its window needs no residue pass: beside small windows, all come from the float pass; a
    window between 2^FLOAT_EXACT_BITS and 10^38 still gets its exact digits from residues.
    on_overflow='error' still names the window, and bigint still gives every digit."""
    big, mid = 200, FLOAT_EXACT_BITS + 3
    hour = [*range(big), 3600, 3601, *range(7200, 7200 + mid)]  # 2^200 - 1, 3, 2^55 - 1 trends
    text = "q: RETURN COUNT(*) PATTERN SEQ(B+) WITHIN 1 h"
    need: list[list[bool]] = []  # per call, the windows that need residue passes
    bounds_of = QueryResults._exact_bounds

    def exact_bounds(self, lin):
        bounds = bounds_of(self, lin)
        need.append((~bounds.row_in_float).tolist())
        return bounds

    for times, want, needed in [
        (hour[: big + 2], [None, 3], [False, False]),
        (hour, [None, 3, 2**mid - 1], [False, False, True]),
    ]:
        events = pa.table({"time": times, "type": ["B"] * len(times)})
        need.clear()
        with mock.patch.object(QueryResults, "_exact_bounds", exact_bounds):
            tables = gpu_hamlet.aggregate(
                events, text, backend="cpu", on_overflow="null", sharing=sharing
            )
        got = tables["q"].column("count").to_pylist()
        assert [None if v is None else int(v) for v in got] == want
        assert need == [needed]
        with pytest.raises(
            NumericOverflowError, match=r"in window \[0, 3600\) does not fit decimal\(38, 0\)"
        ):
            gpu_hamlet.aggregate(events, text, backend="cpu", sharing=sharing)
        tables = gpu_hamlet.aggregate(events, text, backend="cpu", numeric="bigint")
        assert [int(v) for v in tables["q"].column("count").to_pylist()] == [
            2**big - 1,
            *want[1:],
        ]


def test_residue_passes_read_only_the_windows_that_need_them():
    """Two groups, each with two windows of 2^53 - 1 trends and three small ones: the residue
    passes read the runs of the large windows alone, and every window is exact."""
    n = FLOAT_EXACT_BITS + 1
    hour = [*range(n), 3600, 3601, 7200, 10800, *range(14400, 14400 + n)]
    events = pa.table(
        {"time": hour * 2, "type": ["B"] * 2 * len(hour), "g": [1] * len(hour) + [2] * len(hour)}
    )
    text = "q: RETURN g, COUNT(*) PATTERN SEQ(B+) GROUPBY g WITHIN 1 h"
    cut = []
    cut_rows = QueryRows.restricted

    def restricted(self, gid, k):
        sub = cut_rows(self, gid, k)
        cut.append((sorted(zip(gid.tolist(), k.tolist())), sub.pos.shape[0]))
        return sub

    with (
        mock.patch.object(QueryRows, "restricted", restricted),
        mock.patch.object(query_rows, "CUT_ROWS", 0),  # (these rows are few)
    ):
        tables = gpu_hamlet.aggregate(events, text, backend="cpu", numeric="exact")
    rows = tables["q"].to_pylist()
    assert [(r["g"], int(r["count"])) for r in rows] == [
        (g, c) for g in (1, 2) for c in (2**n - 1, 3, 1, 1, 2**n - 1)
    ]
    assert cut == [([(0, 0), (0, 4), (1, 0), (1, 4)], 4 * n)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=cases(),
    sharing=st.sampled_from(SHARING_MODES),
    numeric=st.sampled_from(["exact", "bigint"]),
    bits=st.integers(1, 6),
    shift=st.sampled_from([0, 0, -7, -61, -3600]),
)
def test_a_lowered_bound_splits_windows_between_the_paths(case, sharing, numeric, bits, shift):
    """With the bound lowered, some windows of a query come from the float pass and others from
    residue passes over their own runs (sliding windows, groups, shared bursts), also before
    time 0 (negative window and pane indices): the oracle's."""
    text, wl, events = case
    events = [{**e, "time": e["time"] + shift} for e in events]
    expected = oracle(events, wl, with_magnitudes=True)
    with (
        mock.patch.object(results, "FLOAT_EXACT_BITS", bits),
        mock.patch.object(results, "RESTRICT_SHARE", 1.0),  # cut rows whatever the share
        mock.patch.object(query_rows, "CUT_ROWS", 0),  # and however few
    ):
        tables = gpu_hamlet.aggregate(
            events_to_table(events), text, backend="cpu", sharing=sharing, numeric=numeric
        )
    assert_matches_oracle(tables, expected, wl, numeric)


def test_windows_before_time_zero_keep_their_groups():
    """Sliding windows start before time 0 (k = -1): the windows needing residues are matched
    to theirs by group and index (a key of gid * span + k once took g2's for g1's)."""
    events = pa.table({"time": [0, 0, 0], "type": ["A", "A", "A"], "g": ["g1", "g1", "g2"]})
    text = "q: RETURN g, COUNT(*) PATTERN SEQ(A) GROUPBY g WITHIN 2 s SLIDE 1 s"
    with (
        mock.patch.object(results, "FLOAT_EXACT_BITS", -1),  # every window from residues
        mock.patch.object(results, "RESTRICT_SHARE", 1.0),  # over the runs of their windows
        mock.patch.object(query_rows, "CUT_ROWS", 0),
    ):
        tables = gpu_hamlet.aggregate(events, text, backend="cpu", numeric="exact")
    got = [(r["g"], r["window_start"], int(r["count"])) for r in tables["q"].to_pylist()]
    assert got == [("g1", -1, 2), ("g1", 0, 2), ("g2", -1, 1), ("g2", 0, 1)]

"""The engine against the brute-force oracle (docs/semantics.md).

Property tests draw random workloads (text, parsed by the engine; the oracle runs on a Workload
built independently by tests/strategies.py) and small event streams, and compare every aggregate
in every numeric mode. Deterministic tests cover what small random streams cannot reach: bursts
whose counts overflow decimal(38) and float64 (checked against closed forms, themselves checked
against the oracle on small bursts), GROUPBY partitioning and the input errors.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import re
from fractions import Fraction
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpu_hamlet
from gpu_hamlet import host_threads
from gpu_hamlet.core import rings
from gpu_hamlet.engine import events as events_module
from gpu_hamlet.engine import partitions
from gpu_hamlet.engine.events import EventFrame
from gpu_hamlet.engine.options import SHARING_MODES
from gpu_hamlet.engine.partitions import Partitioner
from gpu_hamlet.errors import (
    AbsentTypeWarning,
    EventDataError,
    GpuHamletError,
    NumericOverflowError,
    WorkloadError,
)
from gpu_hamlet.query.workload import Aggregate, PatternElement, Query, Workload

try:  # tests/ is a rootdir-inserted folder (no __init__.py) or a package
    from compare import (
        DECIMAL_LIMIT,
        NUMERIC_MODES,
        assert_matches_oracle,
        close,
        events_to_table,
        to_datetime,
    )
    from oracle import oracle
    from strategies import event_streams, workload_cases, workload_types
except ImportError:  # pragma: no cover
    from tests.compare import (
        DECIMAL_LIMIT,
        NUMERIC_MODES,
        assert_matches_oracle,
        close,
        events_to_table,
        to_datetime,
    )
    from tests.oracle import oracle
    from tests.strategies import event_streams, workload_cases, workload_types

aggregate = gpu_hamlet.aggregate


PROPERTY = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROPERTY_SMALL = settings(PROPERTY, max_examples=80)


def run(events, workload, **options):
    """The engine on the CPU backend (options override)."""
    options.setdefault("backend", "cpu")
    return aggregate(events, workload, **options)


@st.composite
def cases(draw, max_queries: int = 5, window_unit_ms: int = 1000):
    text, wl = draw(workload_cases(max_queries=max_queries, window_unit_ms=window_unit_ms))
    events = draw(event_streams(workload_types(wl)))
    return text, wl, events


# --------------------------------------------------------------------------------------------
# the parser reads the generated text as the strategies mean it
# --------------------------------------------------------------------------------------------


@settings(PROPERTY, max_examples=200)
@given(st.sampled_from([1000, 1000, 250, 100]).flatmap(lambda u: workload_cases(window_unit_ms=u)))
def test_parser_reads_generated_workloads(case):
    parse_workload = importlib.import_module("gpu_hamlet.query.parser").parse_workload
    text, wl = case
    parsed = parse_workload(text)
    assert parsed.names == wl.names, text
    for got, want in zip(parsed, wl):
        assert got == want, f"{text!r}\nparsed  {got!r}\nmeant   {want!r}"


# --------------------------------------------------------------------------------------------
# engine vs oracle
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
@PROPERTY
@given(cases())
def test_engine_matches_oracle_in_every_numeric_mode(case):
    text, wl, events = case
    expected = oracle(events, wl, with_magnitudes=True)
    table = events_to_table(events)
    for numeric in NUMERIC_MODES:
        tables = run(table, text, sharing="none", numeric=numeric)
        assert_matches_oracle(tables, expected, wl, numeric)


@pytest.mark.parametrize("sharing", [m for m in SHARING_MODES if m != "none"])
@PROPERTY_SMALL
@given(case=cases(), numeric=st.sampled_from(NUMERIC_MODES))
def test_shared_execution_matches_oracle(sharing, case, numeric):
    text, wl, events = case
    expected = oracle(events, wl, with_magnitudes=True)
    tables = run(events_to_table(events), text, sharing=sharing, numeric=numeric)
    assert_matches_oracle(tables, expected, wl, numeric)


@PROPERTY_SMALL
@given(case=cases(), sharing=st.sampled_from(SHARING_MODES), numeric=st.sampled_from(NUMERIC_MODES))
def test_host_threads_match_oracle(case, sharing, numeric):
    """With every host step on three threads whatever the size (gpu_hamlet/host_threads.py):
    the type column encoded in slices, the counting sort in slices, the queries' rows built
    together and every kernel call started as it comes (backend.py `_drive_started`)."""
    text, wl, events = case
    expected = oracle(events, wl, with_magnitudes=True)
    with (
        mock.patch.dict("os.environ", {"OMP_NUM_THREADS": "3"}),
        mock.patch.object(host_threads, "PARALLEL_ROWS", 0),
        mock.patch.object(host_threads, "SUBMIT_ROWS", 0),
        mock.patch.object(partitions, "SORT_SLICE", 1),
        mock.patch.object(events_module, "ENCODE_SLICE", 1),
    ):
        tables = run(events_to_table(events), text, sharing=sharing, numeric=numeric)
    assert_matches_oracle(tables, expected, wl, numeric)


@PROPERTY_SMALL
@given(case=cases(), sharing=st.sampled_from(SHARING_MODES))
def test_bigint_lanes_match_oracle_at_any_size(case, sharing):
    """bigint's 32-prime lanes ('modps') on every kernel the workload takes, however small the
    counts: the engine runs them only from MODPS_FROM primes on (gpu_hamlet/core/rings.py)."""
    text, wl, events = case
    expected = oracle(events, wl, with_magnitudes=True)
    with mock.patch.object(rings, "MODPS_FROM", 1):
        tables = run(events_to_table(events), text, sharing=sharing, numeric="bigint")
    assert_matches_oracle(tables, expected, wl, "bigint")


@PROPERTY_SMALL
@given(case=cases(), sharing=st.sampled_from(SHARING_MODES))
def test_exact_lanes_match_oracle_at_any_size(case, sharing):
    """The exact mode's 8-prime lanes ('modps8') on every kernel the workload takes, however
    small the counts: the engine runs them only from MODPS8_FROM primes on (one prime runs in
    'modp')."""
    text, wl, events = case
    expected = oracle(events, wl, with_magnitudes=True)
    with mock.patch.object(rings, "MODPS8_FROM", 1):
        tables = run(events_to_table(events), text, sharing=sharing, numeric="exact")
    assert_matches_oracle(tables, expected, wl, "exact")


@PROPERTY_SMALL
@given(cases(), st.randoms(use_true_random=False), st.sampled_from(NUMERIC_MODES))
def test_input_order_does_not_matter(case, rnd, numeric):
    text, wl, events = case
    shuffled = list(events)
    rnd.shuffle(shuffled)
    a = run(events_to_table(events), text, numeric=numeric, sharing="none")
    b = run(events_to_table(shuffled), text, numeric=numeric, sharing="none")
    for name in wl.names:
        assert a[name].equals(b[name]), f"{name}: {a[name].to_pylist()} != {b[name].to_pylist()}"


@PROPERTY_SMALL
@given(cases(), st.sampled_from(NUMERIC_MODES), st.sampled_from(SHARING_MODES))
def test_input_grouped_by_partition_equals_time_order(case, numeric, sharing):
    """Events grouped by the first query's partition attributes, each partition in time order,
    give the same tables as time order (both take the engine's counting sort)."""
    text, wl, events = case
    attrs = wl.queries[0].partition_attrs
    grouped = sorted(events, key=lambda e: (tuple(str(e.get(a)) for a in attrs), e["time"]))
    a = run(events_to_table(events), text, numeric=numeric, sharing=sharing)
    b = run(events_to_table(grouped), text, numeric=numeric, sharing=sharing)
    for name in wl.names:
        assert a[name].equals(b[name]), f"{name}: {a[name].to_pylist()} != {b[name].to_pylist()}"


def test_partition_order_when_times_come_in_order():
    """Rows go by partition (codes in order of first appearance), keeping their order within a
    partition when its times come in order, else sorted by time."""

    def keys(table: pa.Table):
        n = table.num_rows
        frame = EventFrame(table, table.column("time").to_numpy(), None, np.zeros(n, np.int32), [])
        return Partitioner(frame).keys(("g",), 1)

    table = pa.table({"time": [5, 9, 1, 2, 7], "g": ["v", "v", "u", "u", "w"]})
    k = keys(table)
    assert k.order.tolist() == [0, 1, 2, 3, 4] and k.pid.tolist() == [0, 0, 1, 1, 2]
    k = keys(table.take([0, 2, 1, 3, 4]))  # u and v interleaved
    assert k.order.tolist() == [0, 2, 1, 3, 4] and k.time.tolist() == [5, 9, 1, 2, 7]
    assert k.pid.tolist() == k.gid.tolist() == [0, 0, 1, 1, 2]
    k = keys(table.take([1, 0, 2, 3, 4]))  # v's times out of order
    assert k.order.tolist() == [1, 0, 2, 3, 4] and k.pid.tolist() == [0, 0, 1, 1, 2]


def test_counting_sort_places_codes_and_times_with_the_rows():
    """The counting sort writes the sorted partition and group codes and times as it places the
    rows: they equal the rows' own, taken in its order."""
    rng = np.random.default_rng(3)
    n = 2_000
    g, e = rng.integers(0, 7, n), rng.integers(0, 5, n)
    table = pa.table({"time": np.sort(rng.integers(0, 500, n)), "g": g, "e": e})
    frame = EventFrame(table, table.column("time").to_numpy(), None, np.zeros(n, np.int32), [])
    k = Partitioner(frame).keys(("g", "e"), 1)
    assert np.array_equal(k.time, table.column("time").to_numpy()[k.order])
    assert np.all(np.diff(k.pid) >= 0) and np.all(np.diff(k.time)[np.diff(k.pid) == 0] >= 0)
    same_pid = k.pid[1:] == k.pid[:-1]
    assert np.array_equal(
        same_pid, (g[k.order][1:] == g[k.order][:-1]) & (e[k.order][1:] == e[k.order][:-1])
    )
    # group codes: one per value, 0 up (integers over a narrow range are coded by rank)
    assert np.array_equal(k.gid, np.unique(g, return_inverse=True)[1][k.order])
    assert np.array_equal(k.gid_of_pid[k.pid], k.gid)  # each partition's group, per id


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([pa.int8(), pa.int16(), pa.int64(), pa.uint8(), pa.uint64()]),
    st.lists(st.integers(0, 2**64 - 1), max_size=40),
    st.integers(1, 3),
    st.booleans(),
)
def test_partition_codes_are_one_per_value(typ, raw, chunks, nulls):
    """A partition attribute's codes: equal values (a null being one value) share a code, and
    the codes are 0 up to the number of values; the same for integers coded by rank within
    their range and for those hashed (a wide range, or nulls)."""
    bits = typ.bit_width
    lo = -(2 ** (bits - 1)) if pa.types.is_signed_integer(typ) else 0
    values = [lo + r % 2**bits for r in raw]
    if nulls and values:
        values[0] = None
    arr = pa.array(values, typ)
    step = -(-len(values) // chunks) or 1
    col = pa.chunked_array([arr.slice(i, step) for i in range(0, len(values), step)], typ)
    codes, n = partitions._codes(col)
    keys = [("null",) if v is None else v for v in values]
    assert n == len(set(keys))
    assert len(set(zip(keys, codes.tolist()))) == n
    assert sorted(set(codes.tolist())) == list(range(n))


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
@pytest.mark.parametrize("across", [False, True])
def test_counting_sort_in_slices_equals_one_stable_sort(monkeypatch, threads, across):
    """The counting sort counts and places slices of the rows on several threads: the order is
    the stable sort by (partition, time) whatever the slices, and a partition whose times go
    down from one slice to a later one (`across`) is no counting-sort input at all."""
    monkeypatch.setattr(partitions, "SORT_SLICE", 1)
    monkeypatch.setattr(partitions, "cpu_threads", lambda: threads)
    rng = np.random.default_rng(threads)
    n = 1_000
    g = rng.integers(0, 9, n)
    t = np.sort(rng.integers(0, 300, n))
    if across:  # partition 0's rows from row 500 on before its earlier ones: with two
        # slices, each slice's times go up and only the step from one to the next goes down
        at = np.flatnonzero(g == 0)
        t[at[at >= n // 2]] -= 1_000
    table = pa.table({"time": t, "g": g})
    frame = EventFrame(table, t, None, rng.integers(0, 4, n).astype(np.int32), [])
    k = Partitioner(frame).keys(("g",), 1)
    want = np.lexsort((t, k.pid[np.argsort(k.order)]))
    assert np.array_equal(k.order, want)
    assert np.array_equal(k.codes, frame.type_codes[want]) and np.array_equal(k.time, t[want])
    counted = partitions._counting_sort(k.pid[np.argsort(k.order)], k.gid, t, frame.type_codes, 9)
    assert (counted is None) == across


@PROPERTY_SMALL
@given(cases(), st.sampled_from(NUMERIC_MODES))
def test_pandas_input_equals_arrow_input(case, numeric):
    text, wl, events = case
    table = events_to_table(events)
    a = run(table, text, numeric=numeric)
    b = run(table.to_pandas(), text, numeric=numeric)
    for name in wl.names:
        # pandas >= 3 strings come back to Arrow as large_string: the same values either way
        got = _large_string_as_string(b[name])
        assert a[name].equals(got), f"{name}: arrow {a[name]}\npandas {b[name]}"


def test_empty_pandas_object_columns_read_as_strings():
    """pandas < 3 keeps strings in object columns; an empty one reaches Arrow untyped (null)."""
    import pandas as pd

    events = pd.DataFrame(
        {
            "time": pd.Series([], dtype="int64"),
            "type": pd.Series([], dtype=object),
            "g": pd.Series([], dtype=object),
        }
    )
    got = run(
        events, "RETURN g, COUNT(*) PATTERN SEQ(A, B+) WHERE A.g = 'x' GROUPBY g WITHIN 1 min"
    )["q1"]
    assert got.num_rows == 0 and got.schema.field("g").type == pa.string()


def _large_string_as_string(table: pa.Table) -> pa.Table:
    schema = pa.schema(
        [
            pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f
            for f in table.schema
        ]
    )
    return table.cast(schema)


def _as_time_type(events: list[dict], time_type: pa.DataType) -> list[dict]:
    """The oracle's events with int seconds as datetimes (aware for a zoned type) or floats."""
    if isinstance(time_type, pa.TimestampType):
        aware = time_type.tz is not None
        return [dict(e, time=to_datetime(e["time"], aware=aware)) for e in events]
    return [dict(e, time=float(e["time"])) for e in events]


@PROPERTY_SMALL
@given(
    cases(max_queries=3),
    st.sampled_from(
        [
            pa.timestamp("us"),
            pa.timestamp("ms"),
            pa.timestamp("ns"),
            pa.timestamp("us", tz="UTC"),
            pa.float64(),
        ]
    ),
)
def test_timestamp_and_float_time_columns(case, time_type):
    text, wl, events = case
    table = events_to_table(events, time_type=time_type)
    expected = oracle(_as_time_type(events, time_type), wl, with_magnitudes=True)
    tables = run(table, text, numeric="exact")
    assert_matches_oracle(tables, expected, wl, "exact", time_type=time_type)
    # the same aggregates as with int seconds
    ints = run(events_to_table(events), text, numeric="exact")
    for name in wl.names:
        bounds = ["window_start", "window_end"]
        assert tables[name].drop_columns(bounds).equals(ints[name].drop_columns(bounds)), name


@PROPERTY_SMALL
@given(
    st.sampled_from(
        [(pa.timestamp("us"), 100), (pa.timestamp("ms", tz="UTC"), 100), (pa.float64(), 250)]
    ).flatmap(lambda tu: st.tuples(st.just(tu[0]), cases(max_queries=3, window_unit_ms=tu[1])))
)
def test_subsecond_windows_on_timestamp_and_float_times(args):
    time_type, (text, wl, events) = args
    table = events_to_table(events, time_type=time_type)
    expected = oracle(_as_time_type(events, time_type), wl, with_magnitudes=True)
    assert_matches_oracle(
        run(table, text, numeric="exact"), expected, wl, "exact", time_type=time_type
    )


# --------------------------------------------------------------------------------------------
# closed forms for SEQ(A, B+) bursts, checked against the oracle
# --------------------------------------------------------------------------------------------


def seq_a_bplus_closed_form(n_a: int, b_groups: list[list[int]]) -> dict:
    """Aggregates of SEQ(A, B+) when ``n_a`` A events come strictly before all B events and the B
    events come in timestamp groups ``b_groups`` (the x values of the B's of each timestamp).

    A trend is one A and a non-empty chain taking at most one B per timestamp: with
    P = prod(1 + m_j), there are n_a * (P - 1) trends, and a B of group j is in
    n_a * P / (1 + m_j) of them (itself at j, any choice at every other timestamp).
    """
    P = math.prod(1 + len(g) for g in b_groups)
    count = n_a * (P - 1)
    count_b = n_a * sum(len(g) * (P // (1 + len(g))) for g in b_groups)
    sum_b = n_a * sum(sum(g) * (P // (1 + len(g))) for g in b_groups)
    avg_num = sum(Fraction(sum(g), 1 + len(g)) for g in b_groups)
    avg_den = sum(Fraction(len(g), 1 + len(g)) for g in b_groups)
    xs = [x for g in b_groups for x in g]
    return {
        "count": count,
        "count_A": count,
        "count_B": count_b,
        "sum_B_x": sum_b,
        "avg_B_x": avg_num / avg_den if avg_den else None,
        "min_B_x": min(xs) if xs and n_a else None,
        "max_B_x": max(xs) if xs and n_a else None,
    }


def burst_events(n_a: int, b_groups: list[list[int]], *, t0: int = 0, g: str = "g1") -> list[dict]:
    """n_a A events at t0, then group j of B events at t0 + 1 + j (x values from b_groups)."""
    evs = [dict(time=t0, type="A", g=g, k=0, x=0, y=0.0, s="u") for _ in range(n_a)]
    for j, grp in enumerate(b_groups):
        for x in grp:
            evs.append(dict(time=t0 + 1 + j, type="B", g=g, k=0, x=x, y=x / 4, s="u"))
    return evs


BURST_AGGS = (
    Aggregate("COUNT", None, None, "count"),
    Aggregate("COUNT", "A", None, "count_A"),
    Aggregate("COUNT", "B", None, "count_B"),
    Aggregate("SUM", "B", "x", "sum_B_x"),
    Aggregate("AVG", "B", "x", "avg_B_x"),
    Aggregate("MIN", "B", "x", "min_B_x"),
    Aggregate("MAX", "B", "x", "max_B_x"),
)
BURST_RETURN = "COUNT(*), COUNT(A), COUNT(B), SUM(B.x), AVG(B.x), MIN(B.x), MAX(B.x)"


def burst_query(name="burst", within_s=100_000, groupby=()) -> Query:
    return Query(
        name=name,
        pattern=(PatternElement("A"), PatternElement("B", True)),
        aggregates=BURST_AGGS,
        groupby=tuple(groupby),
        group_items=tuple(groupby),
        within_ms=within_s * 1000,
        slide_ms=within_s * 1000,
    )


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 3), st.lists(st.lists(st.integers(-3, 6), min_size=1, max_size=3), max_size=6)
)
def test_closed_form_matches_oracle(n_a, b_groups):
    (row,) = oracle(burst_events(n_a, b_groups), Workload((burst_query(),)))["burst"] or [None]
    want = seq_a_bplus_closed_form(n_a, b_groups)
    if want["count"] == 0:
        assert row is None
        return
    got = {k: v for k, v in row.items() if k not in ("window_start", "window_end")}
    assert got == want


def test_closed_form_examples():
    assert seq_a_bplus_closed_form(1, [[1]] * 3)["count"] == 7
    assert seq_a_bplus_closed_form(1, [[1]] * 130)["count"] == 2**130 - 1
    f = seq_a_bplus_closed_form(1, [[2], [5]])
    assert (f["count"], f["count_B"], f["sum_B_x"], f["avg_B_x"]) == (3, 4, 14, Fraction(7, 2))
    f = seq_a_bplus_closed_form(1, [[1, 2], [3]])  # chains: 1, 2, 3, 1-3, 2-3
    assert (f["count"], f["count_B"], f["sum_B_x"]) == (5, 7, 1 + 2 + 3 + 4 + 5)


# --------------------------------------------------------------------------------------------
# overflow: decimal(38) in "exact", exact digits in "bigint", float64 in "float"
# --------------------------------------------------------------------------------------------

# g1: 1 A, then 160 B's over 100 timestamps with multiplicities 1, 2, 1, 3, ... (equal timestamps
# inside the burst): P = 2^50 * 3^25 * 4^25 > 10^38. g2: a small burst. One window: [2000, 3000).
_MULT = [1, 2, 1, 3] * 25
G1_GROUPS = [[1 + (j + i) % 5 for i in range(m)] for j, m in enumerate(_MULT)]
G2_GROUPS = [[4], [-2, 7]]
OVERFLOW_T0 = 2000
OVERFLOW_WINDOW = (2000, 3000)
OVERFLOW_TEXT = f"burst: RETURN g, {BURST_RETURN} PATTERN SEQ(A, B+) GROUPBY g WITHIN 1000 s"


def overflow_events():
    return burst_events(1, G1_GROUPS, t0=OVERFLOW_T0, g="g1") + burst_events(
        1, G2_GROUPS, t0=OVERFLOW_T0 + 50, g="g2"
    )


def test_overflow_fixture_is_an_overflow():
    f = seq_a_bplus_closed_form(1, G1_GROUPS)
    assert (
        f["count"] >= DECIMAL_LIMIT
        and f["count_B"] >= DECIMAL_LIMIT
        and f["sum_B_x"] >= DECIMAL_LIMIT
    )
    assert f["count"] < 2**200


@pytest.mark.parametrize("sharing", SHARING_MODES)
def test_overflow_exact_raises(sharing):
    with pytest.raises(NumericOverflowError) as info:
        run(events_to_table(overflow_events()), OVERFLOW_TEXT, numeric="exact", sharing=sharing)
    msg = str(info.value)
    assert "burst" in msg, f"the query is not named: {msg}"
    assert "g1" in msg, f"the group is not named: {msg}"
    assert str(OVERFLOW_T0) in msg, f"the window (starting at {OVERFLOW_T0}) is not named: {msg}"
    assert "bigint" in msg and "on_overflow" in msg, f"the ways out are not named: {msg}"


def test_overflow_exact_null():
    tables = run(
        events_to_table(overflow_events()), OVERFLOW_TEXT, numeric="exact", on_overflow="null"
    )
    rows = tables["burst"].to_pylist()
    assert [r["g"] for r in rows] == ["g1", "g2"]
    g1, g2 = rows
    f1, f2 = seq_a_bplus_closed_form(1, G1_GROUPS), seq_a_bplus_closed_form(1, G2_GROUPS)
    assert (
        g1["count"] is None
        and g1["count_A"] is None
        and g1["count_B"] is None
        and g1["sum_B_x"] is None
    )
    assert close(g1["avg_B_x"], f1["avg_B_x"])
    assert (g1["min_B_x"], g1["max_B_x"]) == (f1["min_B_x"], f1["max_B_x"])
    assert (g1["window_start"], g1["window_end"]) == OVERFLOW_WINDOW
    for key in ("count", "count_A", "count_B", "sum_B_x"):
        assert g2[key] == f2[key], key
    # the same through the generic comparison
    wl = Workload((burst_query(within_s=1000, groupby=("g",)),))
    expected = {
        "burst": [
            dict(g="g1", window_start=OVERFLOW_WINDOW[0], window_end=OVERFLOW_WINDOW[1], **f1),
            dict(g="g2", window_start=OVERFLOW_WINDOW[0], window_end=OVERFLOW_WINDOW[1], **f2),
        ]
    }
    assert_matches_oracle(tables, expected, wl, "exact", on_overflow="null")


@pytest.mark.parametrize("sharing", SHARING_MODES)
def test_overflow_bigint_exact_digits(sharing):
    tables = run(
        events_to_table(overflow_events()), OVERFLOW_TEXT, numeric="bigint", sharing=sharing
    )
    rows = tables["burst"].to_pylist()
    f1, f2 = seq_a_bplus_closed_form(1, G1_GROUPS), seq_a_bplus_closed_form(1, G2_GROUPS)
    assert rows[0]["count"] == str(f1["count"])
    wl = Workload((burst_query(within_s=1000, groupby=("g",)),))
    expected = {
        "burst": [
            dict(g="g1", window_start=OVERFLOW_WINDOW[0], window_end=OVERFLOW_WINDOW[1], **f1),
            dict(g="g2", window_start=OVERFLOW_WINDOW[0], window_end=OVERFLOW_WINDOW[1], **f2),
        ]
    }
    assert_matches_oracle(tables, expected, wl, "bigint")


def test_overflow_float():
    tables = run(events_to_table(overflow_events()), OVERFLOW_TEXT, numeric="float")
    wl = Workload((burst_query(within_s=1000, groupby=("g",)),))
    f1, f2 = seq_a_bplus_closed_form(1, G1_GROUPS), seq_a_bplus_closed_form(1, G2_GROUPS)
    expected = {
        "burst": [
            dict(g="g1", window_start=OVERFLOW_WINDOW[0], window_end=OVERFLOW_WINDOW[1], **f1),
            dict(g="g2", window_start=OVERFLOW_WINDOW[0], window_end=OVERFLOW_WINDOW[1], **f2),
        ]
    }
    assert_matches_oracle(tables, expected, wl, "float")


def test_plain_burst_of_130_is_2_pow_n_minus_1():
    events = burst_events(1, [[1]] * 130)
    text = "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 h"
    (row,) = run(events_to_table(events), text, numeric="bigint")["q1"].to_pylist()
    assert row["count"] == str(2**130 - 1)
    (row,) = run(events_to_table(events), text, numeric="float")["q1"].to_pylist()
    assert close(row["count"], 2**130 - 1)
    with pytest.raises(NumericOverflowError):
        run(events_to_table(events), text, numeric="exact")


# --------------------------------------------------------------------------------------------
# AVG over a burst of 5,000 B events: counts far beyond float64, AVG still to 1e-9
# --------------------------------------------------------------------------------------------

_BIG_MULT = ([1, 2, 3, 1, 1, 4] * 500)[:2300]
BIG_GROUPS = []
_i = 0
for _m in _BIG_MULT:
    BIG_GROUPS.append([(7 * (_i + r)) % 23 - 5 for r in range(_m)])
    _i += _m
BIG_GROUPS[-1].extend([3] * (5000 - _i))  # exactly 5,000 B events
BIG_TEXT = (
    "big: RETURN AVG(B.x), AVG(B.y), MIN(B.x), MAX(B.y), COUNT(B) AS n_b "
    "PATTERN SEQ(A, B+) WITHIN 1 h"
)


def test_big_burst_fixture():
    assert sum(len(g) for g in BIG_GROUPS) == 5000
    f = seq_a_bplus_closed_form(1, BIG_GROUPS)
    assert f["count"] > 10**1000  # far beyond float64


@pytest.mark.parametrize("numeric", NUMERIC_MODES)
def test_avg_over_a_burst_of_5000(numeric):
    events = burst_events(1, BIG_GROUPS)
    f = seq_a_bplus_closed_form(1, BIG_GROUPS)
    text = "big: RETURN AVG(B.x), AVG(B.y), MIN(B.x), MAX(B.y) PATTERN SEQ(A, B+) WITHIN 1 h"
    (row,) = run(events_to_table(events), text, numeric=numeric)["big"].to_pylist()
    assert close(row["avg_B_x"], f["avg_B_x"]), (row["avg_B_x"], float(f["avg_B_x"]))
    # y = x / 4 for every B, so AVG(B.y) = AVG(B.x) / 4
    assert close(row["avg_B_y"], f["avg_B_x"] / 4), (row["avg_B_y"], float(f["avg_B_x"] / 4))
    assert row["min_B_x"] == f["min_B_x"]
    assert row["max_B_y"] == max(x / 4 for g in BIG_GROUPS for x in g)


def test_counts_of_a_burst_of_5000_in_bigint():
    events = burst_events(1, BIG_GROUPS)
    f = seq_a_bplus_closed_form(1, BIG_GROUPS)
    (row,) = run(events_to_table(events), BIG_TEXT, numeric="bigint")["big"].to_pylist()
    assert row["n_b"] == str(f["count_B"])
    assert close(row["avg_B_x"], f["avg_B_x"])


# --------------------------------------------------------------------------------------------
# GROUPBY partitions, custom column names, empty input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("numeric", NUMERIC_MODES)
def test_results_are_partitioned_by_groupby(numeric):
    groups = {"g2": [[3], [1, 2]], "g1": [[5], [5], [-1]]}
    events = []
    for g, grp in groups.items():
        events += burst_events(2, grp, t0=10, g=g)
        events += burst_events(1, grp, t0=100, g=g)  # a second window (WITHIN 60 s)
    events = [dict(e, k=i % 2) for i, e in enumerate(events)]
    # GROUPBY g over both windows
    text = f"RETURN {BURST_RETURN} PATTERN SEQ(A, B+) GROUPBY g WITHIN 1 min"
    wl = Workload((burst_query("q1", within_s=60, groupby=("g",)),))
    expected = oracle(events, wl, with_magnitudes=True)
    assert [(r["g"], r["window_start"]) for r in expected["q1"]] == [
        ("g1", 0),
        ("g1", 60),
        ("g2", 0),
        ("g2", 60),
    ]
    for r in expected["q1"]:
        f = seq_a_bplus_closed_form(2 if r["window_start"] == 0 else 1, groups[r["g"]])
        assert {k: r[k] for k in f} == f
    assert_matches_oracle(
        run(events_to_table(events), text, numeric=numeric), expected, wl, numeric
    )
    # GROUPBY on an int column, and on two columns
    for groupby in (("k",), ("g", "k")):
        text = f"RETURN {BURST_RETURN} PATTERN SEQ(A, B+) GROUPBY {', '.join(groupby)} WITHIN 1 min"
        wl = Workload((burst_query("q1", within_s=60, groupby=groupby),))
        expected = oracle(events, wl, with_magnitudes=True)
        assert expected["q1"], groupby
        assert_matches_oracle(
            run(events_to_table(events), text, numeric=numeric), expected, wl, numeric
        )


def test_custom_time_and_type_column_names():
    events = burst_events(1, [[1], [2, 3]])
    table = events_to_table(events).rename_columns(
        [
            "ev_time" if c == "time" else "ev_kind" if c == "type" else c
            for c in events_to_table(events).column_names
        ]
    )
    (row,) = run(
        table,
        "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 10 s",
        time_col="ev_time",
        type_col="ev_kind",
        numeric="bigint",
    )["q1"].to_pylist()
    assert row == {"window_start": 0, "window_end": 10, "count": "5"}


@pytest.mark.parametrize("numeric", NUMERIC_MODES)
def test_empty_input_gives_empty_tables(numeric):
    text = (
        f"RETURN g, {BURST_RETURN} PATTERN SEQ(A, B+) GROUPBY g WITHIN 1 min; "
        "RETURN COUNT(*) PATTERN C+ WITHIN 5 s"
    )
    tables = run(events_to_table([]), text, numeric=numeric)
    wl = Workload(
        (
            burst_query("q1", within_s=60, groupby=("g",)),
            Query(
                "q2",
                (PatternElement("C", True),),
                (Aggregate("COUNT", None, None, "count"),),
                within_ms=5000,
                slide_ms=5000,
            ),
        )
    )
    assert_matches_oracle(tables, {"q1": [], "q2": []}, wl, numeric)


def test_an_input_of_no_batches_gives_empty_tables():
    """A table of zero batches has columns of zero chunks, which Arrow cannot combine for some
    types (a dictionary of dates here)."""
    schema = pa.schema(
        [
            ("time", pa.timestamp("s")),
            ("type", pa.string()),
            ("d", pa.dictionary(pa.int32(), pa.date32())),
            ("x", pa.decimal128(10, 2)),
        ]
    )
    text = "q: RETURN d, COUNT(*), SUM(B.x) PATTERN SEQ(A, B) GROUPBY d WITHIN 5 s"
    for numeric in NUMERIC_MODES:
        table = run(pa.Table.from_batches([], schema), text, numeric=numeric)["q"]
        assert table.num_rows == 0 and table.column_names[0] == "d"


# --------------------------------------------------------------------------------------------
# input errors name the column
# --------------------------------------------------------------------------------------------

_SIMPLE = "RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+) WITHIN 10 s"


def _renamed(table: pa.Table, **names) -> pa.Table:
    return table.rename_columns([names.get(c, c) for c in table.column_names])


def test_null_time_is_an_error():
    table = _renamed(events_to_table(burst_events(1, [[1], [2]])), time="ev_time")
    times = table.column("ev_time").to_pylist()
    times[1] = None
    table = table.set_column(
        table.column_names.index("ev_time"), "ev_time", pa.array(times, pa.int64())
    )
    with pytest.raises(EventDataError, match="ev_time"):
        run(table, _SIMPLE, time_col="ev_time")


def test_null_type_is_an_error():
    table = _renamed(events_to_table(burst_events(1, [[1], [2]])), type="ev_kind")
    kinds = table.column("ev_kind").to_pylist()
    kinds[2] = None
    table = table.set_column(
        table.column_names.index("ev_kind"), "ev_kind", pa.array(kinds, pa.string())
    )
    with pytest.raises(EventDataError, match="ev_kind"):
        run(table, _SIMPLE, type_col="ev_kind")


def test_missing_attribute_column_is_an_error():
    table = events_to_table(burst_events(1, [[1], [2]]))
    with pytest.raises(EventDataError, match="amount"):
        run(table, "RETURN SUM(B.amount) PATTERN SEQ(A, B+) WITHIN 10 s")
    with pytest.raises(EventDataError, match="amount"):
        run(table, "RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.amount > 3 WITHIN 10 s")
    with pytest.raises(EventDataError, match="region"):
        run(table, "RETURN COUNT(*) PATTERN SEQ(A, B+) GROUPBY region WITHIN 10 s")
    with pytest.raises(EventDataError, match="region"):
        run(table, "RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE [region] WITHIN 10 s")
    with pytest.raises(EventDataError, match="ev_time"):
        run(table, _SIMPLE, time_col="ev_time")
    with pytest.raises(EventDataError, match="ev_kind"):
        run(table, _SIMPLE, type_col="ev_kind")


@pytest.mark.parametrize("bad", [pa.string(), pa.bool_(), pa.date32(), pa.float16()])
def test_unsupported_time_type_is_an_error(bad):
    table = _renamed(events_to_table(burst_events(1, [[1], [2]])), time="ev_time")
    times = table.column("ev_time")
    if bad == pa.string():
        col = pa.array([str(t) for t in times.to_pylist()], pa.string())
    elif bad == pa.bool_():
        col = pa.array([bool(t) for t in times.to_pylist()], pa.bool_())
    elif bad == pa.float16():  # (float32 and float64 only: semantics.md section 1)
        col = pa.array(np.asarray(times.to_pylist(), np.float16), pa.float16())
    else:
        col = pa.array(times.to_pylist(), pa.int32()).cast(pa.date32())
    table = table.set_column(table.column_names.index("ev_time"), "ev_time", col)
    with pytest.raises(EventDataError, match="ev_time"):
        run(table, _SIMPLE, time_col="ev_time")


@pytest.mark.parametrize("clause", ["GROUPBY g", "WHERE [g]"])
@pytest.mark.parametrize("nested", [pa.list_(pa.int64()), pa.struct([("a", pa.int64())])], ids=str)
def test_nested_group_columns_are_an_error_naming_them(clause, nested):
    """A list or struct column cannot group events: the error names the query and the column,
    where Arrow's own said neither."""
    table = pa.table(
        {"time": [1, 2], "type": ["A", "B"], "g": pa.array([[1], [2]] if nested.num_fields == 1
         and pa.types.is_list(nested) else [{"a": 1}, {"a": 2}], nested)}
    )  # fmt: skip
    with pytest.raises(WorkloadError, match=r"query q1: .*'g' is " + re.escape(str(nested))):
        run(table, f"RETURN COUNT(*) PATTERN SEQ(A, B) {clause} WITHIN 10 s")


def test_pattern_type_absent_from_the_data_is_a_warning():
    table = events_to_table(burst_events(1, [[1], [2]]))
    with pytest.warns(AbsentTypeWarning, match="Dropoff"):
        got = run(table, "RETURN COUNT(*) PATTERN SEQ(A, B+, Dropoff) WITHIN 10 s")
    assert got["q1"].num_rows == 0
    assert issubclass(EventDataError, GpuHamletError)


@PROPERTY_SMALL
@given(cases(max_queries=3), st.booleans())
def test_dictionary_encoded_type_column(case, duplicate_names):
    """A dictionary type column (how Spark tasks receive types) is read as it is; a dictionary
    whose names repeat (legal in Arrow) is decoded first. Same results as plain strings."""
    text, wl, events = case
    table = events_to_table(events)
    i = table.column_names.index("type")
    enc = table.column("type").combine_chunks().dictionary_encode()
    if duplicate_names:  # every name twice; rows use either copy
        names = enc.dictionary.to_pylist()
        idx = enc.indices.to_numpy(zero_copy_only=False).astype("int32")
        idx = idx + len(names) * (idx % 2)
        enc = pa.DictionaryArray.from_arrays(pa.array(idx), pa.array(names + names, pa.string()))
    got = run(table.set_column(i, "type", enc), text, numeric="exact")
    want = run(table, text, numeric="exact")
    for name in wl.names:
        assert got[name].equals(want[name]), name

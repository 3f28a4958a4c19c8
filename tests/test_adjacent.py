"""Conditions between adjacent events (`X.a op NEXT(Y).b`, docs/semantics.md section 2) against
the brute-force oracle, which drops every enumerated trend with a violating adjacent pair
(tests/oracle.py): hand-counted examples, then random workloads (flat and general patterns,
filters, GROUPBY, equivalence, sliding windows) in every numeric and sharing mode, on the CPU
backend, the GPU backend (numba's CUDA simulator without a device) and through Spark."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import gpu_hamlet
from gpu_hamlet import parse_workload
from gpu_hamlet.engine.adjacent import KeyRanks, _ranks_of_rows, sorted_by
from gpu_hamlet.engine.options import SHARING_MODES
from gpu_hamlet.errors import EventDataError, WorkloadError

try:
    from compare import (
        NUMERIC_MODES,
        ORACLE_SETTINGS,
        assert_matches_oracle,
        events_to_table,
        sorted_rows,
    )
    from oracle import oracle
    from strategies import event_streams, workload_cases, workload_types
except ImportError:  # pragma: no cover
    from tests.compare import (
        NUMERIC_MODES,
        ORACLE_SETTINGS,
        assert_matches_oracle,
        events_to_table,
        sorted_rows,
    )
    from tests.oracle import oracle
    from tests.strategies import event_streams, workload_cases, workload_types


def count(text: str, rows: list[dict], **options) -> int:
    got = gpu_hamlet.aggregate(pa.Table.from_pylist(rows), text, backend="cpu", **options)
    out = got["q1"].to_pylist()
    return int(out[0]["count"]) if out else 0


def ticks(values: list, times: list[int] | None = None, type_: str = "S") -> list[dict]:
    times = times or list(range(1, len(values) + 1))
    return [{"time": t, "type": type_, "p": v} for t, v in zip(times, values)]


def oracle_count(text: str, rows: list[dict]) -> int:
    expected = oracle(rows, parse_workload(text))["q1"]
    return expected[0]["count"] if expected else 0


RISING = "RETURN COUNT(*) PATTERN S+ WHERE S.p {op} NEXT(S).p WITHIN 1 h"


@pytest.mark.parametrize(
    "op, values, times, trends",
    [
        # 4 singles + (1,3) (1,2) (1,4) (3,4) (2,4) + (1,3,4) (1,2,4)
        ("<", [1, 3, 2, 4], None, 11),
        ("<=", [1, 1, 1], None, 7),  # every subsequence
        ("<", [1, 1, 1], None, 3),  # singles only
        ("=", [2, 1, 2, 2], None, 4 + 3 + 1),  # pairs among the three 2s, one triple
        ("!=", [1, 2, 1], None, 3 + 2 + 1),  # not (1, 1)
        ("<", [1, 2, 3], [1, 1, 2], 3 + 2),  # 1 and 2 share a timestamp: no (1, 2)
        ("<", [1, None, 2], None, 3 + 1),  # a null is never adjacent
        (">", [float("nan"), 1.0, 0.5], None, 3 + 1),  # NaN fails every order
        ("!=", [float("nan"), float("nan")], None, 2 + 1),  # NaN != NaN
        ("=", [-0.0, 0.0], None, 2 + 1),  # -0.0 equals 0.0
    ],
)
def test_hand_counted_examples(op, values, times, trends):
    rows = ticks(values, times)
    text = RISING.format(op=op)
    assert count(text, rows) == trends
    assert oracle_count(text, rows) == trends


def test_conditions_across_types_negation_and_conjunction():
    rows = [
        {"time": 1, "type": "A", "p": 5},
        {"time": 2, "type": "B", "p": 6},
        {"time": 3, "type": "B", "p": 4},
        {"time": 4, "type": "N", "p": 0},
        {"time": 5, "type": "B", "p": 7},
    ]
    # a1 b2, a1 b2 b5 (6 < 7), a1 b5 (b3 and b5 cross the N only after a B)
    text = "RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE A.p < NEXT(B).p AND B.p < NEXT(B).p WITHIN 1 h"
    assert count(text, rows) == 3
    negated = text.replace("SEQ(A, B+)", "SEQ(A, B+, NOT N, B)")
    for t in (text, negated):
        assert count(t, rows) == oracle_count(t, rows)
    both = "RETURN COUNT(*) PATTERN B+ AND SEQ(A, B) WHERE B.p < NEXT(B).p WITHIN 1 h"
    assert count(both, rows) == oracle_count(both, rows)


@pytest.mark.parametrize(
    "text, message",
    [
        ("RETURN COUNT(*) PATTERN S+ WHERE S.p < NEXT(S).name WITHIN 1 h", "cannot be compared"),
        ("RETURN COUNT(*) PATTERN S+ WHERE S.p < NEXT(S).big WITHIN 1 h", "does not convert"),
    ],
)
def test_bad_columns_name_the_query_and_condition(text, message):
    table = pa.table(
        {"time": [1, 2], "type": ["S", "S"], "p": [1.0, 2.0], "name": ["a", "b"],
         "big": [2**60 + 1, 1]}
    )  # fmt: skip
    with pytest.raises(WorkloadError, match=message) as err:
        gpu_hamlet.aggregate(table, text, backend="cpu")
    assert "query q1" in str(err.value) and "NEXT(S)" in str(err.value)
    missing = "RETURN COUNT(*) PATTERN S+ WHERE S.q < NEXT(S).p WITHIN 1 h"
    with pytest.raises(EventDataError, match="query q1: attribute column 'q' is missing"):
        gpu_hamlet.aggregate(table, missing, backend="cpu")


@st.composite
def cases(draw, max_queries: int = 2, general: bool = False):
    text, wl = draw(workload_cases(1, max_queries, general=general, adjacent=True))
    events = draw(event_streams(workload_types(wl), max_events=12, nulls=True))
    return text, wl, events


def check(case, backend: str, sharing: str = "dynamic") -> None:
    text, wl, events = case
    expected = oracle(events, wl, with_magnitudes=True)
    table = events_to_table(events)
    for numeric in NUMERIC_MODES:
        got = gpu_hamlet.aggregate(table, text, backend=backend, sharing=sharing, numeric=numeric)
        assert_matches_oracle(got, expected, wl, numeric)


@pytest.mark.parametrize("sharing", SHARING_MODES)
@ORACLE_SETTINGS
@given(case=cases())
def test_flat_patterns_match_oracle(case, sharing):
    check(case, "cpu", sharing)


@ORACLE_SETTINGS
@given(case=cases(general=True))
def test_general_patterns_match_oracle(case):
    check(case, "cpu")


@pytest.mark.gpu
@settings(ORACLE_SETTINGS, max_examples=10)
@given(case=cases(general=True))
def test_gpu_backend_matches_oracle(case):
    check(case, "gpu")


@pytest.mark.spark
@pytest.mark.parametrize("tasks", [1, 2, 7])
@settings(
    ORACLE_SETTINGS,
    max_examples=3,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_through_spark(spark, tasks, data):
    """Mixed with queries without NEXT (passes of their own, groups never cut)."""
    spark_matches_oracle(spark, tasks, data, cases(general=True))


def spark_matches_oracle(spark, tasks: int, data, case_strategy, **options) -> None:
    """A drawn case through `trend_aggregate` with `tasks` tasks, in a drawn numeric mode, has
    the oracle's tables."""
    from gpu_hamlet.spark import trend_aggregate

    text, wl, events = data.draw(case_strategy)
    assume(events)  # (an empty DataFrame needs its schema spelled out; test_spark covers it)
    df = spark.createDataFrame(events_to_table(events))  # Arrow: nulls stay nulls
    numeric = data.draw(st.sampled_from(NUMERIC_MODES))
    results = trend_aggregate(df, text, num_tasks=tasks, numeric=numeric, **options)
    got = {name: sorted_rows(df.toArrow()) for name, df in results.items()}  # Spark: no row order
    assert_matches_oracle(got, oracle(events, wl, with_magnitudes=True), wl, numeric)


def test_spark_passes_keep_next_queries_whole():
    """Queries with NEXT conditions run in passes of their own, one per GROUPBY, whose groups
    are never cut into time slices (windows run whole: no pane summaries)."""
    from gpu_hamlet.spark.job import _passes, assign_tasks

    wl = parse_workload(
        "a: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 h;"
        "b: RETURN COUNT(*) PATTERN B+ WHERE B.x < NEXT(B).x WITHIN 1 h;"
        "c: RETURN COUNT(*) PATTERN B+ WHERE B.x < NEXT(B).x GROUPBY g WITHIN 1 h;"
        "d: RETURN COUNT(*) PATTERN A+ WHERE A.x = NEXT(A).x WITHIN 1 h"
    )
    assert [sub.names for sub in _passes(wl)] == [("a",), ("b", "d"), ("c",)]
    groups = [{"__n": 900, "__lo": 0, "__hi": 1000}, {"__n": 100, "__lo": 0, "__hi": 50}]
    cut = assign_tasks(groups, [], 1000, 4, True)
    whole = assign_tasks(groups, [], 1000, 4, True, cut=False)
    assert cut[0][-1] is not None  # the big group is cut into slices by default
    assert all(row[-3:] == (None, None, None) and len(row[0]) == 1 for row in whole)


SHARED_TEXT = """
a: RETURN COUNT(*), SUM(B.x), MIN(B.x) PATTERN SEQ(A, C, B+, D) WHERE A.x < NEXT(C).x
   WITHIN 20 s SLIDE 10 s;
b: RETURN COUNT(*), COUNT(B) PATTERN SEQ(C, B+, D) WHERE C.x >= NEXT(B).x WITHIN 20 s SLIDE 10 s;
c: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, D) WITHIN 20 s SLIDE 10 s;
d: RETURN COUNT(*) PATTERN SEQ(C, B+) WHERE C.x = NEXT(B).x AND B.x <= NEXT(B).x WITHIN 20 s
"""


def shared_events() -> pa.Table:
    """Long bursts of B among A, C and D events, for SHARED_TEXT."""
    import random

    rnd = random.Random(3)
    return pa.Table.from_pylist(
        [
            {"time": i // 2, "type": rnd.choice("ABBBBCD"), "x": rnd.choice([1, 2, 3, None])}
            for i in range(400)
        ]
    )


def test_next_queries_share_bursts_their_conditions_do_not_touch():
    """`a`'s condition (A -> C) leaves B alone, so `a` shares B's bursts with `c` (macro rows in
    the tree recursion); `b` and `d` compare B events, so they keep B's bursts. Every sharing
    mode gives the same tables."""
    table = shared_events()
    for numeric in NUMERIC_MODES:
        base = gpu_hamlet.aggregate(
            table, SHARED_TEXT, backend="cpu", numeric=numeric, sharing="none"
        )
        assert all(base[n].num_rows for n in "abcd")
        for sharing in ("static", "dynamic", "hamlet"):
            stats = gpu_hamlet.RunStats()
            got = gpu_hamlet.aggregate(
                table, SHARED_TEXT, backend="cpu", numeric=numeric, sharing=sharing, stats=stats
            )
            for n in "abcd":
                assert repr(got[n].to_pylist()) == repr(base[n].to_pylist()), (numeric, sharing, n)
            assert "B+ shared by a, c" in stats.describe()
            assert sharing != "static" or " 0 shared" not in stats.describe()


def test_columns_of_different_types_compare_by_value():
    """An int with a float column, and timestamps of different units, compare as values."""
    seconds = pa.array([1, 5, 9], pa.timestamp("s"))
    millis = pa.array([2000, 4000, 10000], pa.timestamp("ms"))
    table = pa.table(
        {"time": [1, 2, 3], "type": ["S"] * 3, "a": seconds, "b": millis, "i": [1, 5, 9],
         "f": [2.0, 4.0, 10.0]}
    )  # fmt: skip
    for a, b in (("a", "b"), ("i", "f")):
        text = f"RETURN COUNT(*) PATTERN S+ WHERE S.{a} < NEXT(S).{b} WITHIN 1 h"
        got = gpu_hamlet.aggregate(table, text, backend="cpu")["q1"].to_pylist()
        assert got[0]["count"] == 3 + 3 + 1  # every pair and the triple: 1 < 4, 1 < 10, 5 < 10


@pytest.mark.parametrize(
    "a, b",
    [
        # (an int64 column against a decimal of scale 20 could not convert at all, as
        # decimal128(38, 20); uint64 against uint32 or int64 compared as int64)
        (
            pa.array([Decimal("1.5"), 1, 2, 3], pa.decimal128(38, 20)),
            pa.array([1, 2, 3, 4], pa.int64()),
        ),
        (pa.array([2**63, 1, 2**64 - 1, 5], pa.uint64()), pa.array([1, 2, 3, 4], pa.uint32())),
        (pa.array([2**63, 1, 2**64 - 1, 5], pa.uint64()), pa.array([-1, 2, -3, 4], pa.int64())),
        (pa.array([10**45, -1, 3, 10**44], pa.decimal256(50, 0)), pa.array([1, 2, 3, -4])),
    ],
    ids=["decimal-scale-20-int64", "uint64-uint32", "uint64-int64", "decimal256-int64"],
)
def test_integer_and_decimal_columns_compare_exactly_whatever_their_widths(a, b):
    """Integer and decimal columns of any widths and scales compare by value, as the oracle
    does (a helper's review: both raised "a value does not convert exactly")."""
    table = pa.table({"time": [1, 2, 3, 4], "type": ["S"] * 4, "a": a, "b": b})
    for op in ("<", ">=", "="):
        text = f"RETURN COUNT(*) PATTERN S+ WHERE S.a {op} NEXT(S).b WITHIN 1 h"
        got = gpu_hamlet.aggregate(table, text, backend="cpu")
        assert_matches_oracle(
            got, oracle(table.to_pylist(), parse_workload(text)), parse_workload(text)
        )


DAY_MS = 86_400_000


@pytest.mark.parametrize(
    "a, b",
    [
        (
            pa.array([0, 7_200, 3_600, 10_800], pa.timestamp("s", "Europe/Paris")),
            pa.array([3_600_000, 0, 7_200_000, 1_000], pa.timestamp("ms", "UTC")),
        ),
        (
            pa.array([1, 40, 3, 2], pa.date32()),
            pa.array([DAY_MS * d for d in (2, 1, 40, 3)], pa.date64()),
        ),
        (
            pa.array([5, 1, 9, 2], pa.time32("s")),
            pa.array([10**6, 9 * 10**6, 2, 4], pa.time64("us")),
        ),
        (
            pa.array([5, 1, 9, 2], pa.duration("ms")),
            pa.array([1_000, 10**7, 2, 4], pa.duration("us")),
        ),
        (pa.array(["b", "a", "d", "c"], pa.string_view()), pa.array(["a", "c", "b", "d"])),
        (pa.array([b"b", b"a", b"d", b"c"], pa.binary(1)), pa.array([b"a", b"cc", b"b", b""])),
    ],
    ids=["two-zones", "date32-date64", "time32-time64", "durations", "string-views", "binaries"],
)
def test_temporal_text_and_binary_columns_of_two_types_compare_by_value(a, b):
    """Columns of one kind but two types (zones, units, widths, views) compare by value, as
    the oracle does; they were "cannot be compared" before."""
    table = pa.table({"time": [1, 2, 3, 4], "type": ["S"] * 4, "a": a, "b": b})
    for op in ("<", ">=", "="):
        text = f"RETURN COUNT(*) PATTERN S+ WHERE S.a {op} NEXT(S).b WITHIN 1 h"
        for sharing in ("none", "static"):
            got = gpu_hamlet.aggregate(table, text, backend="cpu", sharing=sharing)
            assert_matches_oracle(
                got, oracle(table.to_pylist(), parse_workload(text)), parse_workload(text)
            )


def test_timestamps_with_and_without_a_zone_cannot_be_compared():
    """A timestamp with a time zone against one without has no common clock: an error naming
    the condition, not a guess."""
    table = pa.table(
        {"time": [1, 2], "type": ["S"] * 2, "a": pa.array([1, 2], pa.timestamp("s", "UTC")),
         "b": pa.array([1, 2], pa.timestamp("s"))}
    )  # fmt: skip
    text = "RETURN COUNT(*) PATTERN S+ WHERE S.a < NEXT(S).b WITHIN 1 h"
    with pytest.raises(WorkloadError, match="cannot be compared"):
        gpu_hamlet.aggregate(table, text, backend="cpu")


def test_a_value_the_finer_unit_cannot_hold_is_an_error_naming_the_condition():
    """Seconds beyond nanoseconds' range do not convert: an error naming the condition."""
    table = pa.table(
        {"time": [1, 2], "type": ["S"] * 2, "a": pa.array([2**62, 1], pa.timestamp("s")),
         "b": pa.array([1, 2], pa.timestamp("ns"))}
    )  # fmt: skip
    text = "RETURN COUNT(*) PATTERN S+ WHERE S.a < NEXT(S).b WITHIN 1 h"
    with pytest.raises(WorkloadError, match=r"S\.a < NEXT\(S\)\.b.*does not convert exactly"):
        gpu_hamlet.aggregate(table, text, backend="cpu")


def test_an_integer_float64_cannot_hold_is_an_error_in_every_mode_and_whatever_pruning_keeps():
    """An integer column compared with a float one is checked on every event the query matches
    before anything runs: `static` raised (naming an internal condition) where the other modes
    answered, and with `none` whether it raised depended on whether pruning kept the event (a
    helper's review). Values float64 holds answer as before."""
    big = 2**63 - 1
    text = (
        "q0: RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.x > NEXT(B).y WITHIN 10 s;\n"
        "q1: RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.x >= NEXT(B).y WITHIN 10 s"
    )
    for kind in ("C", "A"):  # (the B at 21 lies in a window with an A, or without one)
        table = pa.table(
            {
                "time": pa.array([1, 2, 3, 20, 21], pa.int64()),
                "type": ["A", "B", "B", kind, "B"],
                "x": pa.array([0, 1, 0, 0, big], pa.int64()),
                "y": [0.0, 0.0, 1.0, 0.0, 1.0],
            }
        )
        for sharing in SHARING_MODES:
            with pytest.raises(
                WorkloadError,
                match=r"^query q0: B\.x > NEXT\(B\)\.y compares .* a value of a B event does not",
            ):
                gpu_hamlet.aggregate(table, text, backend="cpu", sharing=sharing)
        small = table.set_column(2, "x", pa.array([0, 1, 0, 0, 2**53], pa.int64()))
        want = gpu_hamlet.aggregate(small, text, backend="cpu", sharing="none")
        for sharing in SHARING_MODES:
            got = gpu_hamlet.aggregate(small, text, backend="cpu", sharing=sharing)
            assert all(got[n].equals(want[n]) for n in want), sharing


_E_CONDITIONS = (
    "B.x < NEXT(B).x",
    "B.x <= NEXT(B).y",
    "B.y >= NEXT(B).y",
    "B.s = NEXT(B).s",
    "B.s = NEXT(B).s AND B.x > NEXT(B).x",
    "B.y != NEXT(B).y",
)
_SHAPES = ("B+", "SEQ(A, B+)", "SEQ(B+, C)", "SEQ(A, B+, C)", "SEQ(C, A, B+)")
_AGGREGATES = ("COUNT(*)", "COUNT(B)", "SUM(B.x)", "AVG(B.y)", "MIN(B.x)", "MAX(B.y)", "SUM(A.x)")


_STRICTNESS = {" < NEXT": " <= NEXT", " > NEXT": " >= NEXT", " <= NEXT": " < NEXT",
               " >= NEXT": " > NEXT"}  # fmt: skip


def _toggle_strictness(conds: str) -> str:
    """The conditions with the ordering one strict where it was not, and the reverse."""
    for a, b in _STRICTNESS.items():
        if a in conds:
            return conds.replace(a, b)
    return conds


@st.composite
def window_sharing_cases(draw):
    """Two to four flat queries with B+ and the same B -> B conditions up to strictness ('<'
    against '<=': ties become event-level snapshots) and filters on B (so they share B's bursts
    per window), each with its own pattern, aggregates, other filters, window and slide; GROUPBY
    and equivalence alike or not. Returns (text, workload, events)."""
    conds = draw(st.sampled_from(_E_CONDITIONS))
    on_b = draw(st.sampled_from(["", " AND B.x > -2"]))
    shared_part = draw(st.sampled_from(["", " AND [k]", " GROUPBY g"]))
    lines = []
    for i in range(draw(st.integers(2, 4))):
        aggs = draw(st.lists(st.sampled_from(_AGGREGATES), min_size=1, max_size=3, unique=True))
        shape = draw(st.sampled_from(_SHAPES))
        other = draw(st.sampled_from(["", " AND A.y > 0", " AND C.x != 1"]))
        other = other if other[6:7] in shape else ""
        aggs = [a for a in aggs if "A." not in a or "A" in shape] or ["COUNT(*)"]
        part = shared_part if draw(st.integers(0, 4)) else draw(st.sampled_from(["", " AND [g]"]))
        mine = _toggle_strictness(conds) if draw(st.booleans()) else conds
        where = f"{mine}{on_b}{other}"
        if part.startswith(" AND"):
            where += part
        group = part if part.startswith(" GROUPBY") else ""
        within = draw(st.sampled_from([2, 4, 4, 6, 11]))
        slide = draw(st.sampled_from([None, 2, within]))
        window = f"WITHIN {within} s" + (f" SLIDE {slide} s" if slide and slide <= within else "")
        lines.append(
            f"q{i}: RETURN {', '.join(aggs)} PATTERN {shape} WHERE {where}{group} {window}"
        )
    text = ";\n".join(lines)
    wl = parse_workload(text)
    events = draw(event_streams(["A", "B", "B", "B", "C"], max_events=13, nulls=True))
    return text, wl, events


@ORACLE_SETTINGS
@given(case=window_sharing_cases(), sharing=st.sampled_from(["static", "dynamic", "hamlet"]))
def test_queries_with_the_same_kleene_conditions_share_per_window(case, sharing):
    """Queries comparing B events by the same conditions share B's bursts window by window
    (gpu_hamlet/engine/window_sharing.py): the oracle's counts in every numeric mode, and under
    `static` every burst of a set resolved from the basis responses."""
    text, wl, events = case
    expected = oracle(events, wl, with_magnitudes=True)
    table = events_to_table(events)
    for numeric in NUMERIC_MODES:
        stats = gpu_hamlet.RunStats()
        got = gpu_hamlet.aggregate(
            table, text, backend="cpu", sharing=sharing, numeric=numeric, stats=stats
        )
        assert_matches_oracle(got, expected, wl, numeric)
        if sharing == "static":
            assert all(s.shared == s.bursts for s in stats.sets), stats.describe()


TIES_TEXT = """
q0: RETURN COUNT(*), SUM(B.x), MIN(B.x) PATTERN SEQ(A, B+) WHERE B.x < NEXT(B).x
    WITHIN 6 s SLIDE 2 s;
q1: RETURN COUNT(*), MAX(B.y), COUNT(B) PATTERN SEQ(A, B+, C) WHERE B.x <= NEXT(B).x WITHIN 4 s;
q2: RETURN COUNT(*) PATTERN B+ WHERE B.x <= NEXT(B).x WITHIN 6 s;
q3: RETURN COUNT(*) PATTERN B+ WHERE B.x > NEXT(B).x WITHIN 6 s
"""


def test_ties_of_non_strict_conditions_are_event_level_snapshots():
    """'<' and '<=' on one attribute share B's bursts (the basis passes follow '<'); the ties of
    q1 and q2 enter event-level snapshots (HAMLET Def. 9). '>' is no set with them. The
    oracle's counts in every mode, on streams with many equal values."""
    import random

    from gpu_hamlet.engine.sharing import analyze

    wl = parse_workload(TIES_TEXT)
    (sset,) = analyze(wl).sets
    assert sset.names == ("q0", "q1", "q2") and sset.ties == ("q1", "q2")
    assert [c.op for c in sset.conditions] == ["<"]
    assert "ties of q1, q2 as event-level snapshots" in analyze(wl).describe()
    snapshots = 0
    for seed in range(8):
        rnd = random.Random(seed)
        events = [
            {"time": rnd.randint(0, 10), "type": rnd.choice("ABBBBC"), "g": "u", "k": 0,
             "x": rnd.choice([None, 0, 1, 1, 2, 2, 3]), "y": rnd.randint(-4, 4) / 2, "s": "u"}
            for _ in range(13)
        ]  # fmt: skip
        expected = oracle(events, wl, with_magnitudes=True)
        for numeric in NUMERIC_MODES:
            stats = gpu_hamlet.RunStats()
            got = gpu_hamlet.aggregate(
                events_to_table(events), TIES_TEXT, backend="cpu", sharing="static",
                numeric=numeric, stats=stats,
            )  # fmt: skip
            assert_matches_oracle(got, expected, wl, numeric)
            (ties,) = stats.sets
            assert ties.shared == ties.bursts
        snapshots += ties.event_snapshots
    assert snapshots > 10


@pytest.mark.spark
@pytest.mark.parametrize("tasks", [1, 2, 7])
@settings(
    ORACLE_SETTINGS,
    max_examples=3,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_window_sharing_through_spark(spark, tasks, data):
    """Per-window sharing inside Spark tasks (groups never cut): the oracle's counts."""
    spark_matches_oracle(spark, tasks, data, window_sharing_cases(), sharing="static")


@pytest.mark.gpu
@settings(ORACLE_SETTINGS, max_examples=8)
@given(case=window_sharing_cases())
def test_gpu_backend_shares_per_window(case):
    """The window macro rows and basis passes on the GPU backend (the simulator without a
    device): the oracle's counts."""
    check(case, "gpu", "static")


# --- the host layout's sorting and ranking shortcuts (gpu_hamlet/engine/adjacent.py) ---


@settings(max_examples=100, deadline=None)
@given(
    data=st.data(),
    n=st.integers(0, 40),
    nkeys=st.integers(1, 3),
    big=st.booleans(),
)
def test_packed_sort_is_lexsorts_order(data, n, nkeys, big):
    """One argsort of packed keys gives np.lexsort's (stable) order; keys too wide to pack
    (`big`) take lexsort itself."""
    top = 2**40 if big else 5
    ints = st.lists(st.integers(0, top), min_size=n, max_size=n)
    first = np.asarray(data.draw(ints), np.int64)
    then = [np.asarray(data.draw(ints), np.int64) for _ in range(nkeys)]
    want = np.lexsort(tuple(reversed(then)) + (first,))
    np.testing.assert_array_equal(sorted_by(first, then), want)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.none() | st.integers(-3, 3) | st.sampled_from([0.5, float("nan")]),
        min_size=1,
        max_size=12,
    ),  # fmt: skip
    data=st.data(),
)
def test_ranks_of_a_row_set_order_like_ranks_of_the_rows_read(values, data):
    """KeyRanks (a basis pass's keys ranked once over the set's rows) orders any writers and
    readers among those rows, repeats included, as ranking just them does; nulls and NaNs alike."""
    n = len(values)
    table = pa.table(
        {"x": pa.array(values, pa.float64()), "y": pa.array(values[::-1], pa.float64())}
    )
    q = parse_workload("q: RETURN COUNT(*) PATTERN B+ WHERE B.x < NEXT(B).y WITHIN 1 h")["q"]
    cond = q.next_conditions[0]
    pick = st.lists(st.integers(0, n - 1), max_size=8).map(lambda r: np.asarray(r, np.int64))
    writers, readers = data.draw(pick), data.draw(pick)
    got = KeyRanks(q, table, np.arange(n, dtype=np.int64))(cond, writers, readers)
    want = _ranks_of_rows(q, cond, table, writers, readers)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])
    g, w = got[0][~got[1]], want[0][~want[1]]
    np.testing.assert_array_equal(
        np.sign(g[:, None] - g[None, :]), np.sign(w[:, None] - w[None, :])
    )

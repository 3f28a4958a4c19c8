"""Self-tests of the brute-force oracle (tests/oracle.py): hand-computed cases and the paper."""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_hamlet.query.workload import Aggregate, Filter, PatternElement, Query, Workload

try:  # tests/ is a rootdir-inserted folder (no __init__.py) or a package
    from oracle import (
        MAGNITUDE_KEY,
        brute_force_trends,
        count_trends,
        enumerate_trends,
        oracle,
        parse_pattern,
    )
except ImportError:  # pragma: no cover
    from tests.oracle import (
        MAGNITUDE_KEY,
        brute_force_trends,
        count_trends,
        enumerate_trends,
        oracle,
        parse_pattern,
    )

DATA = Path(__file__).parent / "data"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PAPER_STREAM = "Paper_TestStream.txt"


# --- helpers -------------------------------------------------------------------------------------


def agg(
    func: str, type_: str | None = None, attr: str | None = None, name: str | None = None
) -> Aggregate:
    a = Aggregate(func, type_, attr, "")
    return Aggregate(func, type_, attr, name or a.default_name)


def query(
    pattern: str,
    aggs=None,
    *,
    name="q1",
    filters=(),
    equivalence=(),
    groupby=(),
    within_s=100,
    slide_s=None,
) -> Query:
    pat = tuple(PatternElement(e.type, e.kleene) for e in parse_pattern(pattern))
    within_ms = int(within_s * 1000)
    slide_ms = int((slide_s if slide_s is not None else within_s) * 1000)
    return Query(
        name=name,
        pattern=pat,
        aggregates=tuple(aggs or (agg("COUNT"),)),
        group_items=(),
        filters=tuple(filters),
        equivalence=tuple(equivalence),
        groupby=tuple(groupby),
        within_ms=within_ms,
        slide_ms=slide_ms,
    )


def ev(type_: str, time, **attrs) -> dict:
    return {"type": type_, "time": time, **attrs}


def read_paper_stream(path: Path) -> list[dict]:
    events = []
    for line in path.read_text().splitlines():
        if line.strip():
            ts, typ, value = (int(x) for x in line.split(","))
            events.append(ev(f"T{typ}", ts, value=value))
    return events


# --- counting trends -----------------------------------------------------------------------------


def test_design_examples():
    # a1 b1 b2 c1
    seq = [("A", 1), ("B", 2), ("B", 3), ("C", 4)]
    assert count_trends(seq, "SEQ(A, B+, C)") == 3
    # a1 b1 b2 b3 c1 c2: 7 non-empty subsets of the B's times 2 C's
    seq = [("A", 1), ("B", 2), ("B", 3), ("B", 4), ("C", 5), ("C", 6)]
    assert count_trends(seq, "SEQ(A, B+, C)") == 14


def test_trends_listed_explicitly():
    seq = [("A", 1), ("B", 2), ("B", 3), ("C", 4)]
    assert sorted(enumerate_trends(seq, "SEQ(A, B+, C)")) == [(0, 1, 2, 3), (0, 1, 3), (0, 2, 3)]
    # input order does not matter; indices refer to the input
    shuffled = [seq[3], seq[1], seq[0], seq[2]]
    assert sorted(enumerate_trends(shuffled, "SEQ(A, B+, C)")) == [
        (2, 1, 0),
        (2, 1, 3, 0),
        (2, 3, 0),
    ]


def test_equal_timestamps_do_not_chain():
    seq = [("A", 1), ("B", 2), ("B", 2), ("C", 3)]
    assert count_trends(seq, "SEQ(A, B+, C)") == 2  # a b c twice, never a b b c
    assert count_trends([("B", 5)] * 4, "B+") == 4  # four singletons
    assert count_trends([("A", 1), ("B", 1)], "SEQ(A, B)") == 0
    # (1 + m_j) growth: B's at times 1,1,2,2,2 -> (1+2)(1+3) - 1 = 11 non-empty chains
    seq = [("B", 1), ("B", 1), ("B", 2), ("B", 2), ("B", 2)]
    assert count_trends(seq, "B+") == 11


def test_patterns_without_kleene_and_single_elements():
    seq = [("A", 1), ("A", 2), ("B", 3), ("B", 4)]
    assert count_trends(seq, "SEQ(A, B)") == 4
    assert count_trends(seq, "A") == 2
    assert count_trends(seq, "A+") == 3
    assert count_trends(seq, "SEQ(A+, B+)") == 9
    assert count_trends(seq, "SEQ(B, A)") == 0
    # an event of a type outside the pattern cannot be inside a trend, but can be skipped
    seq = [("A", 1), ("X", 2), ("B", 3)]
    assert count_trends(seq, "SEQ(A, B)") == 1


def test_repeated_types_count_each_subsequence_once():
    # SEQ(A+, A+) over 3 A's: every subsequence of length >= 2 matches (in several ways), once each
    seq = [("A", 1), ("A", 2), ("A", 3)]
    assert count_trends(seq, "SEQ(A+, A+)") == 4
    assert count_trends(seq, "SEQ(A, A)") == 3


@st.composite
def small_streams(draw):
    n = draw(st.integers(0, 9))
    return [(draw(st.sampled_from("ABCX")), draw(st.integers(0, 5))) for _ in range(n)]


@settings(max_examples=300, deadline=None)
@given(
    small_streams(),
    st.sampled_from(
        [
            "SEQ(A, B+, C)",
            "SEQ(A+, B)",
            "B+",
            "SEQ(A, B, C)",
            "A",
            "SEQ(B+, A+, C+)",
            "SEQ(A+, A)",
            "SEQ(C, B+)",
        ]
    ),
)
def test_dfs_equals_all_subsets(seq, pattern):
    assert sorted(enumerate_trends(seq, pattern)) == sorted(brute_force_trends(seq, pattern))


# --- the HAMLET paper's running example ----------------------------------------------------------


#: SHA-256 of ../shared/data/hamlet-synthetic/Paper_TestStream.txt, the HAMLET authors' file.
PAPER_STREAM_SHA256 = "b0893c0dcbcdd69f7c3b7c868e5ffe43e1eca0024e25cc8d4ebe378204a1be2d"


def test_paper_fixture_is_the_shared_file():
    """The committed fixture is byte for byte the authors' file (checked against its recorded
    hash always, and against the file itself where ../shared is beside the checkout)."""
    fixture = (DATA / PAPER_STREAM).read_bytes()
    assert hashlib.sha256(fixture).hexdigest() == PAPER_STREAM_SHA256
    shared = SHARED_DATA / "hamlet-synthetic" / PAPER_STREAM
    if shared.exists():
        assert fixture == shared.read_bytes()


def test_paper_running_example():
    events = read_paper_stream(DATA / PAPER_STREAM)
    assert len(events) == 14
    pairs = [(e["type"], e["time"]) for e in events]
    assert count_trends(pairs, "SEQ(T1, T2+)") == 132
    assert count_trends(pairs, "SEQ(T3, T2+)") == 72
    wl = Workload(
        (
            query("SEQ(T1, T2+)", name="q1", within_s=60),
            query("SEQ(T3, T2+)", name="q2", within_s=60),
        )
    )
    res = oracle(events, wl)
    assert res == {
        "q1": [{"window_start": 0, "window_end": 60, "count": 132}],
        "q2": [{"window_start": 0, "window_end": 60, "count": 72}],
    }


def test_paper_running_example_aggregates():
    # b counts for SEQ(T1, T2+): 2, 4, 8, 16, 34, 68 (times 4, 5, 6, 7, 13, 14); value is 1
    events = read_paper_stream(DATA / PAPER_STREAM)
    aggs = [
        agg("COUNT"),
        agg("COUNT", "T1"),
        agg("COUNT", "T2"),
        agg("SUM", "T2", "value"),
        agg("AVG", "T2", "value"),
        agg("MIN", "T2", "value"),
    ]
    res = oracle(events, Workload((query("SEQ(T1, T2+)", aggs, within_s=60),)))
    (row,) = res["q1"]
    assert row["count"] == 132 and row["count_T1"] == 132
    # COUNT(T2) = sum over b of (#trends containing b); b at rank r of 6 is in
    # (#trends ending at b) * (#ways to continue after b)
    ends = [2, 4, 8, 16, 34, 68]
    continuations = [2 ** (5 - r) for r in range(6)]  # any subset of the later b's
    assert row["count_T2"] == sum(e * c for e, c in zip(ends, continuations))
    assert row["sum_T2_value"] == row["count_T2"]
    assert row["avg_T2_value"] == 1 and isinstance(row["avg_T2_value"], Fraction)
    assert row["min_T2_value"] == 1


# --- aggregates by hand
# ----------------------------------------------------------------------------


def tiny_events():
    return [
        ev("B", 0, x=-7, y=0.5),  # before any A: in no trend
        ev("A", 1, x=1, y=1.25),
        ev("B", 2, x=2, y=2.5),
        ev("B", 3, x=5, y=-0.75),
        ev("C", 3, x=100, y=0.0),  # type outside the pattern
    ]


def test_hand_computed_aggregates():
    # trends: a b2, a b5, a b2 b5
    aggs = [
        agg("COUNT"),
        agg("COUNT", "A"),
        agg("COUNT", "B"),
        agg("SUM", "B", "x"),
        agg("AVG", "B", "x"),
        agg("MIN", "B", "x"),
        agg("MAX", "B", "x"),
        agg("SUM", "A", "x"),
        agg("SUM", "B", "y"),
        agg("AVG", "B", "y"),
        agg("MIN", "B", "y"),
        agg("MAX", "A", "y"),
        agg("COUNT", name="n"),
    ]
    res = oracle(
        tiny_events(), Workload((query("SEQ(A, B+)", aggs, within_s=10),)), with_magnitudes=True
    )
    (row,) = res["q1"]
    mags = row.pop(MAGNITUDE_KEY)
    assert row == {
        "window_start": 0,
        "window_end": 10,
        "count": 3,
        "count_A": 3,
        "count_B": 4,
        "sum_B_x": 2 + 5 + 2 + 5,
        "avg_B_x": Fraction(14, 4),
        "min_B_x": 2,
        "max_B_x": 5,
        "sum_A_x": 3,
        "sum_B_y": 2 * 2.5 + 2 * -0.75,
        "avg_B_y": Fraction(7, 2) / 4,
        "min_B_y": -0.75,
        "max_A_y": 1.25,
        "n": 3,
    }
    assert isinstance(row["sum_B_x"], int) and isinstance(row["sum_B_y"], float)
    assert mags == {
        "sum_B_x": 14,
        "avg_B_x": Fraction(14, 4),
        "sum_A_x": 3,
        "sum_B_y": Fraction(13, 2),
        "avg_B_y": Fraction(13, 8),
    }


def test_filters_apply_to_their_type_only():
    aggs = [agg("COUNT"), agg("MIN", "B", "x")]
    q = query("SEQ(A, B+)", aggs, within_s=10, filters=[Filter("B", "x", ">", 2)])
    (row,) = oracle(tiny_events(), Workload((q,)))["q1"]
    assert row == {"window_start": 0, "window_end": 10, "count": 1, "min_B_x": 5}
    # a filter on A's x never looks at B events
    q = query("SEQ(A, B+)", aggs, within_s=10, filters=[Filter("A", "x", "=", 1)])
    assert oracle(tiny_events(), Workload((q,)))["q1"][0]["count"] == 3
    q = query("SEQ(A, B+)", aggs, within_s=10, filters=[Filter("A", "x", "!=", 1)])
    assert oracle(tiny_events(), Workload((q,)))["q1"] == []
    for op, value, expected in [("<", 5, 1), ("<=", 5, 3), (">=", 5, 1), ("=", 2, 1), ("!=", 2, 1)]:
        q = query("SEQ(A, B+)", aggs, within_s=10, filters=[Filter("B", "x", op, value)])
        assert oracle(tiny_events(), Workload((q,)))["q1"][0]["count"] == expected, op
    q = query("SEQ(A, B+)", [agg("COUNT")], within_s=10, filters=[Filter("B", "s", "=", "u")])
    events = [ev("A", 1, s="v"), ev("B", 2, s="u"), ev("B", 3, s="w"), ev("B", 4, s="u")]
    assert oracle(events, Workload((q,)))["q1"][0]["count"] == 3


def test_groupby_and_equivalence_partitions():
    events = [
        ev("A", 1, g="g1", k=0),
        ev("A", 1, g="g1", k=1),
        ev("A", 1, g="g2", k=0),
        ev("B", 2, g="g1", k=0),
        ev("B", 3, g="g1", k=1),
        ev("B", 4, g="g2", k=1),
        ev("B", 5, g="g1", k=1),
    ]
    aggs = [agg("COUNT"), agg("COUNT", "B")]
    # no partitioning: A's at one time, B's at 2,3,4,5: 3 * (2^4 - 1) = 45 trends
    assert oracle(events, Workload((query("SEQ(A, B+)", aggs),)))["q1"][0]["count"] == 45
    # [k]: k=0: a,a x b2 -> 2; k=1: a x {b3, b4, b5} -> 7; summed: 9
    (row,) = oracle(events, Workload((query("SEQ(A, B+)", aggs, equivalence=["k"]),)))["q1"]
    assert row["count"] == 9
    # GROUPBY g: g1: {a,a} x {b2,b3,b5} -> 2*7 = 14; g2: a x b4 -> 1
    rows = oracle(events, Workload((query("SEQ(A, B+)", aggs, groupby=["g"]),)))["q1"]
    assert [(r["g"], r["count"]) for r in rows] == [("g1", 14), ("g2", 1)]
    assert list(rows[0]) == ["g", "window_start", "window_end", "count", "count_B"]
    # GROUPBY g with [k]: g1: k=0 a x b2 -> 1; k=1 a x {b3,b5} -> 3; => 4; g2: k=0 a, no b; k=1 no a
    rows = oracle(events, Workload((query("SEQ(A, B+)", aggs, groupby=["g"], equivalence=["k"]),)))[
        "q1"
    ]
    assert [(r["g"], r["count"], r["count_B"]) for r in rows] == [("g1", 4, 1 + 4)]
    # equivalence over a GROUPBY attribute changes nothing
    rows2 = oracle(
        events, Workload((query("SEQ(A, B+)", aggs, groupby=["g"], equivalence=["g", "k"]),))
    )["q1"]
    assert rows2 == rows


def test_sliding_and_tumbling_windows():
    events = [ev("A", 0), ev("B", 1), ev("B", 3)]
    rows = oracle(events, Workload((query("SEQ(A, B+)", within_s=2, slide_s=1),)))["q1"]
    assert rows == [{"window_start": 0, "window_end": 2, "count": 1}]
    rows = oracle(events, Workload((query("SEQ(A, B+)", within_s=4, slide_s=2),)))["q1"]
    assert rows == [
        {"window_start": -2, "window_end": 2, "count": 1},
        {"window_start": 0, "window_end": 4, "count": 3},
    ]
    rows = oracle(events, Workload((query("SEQ(A, B+)", within_s=3),)))["q1"]  # [0,3): a b1
    assert rows == [{"window_start": 0, "window_end": 3, "count": 1}]
    # slide not dividing within: windows [3k, 3k+5)
    rows = oracle(events, Workload((query("SEQ(A, B+)", within_s=5, slide_s=3),)))["q1"]
    assert rows == [
        {"window_start": -3, "window_end": 2, "count": 1},
        {"window_start": 0, "window_end": 5, "count": 3},
    ]
    # window end is exclusive, start inclusive
    events = [ev("A", 2), ev("B", 4)]
    assert oracle(events, Workload((query("SEQ(A, B)", within_s=2),)))["q1"] == []
    assert oracle(events, Workload((query("SEQ(A, B)", within_s=4, slide_s=2),)))["q1"] == [
        {"window_start": 2, "window_end": 6, "count": 1}
    ]
    # sub-second windows over int seconds give float bounds
    rows = oracle(
        [ev("A", 1), ev("B", 1.5)], Workload((query("SEQ(A, B)", within_s=1.5, slide_s=0.5),))
    )["q1"]
    assert [(r["window_start"], r["window_end"]) for r in rows] == [(0.5, 2.0), (1.0, 2.5)]


def test_datetime_times():
    base = datetime(2024, 3, 1, 12, 0, 0)
    events = [
        ev("A", base),
        ev("B", base + timedelta(seconds=1)),
        ev("B", base + timedelta(seconds=2)),
    ]
    rows = oracle(events, Workload((query("SEQ(A, B+)", within_s=3600),)))["q1"]
    assert rows == [
        {
            "window_start": datetime(2024, 3, 1, 12),
            "window_end": datetime(2024, 3, 1, 13),
            "count": 3,
        }
    ]
    aware = [dict(e, time=e["time"].replace(tzinfo=UTC)) for e in events]
    (row,) = oracle(aware, Workload((query("SEQ(A, B+)", within_s=3600),)))["q1"]
    assert row["window_start"] == datetime(2024, 3, 1, 12, tzinfo=UTC)
    # the same as int seconds since the epoch
    secs = [dict(e, time=int((e["time"] - datetime(1970, 1, 1)).total_seconds())) for e in events]
    (row,) = oracle(secs, Workload((query("SEQ(A, B+)", within_s=3600),)))["q1"]
    assert row["window_start"] == int((base - datetime(1970, 1, 1)).total_seconds())


def test_float_times():
    events = [ev("A", 0.25), ev("B", 0.5), ev("B", 0.5), ev("B", 1.75)]
    (row,) = oracle(events, Workload((query("SEQ(A, B+)", within_s=2),)))["q1"]
    assert row == {"window_start": 0.0, "window_end": 2.0, "count": 2 + 2 * 1 + 1}
    assert isinstance(row["window_start"], float)


def test_multiple_queries_and_empty_input():
    wl = Workload((query("SEQ(A, B+)", name="x"), query("SEQ(A, C)", name="y")))
    assert oracle([], wl) == {"x": [], "y": []}
    res = oracle([ev("A", 1), ev("B", 2)], wl)
    assert res["x"][0]["count"] == 1 and res["y"] == []


def test_random_cross_check_of_aggregates():
    """COUNT/SUM/MIN/MAX from the oracle equal a direct fold over the explicit list of trends."""
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 8)
        events = [ev(rng.choice("ABC"), rng.randint(0, 4), x=rng.randint(-3, 3)) for _ in range(n)]
        pattern = rng.choice(["SEQ(A, B+)", "SEQ(A+, B, C+)", "B+", "SEQ(C, A+)"])
        aggs = [
            agg("COUNT"),
            agg("COUNT", "A"),
            agg("SUM", "A", "x"),
            agg("MIN", "A", "x"),
            agg("MAX", "A", "x"),
        ]
        if "A" not in pattern:
            aggs = [
                agg("COUNT"),
                agg("COUNT", "B"),
                agg("SUM", "B", "x"),
                agg("MIN", "B", "x"),
                agg("MAX", "B", "x"),
            ]
        q = query(pattern, aggs, within_s=100)
        res = oracle(events, Workload((q,)))["q1"]
        trends = enumerate_trends([(e["type"], e["time"]) for e in events], pattern)
        if not trends:
            assert res == []
            continue
        t = aggs[1].type
        occ = [events[i] for tr in trends for i in tr if events[i]["type"] == t]
        used = {i for tr in trends for i in tr if events[i]["type"] == t}
        (row,) = res
        assert row[aggs[0].name] == len(trends)
        assert row[aggs[1].name] == len(occ)
        assert row[aggs[2].name] == sum(e["x"] for e in occ)
        assert row[aggs[3].name] == min(events[i]["x"] for i in used)
        assert row[aggs[4].name] == max(events[i]["x"] for i in used)

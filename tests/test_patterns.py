"""The whole pattern language (docs/semantics.md section 2): SEQ with NOT, OR, Kleene plus at any
depth, repeated types, against the brute-force oracle on every backend, numeric mode, sharing
mode, and through Spark; the automata they compile to; and the parser's errors for the forms the
language forbids.

Random patterns come from tests/strategies.py `patterns` (depth up to 3); the oracle
(tests/oracle.py) matches each candidate trend by backtracking over the pattern tree, without
the engine's automaton.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import gpu_hamlet
from gpu_hamlet.engine.evaluate import result_schemas
from gpu_hamlet.engine.options import SHARING_MODES
from gpu_hamlet.errors import NumericOverflowError, WorkloadError
from gpu_hamlet.query.automaton import Automaton
from gpu_hamlet.query.parser import parse_workload
from gpu_hamlet.query.plan import Template

try:  # tests/ is a rootdir-inserted folder (no __init__.py) or a package
    from compare import NUMERIC_MODES, assert_matches_oracle, events_to_table, sorted_rows
    from oracle import count_trends, enumerate_trends, oracle
    from strategies import TYPES, event_streams, patterns, workload_cases, workload_types
except ImportError:  # pragma: no cover
    from tests.compare import NUMERIC_MODES, assert_matches_oracle, events_to_table, sorted_rows
    from tests.oracle import count_trends, enumerate_trends, oracle
    from tests.strategies import (
        TYPES,
        event_streams,
        patterns,
        workload_cases,
        workload_types,
    )

SETTINGS = settings(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@st.composite
def cases(draw, max_queries: int = 3):
    """A workload of general patterns and a small stream (12 events at most: a pattern like
    (A OR B)+ makes every subsequence a trend, which the oracle lists one by one)."""
    text, wl = draw(workload_cases(max_queries=max_queries, general=True))
    events = draw(event_streams(workload_types(wl), max_events=12))
    return text, wl, events


def count(text: str, events: list[tuple[int, str]], **options) -> int:
    """COUNT(*) of one pattern over (time, type) events in one window, on the CPU."""
    table = pa.table({"time": [t for t, _ in events], "type": [x for _, x in events]})
    wl = f"RETURN COUNT(*) PATTERN {text} WITHIN 1000 s"
    rows = gpu_hamlet.aggregate(table, wl, backend="cpu", **options)["q1"].to_pylist()
    return int(rows[0]["count"]) if rows else 0


# --- the examples of the issue and of docs/semantics.md, by hand ---


@pytest.mark.parametrize(
    "pattern, events, trends",
    [
        # a1a2, a1a3, a2a3, a1a2a3: a1a2a3 splits two ways and still counts once
        ("SEQ(A+, A+)", "A1 A2 A3", 4),
        # the A+ before the negation ends at A@4 (after the N): {a3}, {a1,a3}, {a2,a3},
        # {a1,a2,a3}, times two Bs
        ("SEQ(A+, NOT N, B)", "A1 A2 N3 A4 B5 B6", 8),
        # the N only stands between the A and the first B: a1 b2 and a1 b2 b4, not a1 b4
        ("SEQ(A, NOT N, B+)", "A1 B2 N3 B4", 2),
        ("SEQ(A, B)+", "A1 B2 A3 B4", 4),  # a1b2, a1b4, a3b4, a1b2a3b4
        ("SEQ(A, (B OR C)+, D)", "A1 B2 C3 D4", 3),  # abd, acd, abcd
        ("SEQ(A, B) OR SEQ(C, D+)", "A1 C2 B3 D4 D5", 4),  # ab; cd4, cd5, cd4d5
        ("SEQ(A, B+, A)", "A1 B2 A3 B4 A5", 5),  # a1b2a3, a1b2a5, a1b4a5, a3b4a5, a1b2b4a5
        ("SEQ(A, NOT N, B)", "A1 N1 B2", 1),  # an N at the time of A blocks nothing
        ("SEQ(A, NOT N, B)", "A1 N2 B2", 1),  # nor at the time of B
        ("(SEQ(A, B+))+", "A1 B2 A3 B4", 5),  # a1b2, a1b4, a1b2b4, a3b4, a1b2a3b4
    ],
)
def test_hand_counted_examples(pattern, events, trends):
    evs = [(int(e[1:]), e[0]) for e in events.split()]
    assert count_trends([(x, t) for t, x in evs], pattern) == trends  # the oracle agrees
    for numeric in NUMERIC_MODES:
        assert count(pattern, evs, numeric=numeric) == trends, numeric


def test_oracle_lists_each_trend_once():
    trends = enumerate_trends([("A", 1), ("A", 2), ("A", 3)], "SEQ(A+, A+)")
    assert sorted(trends) == [(0, 1), (0, 1, 2), (0, 2), (1, 2)]


# --- the automata ---


def template(text: str) -> Template:
    return Template.of(
        parse_workload(f"RETURN COUNT(*) PATTERN {text} WITHIN 1 s").queries[0].pattern
    )


def test_flat_patterns_keep_one_state_per_position():
    t = template("SEQ(A, B+, C)")
    auto = t.automaton  # (one state per position, state = position)
    assert t.one_row and len(auto.positions) == 1 and not auto.moves
    assert all(st.at == (frozenset((s,)),) for s, st in enumerate(auto.states))
    assert t.pred_ptr.tolist() == [0, 0, 2, 3] and t.pred_idx.tolist() == [0, 1, 1]
    assert t.is_start.tolist() == [True, False, False]
    assert t.is_end.tolist() == [False, False, True]


def test_a_long_seq_is_a_chain_of_its_types():
    """A SEQ of 2,000 types: one state per type, each extending the one before (the subset
    construction tries only the types that follow a state: the whole alphabet per state made
    this 2,000^2 steps, seconds), and its one trend counted."""
    types = [f"T{i}" for i in range(2000)]
    auto = Automaton.of(
        parse_workload(f"RETURN COUNT(*) PATTERN SEQ({', '.join(types)}) WITHIN 1 h")
        .queries[0]
        .pattern
    )
    assert [auto.last_type(s) for s in range(len(auto.states))] == types
    assert auto.preds == ((),) + tuple((s,) for s in range(1999))
    events = pa.table({"time": list(range(2000)), "type": types})
    text = f"q: RETURN COUNT(*) PATTERN SEQ({', '.join(types)}) WITHIN 1 h"
    assert gpu_hamlet.aggregate(events, text, backend="cpu")["q"]["count"].to_pylist() == [1]


def test_negation_splits_a_state_and_repeated_types_enter_several():
    auto = Automaton.of(
        parse_workload("RETURN COUNT(*) PATTERN SEQ(A+, NOT N, B) WITHIN 1 s").queries[0].pattern
    )
    assert auto.describe() == [
        "s0{A#0}: entered by A, extends s0, s1 [start]",
        "s1{A#0} after N: reached by negated events only, extends nothing",
        "s2{B#1}: entered by B, extends s0 [end]",
        "NOT N blocks: s0 -> s1",
    ]
    t = template("SEQ(A+, A+)")
    assert not t.one_row
    assert t.enter_idx[t.enter_ptr[0] : t.enter_ptr[1]].tolist() == [0, 1]  # an A enters both


def test_a_pattern_of_too_many_states_is_an_error_naming_the_query():
    """Sets of positions that double with each element (a helper's review: 16 of them built
    131,073 states for 18 s, 20 would take minutes and GBs) stop at MAX_STATES with an error
    naming the query, in `aggregate` and in `result_schemas` (the Spark driver's) alike; 10
    of them (2,049 states) still answer."""
    events = pa.table({"time": list(range(14)), "type": list("ABBABAABABBAAB")})

    def text(n: int) -> str:
        return "q7: RETURN COUNT(*) PATTERN SEQ((A OR B)+, A" + ", (A OR B)" * n + ") WITHIN 1 h"

    wl = parse_workload(text(10))
    got = gpu_hamlet.aggregate(events, wl, backend="cpu")
    assert_matches_oracle(got, oracle(events.to_pylist(), wl), wl)
    assert got["q7"].column("count").to_pylist()[0] > 0
    for call in (
        lambda: gpu_hamlet.aggregate(events, text(16), backend="cpu"),
        lambda: result_schemas(events.schema, text(16)),
    ):
        with pytest.raises(
            WorkloadError, match="query q7: its pattern compiles to more than 4,096"
        ):
            call()


def test_explain_shows_the_automaton(capsys, tmp_path):
    from gpu_hamlet.cli import main

    wl = tmp_path / "wl.txt"
    wl.write_text("RETURN COUNT(*) PATTERN SEQ(A, NOT N, B+) WITHIN 1 s")
    assert main(["explain", "--workload", str(wl)]) == 0
    out = capsys.readouterr().out
    assert "s1{B#1}: entered by B, extends s0, s1 [end]" in out
    assert "NOT N blocks: s0 -> ended" in out


# --- the parser ---


@settings(SETTINGS, max_examples=200)
@given(st.data())
def test_parser_reads_generated_patterns(data):
    text, node = data.draw(patterns(TYPES))
    parsed = parse_workload(f"RETURN COUNT(*) PATTERN {text} WITHIN 1 s").queries[0].pattern
    assert parsed == node, text


@pytest.mark.parametrize(
    "pattern, message",
    [
        ("SEQ(NOT A, B)", "NOT A is first in its SEQ"),
        ("SEQ(A, NOT B)", "NOT B is last in its SEQ"),
        ("NOT A", "NOT stands only between two positive parts"),
        ("(A OR NOT B)", "NOT stands only between two positive parts"),
        ("SEQ(A, NOT B+, C)", "NOT takes one event type, not a Kleene plus"),
        ("SEQ(A, NOT SEQ(B, C), D)", "NOT takes one event type, found 'SEQ'"),
        ("SEQ(A, NOT (B), C)", "NOT takes one event type, found '('"),
        ("(A AND B)", "AND joins two whole patterns at the top level only"),
        ("SEQ(A, B AND C)", "expected ')', '+' or ',', found 'AND'"),
        ("A AND B AND C", "at most one AND"),
    ],
)
def test_forbidden_forms_are_errors_at_their_token(pattern, message):
    with pytest.raises(WorkloadError, match="query q1, line 1, column") as err:
        parse_workload(f"RETURN COUNT(*) PATTERN {pattern} WITHIN 1 s")
    assert message in str(err.value)


def test_aggregates_need_a_positive_type():
    with pytest.raises(WorkloadError, match="'N', which is only negated in the pattern"):
        parse_workload("RETURN COUNT(N) PATTERN SEQ(A, NOT N, B) WITHIN 1 s")
    with pytest.raises(WorkloadError, match="a conjunction \\(AND\\) defines only COUNT"):
        parse_workload("RETURN SUM(A.x) PATTERN A AND B WITHIN 1 s")
    # a filter on a negated type says which of its events block
    q = parse_workload("RETURN COUNT(*) PATTERN SEQ(A, NOT N, B) WHERE N.x > 1 WITHIN 1 s").queries[
        0
    ]
    assert q.negated_types == ("N",)


def test_filters_on_a_negated_type_choose_the_blocking_events():
    table = pa.table({"time": [1, 2, 3], "type": ["A", "N", "B"], "x": [0, 0, 0]})
    text = "RETURN COUNT(*) PATTERN SEQ(A, NOT N, B) WHERE N.x > {} WITHIN 10 s"
    blocked = gpu_hamlet.aggregate(table, text.format(-1), backend="cpu")["q1"]
    assert blocked.num_rows == 0
    passes = gpu_hamlet.aggregate(table, text.format(0), backend="cpu")["q1"]
    assert passes.column("count").to_pylist() == [1]


@pytest.mark.parametrize(
    "pattern, events, pairs",
    [
        # 3 trends a1b2, a1b4, a3b4 match both sides: 3 unordered pairs of distinct ones
        ("SEQ(A, B) AND SEQ(A, B)", "A1 B2 A3 B4", 3),
        ("A AND B", "A1 A2 B3", 2),  # {a1, b3}, {a2, b3}
        # left a1, a2, a1a2; right a1, a2: {a1, a2}, {a1, a1a2}, {a2, a1a2}
        ("A+ AND A", "A1 A2", 3),
        ("SEQ(A, B) AND C", "A1 B2 C1500", 0),  # no C in the window: no pair, no row
    ],
)
def test_conjunction_counts_pairs_of_distinct_trends(pattern, events, pairs):
    evs = [(int(e[1:]), e[0]) for e in events.split()]
    rows = [{"time": t, "type": x} for t, x in evs]
    q = parse_workload(f"RETURN COUNT(*) PATTERN {pattern} WITHIN 1000 s")
    expected = oracle(rows, q)["q1"]
    assert [r["count"] for r in expected] == ([pairs] if pairs else [])
    for numeric in NUMERIC_MODES:
        assert count(pattern, evs, numeric=numeric) == pairs, numeric


def _conjunctions_match_the_oracle(table: pa.Table, *texts: str) -> None:
    """Each one-query workload's rows (some) equal the oracle's in every numeric mode."""
    rows = table.to_pylist()
    for text in texts:
        want = oracle(rows, parse_workload(text))["q1"]
        assert want, text
        for numeric in NUMERIC_MODES:
            got = gpu_hamlet.aggregate(table, text, backend="cpu", numeric=numeric)["q1"]
            assert [[float(v) for v in r.values()] for r in got.to_pylist()] == [
                [float(v) for v in r.values()] for r in want
            ], (text, numeric)


def test_conjunction_fills_every_count_column():
    """An AND may return COUNT(*) under several names: every column holds the pairs (only the
    first was filled, and building the table raised a bare ArrowInvalid)."""
    table = pa.table({"time": [1, 2, 3, 7], "type": ["A", "B", "B", "B"], "g": [1, 1, 2, 1]})
    _conjunctions_match_the_oracle(
        table,
        "RETURN COUNT(*) AS n1, COUNT(*) AS n2 PATTERN SEQ(A, B) AND SEQ(A, B) WITHIN 5 s",
        "RETURN g, COUNT(*), COUNT(*) AS n PATTERN A AND B+ GROUPBY g WITHIN 4 s SLIDE 2 s",
    )


def test_conjunction_partition_attributes_named_like_its_count_column():
    """An AND runs as counts grouped by its whole partition: an equivalence or GROUPBY column
    named `count` was the counts' own column (a KeyError), one named `window_end` a window
    column of theirs (an AssertionError); the first counts as any other attribute, the second
    is refused by the parser, naming the query."""
    table = pa.table(
        {
            "time": [1, 2, 3, 4, 5, 6],
            "type": ["A", "B", "A", "B", "A", "B"],
            "count": [1, 1, 1, 1, 2, 2],
            "window_end": [0] * 6,
        }
    )
    _conjunctions_match_the_oracle(
        table,
        "RETURN COUNT(*) PATTERN SEQ(A, B) AND SEQ(A, B) WHERE [`count`] WITHIN 10 s",
        "RETURN `count`, COUNT(*) AS n PATTERN SEQ(A, B) AND SEQ(A, B) GROUPBY `count` WITHIN 10 s",
    )
    with pytest.raises(WorkloadError, match="query q1, .*equivalence attribute 'window_end'"):
        parse_workload("RETURN COUNT(*) PATTERN A AND B WHERE [window_end] WITHIN 10 s")
    # (outside an AND it is an attribute like any other)
    parse_workload("RETURN COUNT(*) PATTERN SEQ(A, B) WHERE [window_end] WITHIN 10 s")


def test_conjunction_overflow_names_the_query_and_window():
    # 130 As: 2^130 - 1 trends of A+ on either side, pairs far beyond decimal(38)
    table = pa.table({"time": list(range(130)), "type": ["A"] * 130})
    text = "big: RETURN COUNT(*) PATTERN A+ AND A+ WITHIN 1000 s"
    with pytest.raises(NumericOverflowError, match=r"query big: COUNT\(\*\) .* window \[0, 1000\)"):
        gpu_hamlet.aggregate(table, text, backend="cpu")
    exact = gpu_hamlet.aggregate(table, text, backend="cpu", numeric="bigint")["big"]
    c = 2**130 - 1
    assert exact.column("count").to_pylist() == [str(c * c - c * (c + 1) // 2)]
    nulls = gpu_hamlet.aggregate(table, text, backend="cpu", on_overflow="null")["big"]
    assert nulls.column("count").to_pylist() == [None]
    # In float mode 600 As give sides within float64 whose pairs are beyond it: an error
    # naming bigint, or null (the pairs were inf - inf, NaN, and the row was dropped).
    table = pa.table({"time": list(range(600)), "type": ["A"] * 600})
    with pytest.raises(NumericOverflowError, match=r"float64 range; use numeric='bigint'"):
        gpu_hamlet.aggregate(table, text, backend="cpu", numeric="float")
    nulls = gpu_hamlet.aggregate(table, text, backend="cpu", numeric="float", on_overflow="null")
    assert nulls["big"].column("count").to_pylist() == [None]


# --- every backend, mode and sharing mode against the oracle ---


def check_cpu(case, sharing: str) -> None:
    text, wl, events = case
    expected = oracle(events, wl, with_magnitudes=True)
    table = events_to_table(events)
    for numeric in NUMERIC_MODES:
        got = gpu_hamlet.aggregate(table, text, backend="cpu", sharing=sharing, numeric=numeric)
        assert_matches_oracle(got, expected, wl, numeric)


@settings(SETTINGS, max_examples=60)
@given(case=cases(), sharing=st.sampled_from(SHARING_MODES))
def test_general_patterns_match_oracle(case, sharing):
    check_cpu(case, sharing)


@pytest.mark.slow
@settings(SETTINGS, max_examples=300)
@given(case=cases(max_queries=4), sharing=st.sampled_from(SHARING_MODES))
def test_general_patterns_match_oracle_more_examples(case, sharing):
    check_cpu(case, sharing)


@pytest.mark.gpu
@settings(SETTINGS, max_examples=12)
@given(case=cases(max_queries=2))
def test_general_patterns_on_the_gpu_backend(case):
    """The GPU backend (numba's CUDA simulator without a device): the oracle's results, and the
    very same tables as the CPU backend."""
    text, wl, events = case
    expected = oracle(events, wl, with_magnitudes=True)
    table = events_to_table(events)
    for numeric in NUMERIC_MODES:
        got = gpu_hamlet.aggregate(table, text, backend="gpu", numeric=numeric)
        assert_matches_oracle(got, expected, wl, numeric)
        cpu = gpu_hamlet.aggregate(table, text, backend="cpu", numeric=numeric)
        for name in wl.names:
            assert got[name].equals(cpu[name]), name


@pytest.mark.parametrize("tasks", [1, 2, 7])
@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.data())
def test_general_patterns_through_spark(spark, tasks, data):
    from gpu_hamlet.spark import trend_aggregate

    text, wl, events = data.draw(cases(max_queries=2))
    assume(events)  # (an empty DataFrame needs its schema spelled out; test_spark covers it)
    numeric = data.draw(st.sampled_from(NUMERIC_MODES))
    table = events_to_table(events)
    df = spark.createDataFrame(table.to_pandas())
    results = trend_aggregate(df, text, num_tasks=tasks, numeric=numeric)
    got = {name: sorted_rows(df.toArrow()) for name, df in results.items()}  # Spark: no row order
    assert_matches_oracle(got, oracle(events, wl, with_magnitudes=True), wl, numeric)


FIXED_WORKLOAD = (
    "a: RETURN g, COUNT(*) PATTERN SEQ(A, NOT C, B+) OR SEQ(C, A) GROUPBY g WITHIN 6 s SLIDE 3 s;"
    "b: RETURN COUNT(*) PATTERN SEQ(A, B) AND B+ WHERE [g] WITHIN 5 s;"
    "c: RETURN COUNT(B), SUM(B.x), MAX(A.x) PATTERN (SEQ(A, B+))+ WITHIN 8 s"
)


def fixed_events() -> list[dict]:
    rng = np.random.default_rng(18)
    return [
        {
            "time": int(rng.integers(0, 24)),
            "type": str(rng.choice(["A", "B", "B", "C"])),
            "g": str(rng.choice(["g1", "g2"])),
            "x": int(rng.integers(-3, 6)),
        }
        for _ in range(48)
    ]


@pytest.mark.parametrize("tasks", [1, 2, 7])
def test_fixed_general_workload_through_spark(spark, tasks):
    from gpu_hamlet.spark import trend_aggregate

    events = fixed_events()
    wl = parse_workload(FIXED_WORKLOAD)
    table = pa.Table.from_pylist(events)
    results = trend_aggregate(
        spark.createDataFrame(table.to_pandas()), FIXED_WORKLOAD, num_tasks=tasks
    )
    got = {name: sorted_rows(df.toArrow()) for name, df in results.items()}  # Spark: no row order
    expected = oracle(events, wl, with_magnitudes=True)
    assert all(expected[n] for n in wl.names)  # every query has rows to compare
    assert_matches_oracle(got, expected, wl, "exact", event_schema=table.schema)

"""Queries of one plan shape answered by one run (gpu_hamlet/engine/fusion.py): the same tables
as each query run alone and as the oracle's, in every numeric and sharing mode."""

from __future__ import annotations

from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpu_hamlet
from cpu_fallback import CpuBackend
from gpu_hamlet.engine import fusion
from gpu_hamlet.engine.conjunction import run_queries
from gpu_hamlet.engine.options import SHARING_MODES, Options
from gpu_hamlet.engine.query_rows import QueryRows
from gpu_hamlet.errors import NumericOverflowError
from gpu_hamlet.query import plan as plan_module
from gpu_hamlet.query.parser import parse_workload

try:  # tests/ is a rootdir-inserted folder (no __init__.py) or a package
    from compare import assert_matches_oracle, events_to_table
    from oracle import oracle
    from strategies import event_streams
except ImportError:  # pragma: no cover
    from tests.compare import assert_matches_oracle, events_to_table
    from tests.oracle import oracle
    from tests.strategies import event_streams

SHAPES = ["SEQ({a}, B+, {c})", "SEQ({a}, B)", "SEQ(B+, {c})", "SEQ({a}, {c}, B+)"]
RETURNS = ["COUNT(*)", "COUNT(*), SUM(B.x)", "COUNT(B), AVG(B.y)", "COUNT(*), MIN(B.x), MAX(B.y)"]
WINDOWS = ["WITHIN 4 s", "WITHIN 4 s SLIDE 2 s", "WITHIN 10 s"]
FILTERS = ["", "{a}.x < 2", "B.x > -1", "{c}.y < 1.5"]


@st.composite
def same_shape(draw) -> str:
    """2 to 5 queries of one shape around the Kleene type B, which the aggregates weigh: each
    query its own other types and filters; one RETURN, window, GROUPBY and equivalence."""
    shape, returns, window = (draw(st.sampled_from(xs)) for xs in (SHAPES, RETURNS, WINDOWS))
    equivalence = draw(st.sampled_from([[], ["[k]"]]))
    group = draw(st.sampled_from(["", "g"]))
    lines = []
    for i in range(draw(st.integers(2, 5))):
        a, c = draw(st.permutations("ACDE"))[:2]
        filters = [f for f in FILTERS if all(t in shape for t in ("{a}", "{c}") if t in f)]
        where = [*equivalence, draw(st.sampled_from(filters)).format(a=a, c=c)]
        where = [w for w in where if w]
        text = f"q{i}: RETURN {group + ', ' if group else ''}{returns} PATTERN "
        text += shape.format(a=a, c=c)
        text += f" WHERE {' AND '.join(where)}" if where else ""
        text += f" GROUPBY {group}" if group else ""
        lines.append(f"{text} {window}")
    return ";\n".join(lines)


def fused_runs(events: pa.Table, text: str, **options) -> tuple[dict[str, pa.Table], int]:
    """The tables, and how many fused runs made them."""
    with mock.patch.object(QueryRows, "fused", wraps=QueryRows.fused) as spy:
        tables = gpu_hamlet.aggregate(events, text, backend="cpu", **options)
    return tables, spy.call_count


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=same_shape(),
    data=st.data(),
    numeric=st.sampled_from(["float", "exact", "bigint"]),
    sharing=st.sampled_from(SHARING_MODES),
)
def test_fused_queries_answer_as_the_oracle(text, data, numeric, sharing):
    """Queries of one shape, fused or each alone, give the oracle's tables."""
    wl = parse_workload(text)
    events = data.draw(event_streams(["A", "B", "C", "D", "E"], max_events=16))
    table = events_to_table(events)
    expected = oracle(events, wl, with_magnitudes=True)
    options = dict(numeric=numeric, sharing=sharing, on_overflow="null")
    tables, runs = fused_runs(table, text, **options)
    # (shared bursts take the queries' rows apart; queries alike but for RETURN run as one)
    assert runs or sharing != "none" or len(run_queries(wl)) < 2
    assert_matches_oracle(tables, expected, wl, numeric, on_overflow="null")
    with mock.patch.object(fusion, "FUSE_ROWS", -1):  # each query alone
        alone = gpu_hamlet.aggregate(table, text, backend="cpu", **options)
    assert_matches_oracle(alone, expected, wl, numeric, on_overflow="null")


def test_one_run_answers_queries_of_one_shape():
    """Three queries of one shape run as one, the fourth (another window) alone, with one host
    thread or two: each table is the oracle's, with its own groups and windows in result order,
    also where a query has no trend."""
    types = ["A", "B", "B", "C", "D", "B", "C", "E", "A", "B", "C"]
    times = [0, 1, 2, 3, 4, 5, 6, 7, 30, 31, 32]
    groups = ["u", "v", "v", "v", "u", "u", "u", "u", "v", "v", "v"]
    events = [
        {"time": t, "type": e, "g": g, "k": 0, "x": 1, "y": 0.5, "s": "s"}
        for t, e, g in zip(times, types, groups)
    ]
    shape = "RETURN g, COUNT(*) PATTERN SEQ({}, B+, {}) GROUPBY g WITHIN 10 s SLIDE 5 s"
    text = ";\n".join(
        [
            "qac: " + shape.format("A", "C"),
            "qdc: " + shape.format("D", "C"),
            "qea: " + shape.format("E", "A"),  # no trend
            "qlong: " + shape.format("A", "C").replace("10 s SLIDE 5 s", "1 min"),
        ]
    )
    wl = parse_workload(text)
    expected = oracle(events, wl)
    assert expected["qac"] and expected["qdc"] and not expected["qea"]
    for threads in ("1", "2"):
        with mock.patch.dict("os.environ", {"OMP_NUM_THREADS": threads}):
            tables, runs = fused_runs(events_to_table(events), text, numeric="exact")
        assert runs == 1
        assert_matches_oracle(tables, expected, wl, "exact")


def test_the_table_of_plan_shapes_stays_bounded(monkeypatch):
    """A long-running process compiles ever new queries: the numbered plan shapes grew by one
    a call (20,000 calls: 40,000 shapes, +140 MB) and are now kept at most SHAPES_KEPT. Numbers
    are never given twice, so queries of one shape still run as one, and of two, apart."""
    monkeypatch.setattr(plan_module, "SHAPES_KEPT", 3)
    monkeypatch.setattr(plan_module, "_SHAPES", {})  # (other tests' shapes: not this one's)
    events = events_to_table([{"time": t, "type": e, "x": 1} for t, e in enumerate("ABBCDBBC" * 3)])
    for seconds in range(1001, 1009):  # (windows no other test compiles: new plans)
        text = ";".join(
            f"q{i}: RETURN COUNT(*) PATTERN SEQ({a}, B+, C) WITHIN {seconds} s"
            for i, a in enumerate("AD")
        )
        tables, runs = fused_runs(events, text, numeric="exact")
        assert runs == 1 and len(plan_module._SHAPES) <= 3
        assert tables == gpu_hamlet.aggregate(events, text, backend="cpu", sharing="none")
    numbers = {p.shape for p in compile_plans("SEQ(A, B+, C)", "SEQ(A, B, C)")}
    assert len(numbers) == 2  # (two shapes, two numbers, the table cleared or not)


def compile_plans(*patterns: str) -> list:
    """The plans of one query per pattern, over a table of A..D events."""
    from gpu_hamlet.engine.evaluate import compile_workload
    from gpu_hamlet.query.time_axis import time_axis

    schema = pa.schema([("time", pa.int64()), ("type", pa.string())])
    text = ";".join(f"q{i}: RETURN COUNT(*) PATTERN {p} WITHIN 5 s" for i, p in enumerate(patterns))
    _, plans, _, _ = compile_workload(
        schema, parse_workload(text), time_axis(pa.int64(), "time"), Options()
    )
    return [plans[f"q{i}"] for i in range(len(patterns))]


def test_an_overflow_names_its_own_query():
    """A count beyond decimal(38) in the second of two fused queries: the error names it, and
    with on_overflow='null' it is null beside the first query's count."""
    n = 130  # 2^131 - 1 trends of SEQ(C, B+), one of SEQ(A, B+)
    events = pa.table({"time": list(range(n + 3)), "type": ["C", *["B"] * n, "A", "B"]})
    text = (
        "small: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 h;\n"
        "big: RETURN COUNT(*) PATTERN SEQ(C, B+) WITHIN 1 h"
    )
    with pytest.raises(NumericOverflowError, match="query big: COUNT"):
        fused_runs(events, text, numeric="exact")
    tables, runs = fused_runs(events, text, numeric="exact", on_overflow="null")
    assert runs == 1
    assert tables["big"].column("count").to_pylist() == [None]
    assert tables["small"].column("count").to_pylist() == [1]


def test_an_avg_is_exact_where_its_own_sum_and_count_are():
    """In exact mode AVG is each row's exact quotient where its sum and count are exact. A row
    beyond decimal(38) (null sum, float quotient) once sent every row of its table to the float
    quotients; fused with such a query, a query whose B values cancel (4e18 and -4e18 + 1:
    float sums lose the 1) got 0.0 for 0.5."""
    n = 130  # SEQ(C, B+, D): 2^130 - 1 trends, beyond decimal(38)
    types = ["C", *["B"] * n, "D", "A", "B", "B", "E"]
    xs = [0, *[1] * n, 0, 0, 4 * 10**18, -(4 * 10**18) + 1, 0]
    events = pa.table({"time": list(range(len(types))), "type": types, "x": xs})
    text = (
        "qbig: RETURN AVG(B.x) PATTERN SEQ(C, B+, D) WITHIN 1000 s;"
        "qcancel: RETURN AVG(B.x) PATTERN SEQ(A, B+, E) WITHIN 1000 s"
    )
    tables, runs = fused_runs(events, text, numeric="exact")
    assert runs == 1
    assert tables["qcancel"].column("avg_B_x").to_pylist() == [0.5]
    assert tables["qbig"].column("avg_B_x").to_pylist() == [1.0]
    # One query, two windows: the second's quotient is exact beside the first's float one.
    types = ["A", *["B"] * n, "E", "A", "B", "B", "E"]
    times = [*range(n + 2), 2000, 2001, 2002, 2003]
    two = pa.table({"time": times, "type": types, "x": xs})
    text = "q: RETURN AVG(B.x) PATTERN SEQ(A, B+, E) WITHIN 1000 s"
    got = gpu_hamlet.aggregate(two, text, backend="cpu", numeric="exact")
    assert got["q"].column("avg_B_x").to_pylist() == [1.0, 0.5]


def test_a_run_holds_a_bounded_number_of_partitions():
    """Each query of a fused run holds a copy of the partitions' groups: a run takes no more
    queries than FUSED_ROWS rows and partitions allow (2,000 queries of few rows over 100,000
    groups took 3.3 GB fused, 0.28 GB alone)."""
    groups = 1_000
    events = pa.table(
        {
            "time": list(range(2 * groups)),
            "type": ["A", "B"] * groups,
            "g": [i // 2 for i in range(2 * groups)],
            "x": list(range(2 * groups)),
        }
    )
    text = ";".join(
        f"q{i}: RETURN g, COUNT(*) PATTERN SEQ(A, B+) WHERE A.x > {i} GROUPBY g WITHIN 10 s"
        for i in range(12)
    )
    sizes: list[int] = []
    runs = fusion.runs

    def recorded(built, options):
        out = runs(built, options)
        sizes.extend(len(r) for r in out)
        return out

    with (
        mock.patch.object(fusion, "FUSED_ROWS", 10_000),
        mock.patch.object(fusion, "runs", recorded),
    ):
        tables = gpu_hamlet.aggregate(events, text, backend="cpu", numeric="exact")
    assert sum(sizes) == 12 and max(sizes) == 3  # (each: 1,000 partitions and 2,000 rows)
    with mock.patch.object(fusion, "FUSE_ROWS", -1):
        alone = gpu_hamlet.aggregate(events, text, backend="cpu", numeric="exact")
    assert all(tables[n].equals(alone[n]) for n in alone)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_groups_that_end_full_leave_nothing_behind(threads):
    """A group of rows runs as soon as it holds its limit, and the group left after the last
    query may be empty (an IndexError once, when one query alone took a fast path)."""
    events = pa.table({"time": [0, 1, 2, 3], "type": ["A", "B", "A", "B"]})
    text = "q0: RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 10 s"
    for queries in (text, text + ";" + text.replace("q0", "q1")):
        with (
            mock.patch.dict("os.environ", {"OMP_NUM_THREADS": threads}),
            mock.patch.object(fusion, "FUSED_ROWS", 1),
            mock.patch.object(CpuBackend, "batch_events", 1),
        ):
            tables = gpu_hamlet.aggregate(events, queries, backend="cpu", numeric="exact")
        assert {n: [int(c) for c in t.column("count").to_pylist()] for n, t in tables.items()} == {
            n: [3] for n in tables
        }


def test_the_keys_make_their_arrays_once_whichever_thread_asks():
    """A fused run reads one `gid_of_pid` for all its queries (`QueryRows.fused` checks that
    they share it). The query rows are built on the host's threads, and cached_property takes
    no lock from Python 3.12 on: on a 16-core GPU machine two threads made two arrays and the
    fused run failed its check (bench_sharing.py, 25 queries over bursts of 50)."""
    import threading

    import numpy as np

    from gpu_hamlet.engine.partitions import SortedKeys

    n = 100_000
    pid = np.repeat(np.arange(1000), n // 1000)
    keys = SortedKeys(np.arange(n), pid, pid // 10, np.arange(n), pid % 7)
    start = threading.Barrier(8)
    got: list[tuple] = []

    def read() -> None:
        start.wait()
        got.append((keys.gid_of_pid, keys.by_code))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(g) for g, _ in got}) == 1 and len({id(b) for _, b in got}) == 1
    assert (got[0][0] == np.arange(1000) // 10).all()

"""The Spark job with NEXT conditions (`X.a op NEXT(Y).b`): such queries have no pane summaries,
so they run in passes of their own, one per GROUPBY, whose groups are never cut into time slices
(gpu_hamlet/spark/job.py); the other queries of the workload are still cut as before."""

from __future__ import annotations

import logging
import random
import re

import pyarrow as pa
import pytest

import gpu_hamlet
from gpu_hamlet import parse_workload
from gpu_hamlet.errors import EventDataError, WorkloadError
from gpu_hamlet.spark import trend_aggregate
from gpu_hamlet.spark.job import _passes, assign_tasks

MIXED = (
    # NEXT, no GROUPBY: one pass, all events in one task
    "rising: RETURN COUNT(*), SUM(S.p), MAX(S.p) PATTERN S+ WHERE S.p < NEXT(S).p "
    "WITHIN 20 s SLIDE 10 s;"
    # an ordinary query: shard key g, the dominating group cut into slices
    "plain: RETURN g, COUNT(*), SUM(S.p), MIN(S.p) PATTERN SEQ(A, S+) GROUPBY g "
    "WITHIN 30 s SLIDE 10 s;"
    # NEXT, GROUPBY g, h (in either order): one pass, each group whole, (a, 1) dominating
    "climb: RETURN g, h, COUNT(*), COUNT(S) PATTERN SEQ(A, S+) "
    "WHERE A.p <= NEXT(S).p AND S.p < NEXT(S).p GROUPBY g, h WITHIN 30 s;"
    "both: RETURN h, g, COUNT(*) PATTERN S+ AND SEQ(A, S) WHERE S.p >= NEXT(S).p GROUPBY h, g "
    "WITHIN 15 s"
)


def mixed_events(n: int = 600, seed: int = 11) -> pa.Table:
    """`n` events over n/2 seconds (equal times too), group g='a' holding about 3/4 of them (a
    group that the ordinary pass cuts for more than one task), 'b' most of the rest; h is 1 for
    about 95% of them; p has nulls."""
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        g = rnd.choices(["a", "b", "c"], weights=[75, 20, 5])[0]
        rows.append(
            {
                "time": i // 2,
                "type": rnd.choice("ASSSB"),
                "g": g,
                "h": 1 if rnd.random() < 0.95 else 2,
                "p": rnd.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, None]),
            }
        )
    return pa.Table.from_pylist(rows)


def test_float_groups_whose_slices_would_be_zero_or_infinite_stay_whole():
    """A float group is cut only into slices of a positive, finite width: a span of the
    smallest subnormal halves to 0.0 (Spark divided by zero computing the slices), and a span
    of times at both ends of float64 is infinite ((t - t0) / R was NaN). A group of a normal
    span is cut as before (a helper's review)."""
    for lo, hi in ((0.0, 5e-324), (-1.7e308, 1.7e308)):
        (row,) = assign_tasks([{"g": 0, "__n": 12, "__lo": lo, "__hi": hi}], ["g"], 12, 2, False)
        assert row[2:] == (None, None, None), (lo, hi, row)
    (row,) = assign_tasks([{"g": 0, "__n": 12, "__lo": 0.0, "__hi": 1e-300}], ["g"], 12, 2, False)
    assert row[-1] == 1 and row[-2] == 5e-301


def test_assign_tasks_without_cut_keeps_every_group_whole():
    """cut=False: no group is cut (t0, R and last slice are None, one task each), however big;
    the groups still spread over the tasks, largest first onto the least loaded."""
    groups = [
        {"g": "a", "__n": 700, "__lo": 0, "__hi": 1000},
        {"g": "b", "__n": 250, "__lo": 10, "__hi": 900},
        {"g": "c", "__n": 40, "__lo": 5, "__hi": 6},
        {"g": "d", "__n": 10, "__lo": 7, "__hi": 7},
        {"g": "e", "__n": 0, "__lo": None, "__hi": None},  # no events: not planned
    ]
    cut = assign_tasks(groups, ["g"], 1000, 4, True)
    assert cut[0][0] == "a" and cut[0][-1] is not None  # cut by default
    whole = assign_tasks(groups, ["g"], 1000, 4, True, cut=False)
    assert [row[0] for row in whole] == ["a", "b", "c", "d"]
    for row in whole:
        assert row[2:] == (None, None, None), row
        assert len(row[1]) == 1, row
    task = {row[0]: row[1][0] for row in whole}
    assert len({task["a"], task["b"], task["c"]}) == 3  # largest first, each to an idle task
    # float ticks, and one task: the same
    floats = [
        dict(r, __lo=r["__lo"] and float(r["__lo"]), __hi=r["__hi"] and float(r["__hi"]))
        for r in groups
    ]
    for tasks in (1, 7):
        for row in assign_tasks(floats, ["g"], 1000, tasks, False, cut=False):
            assert row[2:] == (None, None, None) and len(row[1]) == 1
    # no shard key: all events are one group, whole in one task
    assert assign_tasks([{"__n": 1000, "__lo": 0, "__hi": 99}], [], 1000, 7, True, cut=False) == [
        ([0], None, None, None)
    ]


def test_passes_group_next_queries_by_groupby():
    wl = parse_workload(MIXED)
    assert [sub.names for sub in _passes(wl)] == [("rising",), ("plain",), ("climb", "both")]
    plain = parse_workload(
        "x: RETURN COUNT(*) PATTERN A+ WITHIN 1 s; y: RETURN COUNT(*) PATTERN B+ WITHIN 1 s"
    )
    assert [sub.names for sub in _passes(plain)] == [("x", "y")]


def _rows(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=repr)


@pytest.mark.spark
@pytest.mark.parametrize("tasks", [1, 2, 7])
def test_mixed_workload_same_as_in_process(spark, caplog, tasks):
    """NEXT queries with and without GROUPBY and an ordinary one, on events where one group
    dominates: the ordinary query's big group is cut (for more than one task), the NEXT queries'
    groups never are, and every table equals the in-process engine's."""
    table = mixed_events()
    df = spark.createDataFrame(table)
    caplog.set_level(logging.INFO, logger="gpu_hamlet")
    got = trend_aggregate(df, MIXED, num_tasks=tasks)
    want = gpu_hamlet.aggregate(table, MIXED, backend="cpu")
    assert list(got) == list(want) == ["rising", "plain", "climb", "both"]
    for name, frame in got.items():
        result = frame.toArrow()
        assert result.schema.equals(want[name].schema), (name, result.schema, want[name].schema)
        assert want[name].num_rows > 0, name
        assert _rows(result) == _rows(want[name]), name

    passes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pass ")]
    assert len(passes) == 3, passes
    split = [
        int(m.group(1))
        for r in caplog.records
        if (m := re.search(r"(\d+) split group\(s\)", r.getMessage()))
    ]
    # passes in order: rising (NEXT), plain (g='a', and for 7 tasks 'b' too, cut when more than
    # one task), climb and both (NEXT)
    assert split == [0, {1: 0, 2: 1, 7: 2}[tasks], 0], split


@pytest.mark.spark
def test_every_pass_validated_before_any_spark_job(spark):
    """A bad query in the last pass fails before the first pass's Spark jobs run."""
    df = spark.createDataFrame(mixed_events(20))
    sc = spark.sparkContext
    sc.setJobGroup("adjacent-validation", "validation")
    try:
        for bad, message in [
            ("S.p < NEXT(S).g", "cannot be compared"),
            ("S.q < NEXT(S).p", "column 'q' is missing"),
        ]:
            text = MIXED + f"; late: RETURN COUNT(*) PATTERN S+ WHERE {bad} GROUPBY h WITHIN 1 s"
            with pytest.raises((EventDataError, WorkloadError), match=message):
                trend_aggregate(df, text, num_tasks=2)
        assert list(sc.statusTracker().getJobIdsForGroup("adjacent-validation")) == []
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

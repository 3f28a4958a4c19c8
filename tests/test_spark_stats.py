"""trend_aggregate(..., stats=): the sharing decisions of the engine tasks, back on the driver."""

from __future__ import annotations

from pathlib import Path

import gpu_hamlet
from gpu_hamlet.datagen import load_hamlet_stream
from gpu_hamlet.spark import trend_aggregate

PAPER = Path(__file__).parent / "data" / "Paper_TestStream.txt"
WORKLOAD = (
    "q1: RETURN COUNT(*), COUNT(T2) PATTERN SEQ(T1, T2+) WITHIN 100 s;\n"
    "q2: RETURN COUNT(*) PATTERN SEQ(T3, T2+) WITHIN 10 s SLIDE 5 s\n"
)


def test_stats_of_one_task_equal_the_in_process_run(spark):
    events = load_hamlet_stream(PAPER)
    expected = gpu_hamlet.RunStats()
    gpu_hamlet.aggregate(events, WORKLOAD, backend="cpu", sharing="static", stats=expected)
    got = gpu_hamlet.RunStats()
    trend_aggregate(
        spark.createDataFrame(events.to_pandas()),
        WORKLOAD,
        backend="cpu",
        sharing="static",
        num_tasks=1,
        stats=got,
    )
    assert got.sets and got.sets[0].bursts == 3
    assert [s.as_dict() for s in got.sets] == [s.as_dict() for s in expected.sets]
    assert got.snapshots == expected.snapshots
    assert got.describe() == expected.describe()


def test_run_stats_add_sums_per_sharable_set():
    a, b = gpu_hamlet.RunStats(), gpu_hamlet.RunStats()
    from gpu_hamlet.engine.sharing import SharingStats

    a.sets.append(SharingStats("B", ("x", "y"), bursts=2, shared=1, unshared=1))
    b.sets += [
        SharingStats("B", ("x", "y"), bursts=3, shared=3),
        SharingStats("C", ("x", "z"), bursts=1, unshared=1),
    ]
    a.snapshots["x"] = [1.0]
    b.snapshots["x"] = [2.0]
    a.add(b)
    assert [(s.kleene_type, s.bursts, s.shared, s.unshared) for s in a.sets] == [
        ("B", 5, 4, 1),
        ("C", 1, 0, 1),
    ]
    assert a.snapshots == {"x": [1.0, 2.0]}

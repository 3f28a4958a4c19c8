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


def test_run_stats_add_keeps_flags_as_flags():
    """`add` summed every int field, and a bool is one: a stream of five chunks below the fixed
    costs said `below_fixed_costs: 5`; a set one chunk did not analyse (`loses_on_sample`) was
    described as not analysed though other chunks shared its bursts."""
    from gpu_hamlet.engine.sharing import SharingStats

    total = gpu_hamlet.RunStats()
    for flags in [dict(below_fixed_costs=True)] * 5 + [dict(loses_on_sample=True)]:
        one = gpu_hamlet.RunStats()
        one.sets.append(SharingStats("B", ("x", "y"), **flags))
        total.add(one)
    shared = gpu_hamlet.RunStats()
    shared.sets.append(SharingStats("B", ("x", "y"), bursts=4, shared=3, unshared=1))
    total.add(shared)
    (s,) = total.sets
    assert s.as_dict()["below_fixed_costs"] is True and s.as_dict()["loses_on_sample"] is True
    assert total.describe().startswith("B+ shared by x, y: 4 bursts")
    assert total.describe().endswith("(not analysed where a sample lost)")
    # (below the fixed costs in some chunks only: it read as if no burst had been shared)
    assert "snapshots (in some runs the gains were below the fixed costs)" in total.describe()


def test_stats_name_stages_as_written_and_types_as_names():
    """A stage of GLORIA's plan is named as written; a Kleene type E is shown `E`+, quoted where
    it must be. A type named f(x) was taken for a stage by the shape of its name (shown bare,
    without its +), and stayed one across `add`."""
    from gpu_hamlet.engine.sharing import SharingStats

    a, b = gpu_hamlet.RunStats(), gpu_hamlet.RunStats()
    a.sets += [SharingStats("f(x)", ("q1", "q2"), bursts=1), SharingStats("B", ("my q", "r"))]
    b.sets.append(SharingStats("tran(A, B)", ("q1", "q2"), bursts=2, stage=True))
    b.sets.append(SharingStats("f(x)", ("q1", "q2"), bursts=2))
    a.add(b)
    assert [(s.kleene_type, s.stage, s.bursts) for s in a.sets] == [
        ("f(x)", False, 3),
        ("B", False, 0),
        ("tran(A, B)", True, 2),
    ]
    lines = a.describe().splitlines()
    assert lines[0].startswith("`f(x)`+ shared by q1, q2: 3 bursts")
    assert lines[1].startswith("B+ shared by `my q`, r:")
    assert lines[2].startswith("tran(A, B) shared by q1, q2: 2 bursts")

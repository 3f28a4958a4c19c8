"""Queries equal but for their names run once (`evaluate.same_as`): each still gets its table,
the table it gets alone, in every sharing and numeric mode; the engine's kernels run as for the
workload without the copies."""

from __future__ import annotations

import pyarrow as pa
import pytest

import gpu_hamlet
from cpu_fallback import CpuBackend
from gpu_hamlet import parse_workload
from gpu_hamlet.engine.backend import RecordingBackend
from gpu_hamlet.engine.evaluate import compile_workload
from gpu_hamlet.engine.events import prepare_events
from gpu_hamlet.engine.options import Options

FIRST = "q1: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 1 min"
COPIES = """
q2: return count(*), sum(B.x) pattern SEQ(A, B+, C) within 60 s;
q3: RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 1 min;
q4: RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 1 min;
q5: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 2 min;
q6: RETURN COUNT(*) PATTERN SEQ(A, B+, C) AND SEQ(A, C) WITHIN 1 min;
q7: RETURN COUNT(*) PATTERN SEQ(A, B+, C) AND SEQ(A, C) WITHIN 1 min
"""


def _events(n: int = 400) -> pa.Table:
    types = ["A", "B", "B", "B", "C", "B", "A", "C"]
    return pa.table(
        {
            "time": pa.array([i * 1000 for i in range(n)], pa.timestamp("ms")),
            "type": [types[(i * 7 + i // 5) % len(types)] for i in range(n)],
            "x": [float(i % 13) for i in range(n)],
        }
    )


def test_equal_queries_are_found_whatever_their_spelling():
    wl = parse_workload(FIRST + ";" + COPIES)
    ev = prepare_events(_events(), wl, "time", "type")
    runs, plans, _, same = compile_workload(ev.table.schema, wl, ev.axis, Options())
    assert same["q2"] == "q1" and same["q4"] == "q3"
    assert {n for n in same if n.startswith("q7")} and all(
        same[n].startswith("q6") for n in same if n.startswith("q7")
    )  # an AND's counts too
    assert not {"q1", "q3", "q5"} & set(same) and not set(same) & set(runs.names)
    assert set(plans) == set(runs.names) | set(same)


@pytest.mark.parametrize("sharing", ["none", "static", "dynamic"])
@pytest.mark.parametrize("numeric", ["exact", "float"])
def test_each_copy_gets_the_table_it_gets_alone(sharing: str, numeric: str):
    events = _events()
    text = FIRST + ";" + COPIES
    out = gpu_hamlet.aggregate(events, text, backend="cpu", sharing=sharing, numeric=numeric)
    assert list(out) == [f"q{i}" for i in range(1, 8)]
    for q in parse_workload(text):
        alone = gpu_hamlet.aggregate(events, q.text, backend="cpu", numeric=numeric)
        assert out[q.name].equals(next(iter(alone.values()))), q.name
        assert out[q.name].num_rows > 0


def test_copies_run_no_kernel_of_their_own():
    """The kernel calls of the workload with its copies are those of the workload without, to
    the shapes of their arrays (fusion would run copies in the same calls, over more rows)."""

    def calls(text: str) -> list[tuple]:
        be = RecordingBackend(CpuBackend())
        gpu_hamlet.aggregate(_events(), text, backend=be, sharing="none")
        return [(step, [a.shape for a in args if hasattr(a, "shape")]) for step, args in be.calls]

    distinct = FIRST + ";\nq3: RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 1 min"
    assert calls(FIRST + ";" + COPIES.split(";\nq5")[0]) == calls(distinct)

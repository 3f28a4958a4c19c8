"""Queries alike but for their names and RETURN run once (`conjunction.run_as`): each still
gets its table, the table it gets alone, in every sharing and numeric mode; the engine's kernels
run as for one query of all their aggregates, and an overflow names the query that asked."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpu_hamlet
from cpu_fallback import CpuBackend
from gpu_hamlet import parse_workload
from gpu_hamlet.engine.backend import RecordingBackend
from gpu_hamlet.engine.evaluate import compile_workload
from gpu_hamlet.engine.events import prepare_events
from gpu_hamlet.engine.options import Options
from gpu_hamlet.errors import NumericOverflowError
from gpu_hamlet.query.workload import Workload

try:
    from compare import events_to_table
    from strategies import event_streams, query_cases
except ImportError:  # pragma: no cover
    from tests.compare import events_to_table
    from tests.strategies import event_streams, query_cases

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


def test_alike_queries_are_found_whatever_their_spelling():
    wl = parse_workload(FIRST + ";" + COPIES)
    ev = prepare_events(_events(), wl, "time", "type")
    runs, plans, _, take = compile_workload(ev.table.schema, wl, ev.axis, Options())
    assert {n: take[n] for n in ("q1", "q2", "q3", "q4")} == dict.fromkeys(
        ("q1", "q2", "q3", "q4"), "q1[return]"
    )
    together = runs["q1[return]"]
    assert [str(a) for a in together.aggregates] == ["COUNT(*)", "SUM(B.x)"]
    assert dict(plans["q1[return]"].asked_by) == {"count": "q1", "sum_B_x": "q1"}
    assert "q5" not in take and "q5" in runs.names  # another window
    counts = [n for n in take if n.startswith("q7")]  # an AND's counts, equal to another's
    assert counts and all(take[n] == "q6" + n[2:] for n in counts)
    assert not set(take) & set(runs.names) and set(plans) == set(runs.names) | set(take)


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


def test_alike_queries_run_the_kernels_of_one():
    """The kernel calls of the workload with queries alike q1 are those of q1 alone, whose
    aggregates hold theirs, to the shapes of their arrays (fusion would run the others in the
    same calls, over more rows)."""

    def calls(text: str) -> list[tuple]:
        be = RecordingBackend(CpuBackend())
        gpu_hamlet.aggregate(_events(), text, backend=be, sharing="none")
        return [(step, [a.shape for a in args if hasattr(a, "shape")]) for step, args in be.calls]

    assert calls(FIRST + ";" + COPIES.split(";\nq5")[0]) == calls(FIRST)


def test_an_overflow_names_the_query_that_asked():
    """Two queries run as one of both aggregates: SUM(B.x) beyond decimal(38) is the error of
    the query that asks for it, not the other's."""
    big = pa.array([0, 9 * 10**37, 9 * 10**37, 9 * 10**37], pa.decimal128(38, 0))
    events = pa.table(
        {"time": pa.array([0, 1, 2, 3], pa.timestamp("s")), "type": list("ABBB"), "x": big}
    )
    text = (
        "c: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min;"
        "s: RETURN SUM(B.x) PATTERN SEQ(A, B+) WITHIN 1 min"
    )
    with pytest.raises(NumericOverflowError, match=r"^query s: SUM\(B\.x\)"):
        gpu_hamlet.aggregate(events, text, backend="cpu", numeric="exact")
    out = gpu_hamlet.aggregate(events, text, backend="cpu", numeric="exact", on_overflow="null")
    assert out["c"].column("count").to_pylist() == [7] and out["s"]["sum_B_x"].null_count == 1


@st.composite
def alike_cases(draw):
    """A random query and two to three others alike but for their names and RETURN (each a
    non-empty choice of its aggregates, in any order), and events of its types."""
    _, q = draw(query_cases(1, general=draw(st.booleans())))
    others = [
        replace(
            q,
            name=f"o{i}",
            aggregates=tuple(draw(st.permutations(q.aggregates))[: draw(st.integers(1, 3))]),
        )
        for i in range(draw(st.integers(2, 3)))
    ]
    types = sorted({*q.types, *q.negated_types}) if q.elements is None else list(q.types)
    return Workload((q, *others)), draw(event_streams(types, nulls=True))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(alike_cases(), st.sampled_from(["exact", "float"]), st.sampled_from(["none", "dynamic"]))
def test_alike_queries_get_the_tables_they_get_alone(case, numeric, sharing):
    wl, events = case
    table = events_to_table(events)
    out = gpu_hamlet.aggregate(
        table, wl, backend="cpu", numeric=numeric, sharing=sharing, on_overflow="null"
    )
    for q in wl:
        alone = gpu_hamlet.aggregate(
            table, Workload((q,)), backend="cpu", numeric=numeric, on_overflow="null"
        )
        assert out[q.name].equals(alone[q.name]), q.name

"""Workloads are parsed and compiled once per text and schema (issue 21, part 2): the caches must
never hand one call another call's plan where the difference matters."""

from __future__ import annotations

import pyarrow as pa
import pytest

import gpu_hamlet
from gpu_hamlet import parse_workload
from gpu_hamlet.engine.evaluate import compile_workload
from gpu_hamlet.engine.events import prepare_events
from gpu_hamlet.engine.options import Options
from gpu_hamlet.errors import WorkloadError

TEXT = "RETURN COUNT(*), AVG(B.x) PATTERN SEQ(A, B+) WITHIN 1 min"


def test_a_text_is_parsed_once_and_a_bad_one_fails_every_time():
    assert parse_workload(TEXT) is parse_workload(TEXT)
    for _ in range(2):
        with pytest.raises(WorkloadError, match="line 1"):
            parse_workload("RETURN COUNT(*) PATTERN SEQ(A, B+ WITHIN 1 min")


def _events(xs: list[float | None]) -> pa.Table:
    return pa.table(
        {
            "time": list(range(len(xs) + 1)),
            "type": ["A"] + ["B"] * len(xs),
            "x": pa.array([0.0, *xs], pa.float64()),
        }
    )


def test_plans_follow_each_calls_nulls():
    """The same text over a column without nulls, then with one: the second call's plan counts
    AVG's non-null values (a channel the first plan has no need of), so AVG stays right."""
    runs = {}
    for label, xs in (("no nulls", [1.0, 3.0]), ("a null", [1.0, None])):
        ev = prepare_events(_events(xs), parse_workload(TEXT), "time", "type")
        wl = parse_workload(TEXT)
        _, plans, _, _ = compile_workload(ev.table.schema, wl, ev.axis, Options(numeric="float"))
        runs[label] = plans["q1"].linear
    assert runs["no nulls"] != runs["a null"]
    # trends: B1, B2, B1B2 (x: 1, 3, 1+3); then B1, B2, B1B2 with B2.x null: x 1, -, 1
    out = gpu_hamlet.aggregate(_events([1.0, 3.0]), TEXT, backend="cpu", numeric="float")
    assert out["q1"]["avg_B_x"].to_pylist() == [pytest.approx((1 + 3 + 4) / 4)]
    out = gpu_hamlet.aggregate(_events([1.0, None]), TEXT, backend="cpu", numeric="float")
    assert out["q1"]["avg_B_x"].to_pylist() == [pytest.approx((1 + 1) / 2)]


def test_equal_queries_spelled_apart_keep_their_own_text():
    """Queries compare equal without their text; a cached plan still carries this call's."""
    a = parse_workload("RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 60 s")
    b = parse_workload("return count(*) pattern SEQ(A, B+) within 1 min")
    assert a == b and a.queries[0].text != b.queries[0].text
    ev = prepare_events(_events([1.0]), a, "time", "type")
    for wl in (a, b, a):
        runs, plans, _, _ = compile_workload(ev.table.schema, wl, ev.axis, Options())
        assert plans["q1"].query.text == wl.queries[0].text
        assert runs.queries[0].window_text == wl.queries[0].window_text

"""Runs of rows entering one state without a self-loop collapse into one macro row each
(gpu_hamlet/engine/query_rows.py `_collapse_runs`): against the oracle on streams made of runs,
in every numeric mode, sharing mode and backend, with the collapse seen to happen."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpu_hamlet
from gpu_hamlet.core.recursions import EVENT, MOVE
from gpu_hamlet.engine import query_rows
from gpu_hamlet.engine.options import SHARING_MODES
from gpu_hamlet.engine.query_rows import QueryRows
from gpu_hamlet.engine.row_runs import collapsible_runs
from gpu_hamlet.query.parser import parse_workload

try:  # tests/ is a rootdir-inserted folder (no __init__.py) or a package
    from compare import NUMERIC_MODES, ORACLE_SETTINGS, assert_matches_oracle, events_to_table
    from oracle import oracle
    from strategies import G_VALUES, K_VALUES, S_VALUES, workload_cases, workload_types
except ImportError:  # pragma: no cover
    from tests.compare import NUMERIC_MODES, ORACLE_SETTINGS, assert_matches_oracle, events_to_table
    from tests.oracle import oracle
    from tests.strategies import G_VALUES, K_VALUES, S_VALUES, workload_cases, workload_types


def every_run_collapses():
    """Every run collapses, however few rows it saves, in every numeric mode (the engine waits
    for COLLAPSE_FRACTION, and never collapses for a float pass alone)."""
    return mock.patch.object(query_rows, "COLLAPSE_FRACTION", {"exact": 0.0, "float": 0.0})


def run(events, workload, **options):
    """The engine, on the CPU backend unless told."""
    return gpu_hamlet.aggregate(events, workload, **{"backend": "cpu", **options})


@pytest.fixture
def collapsed(monkeypatch) -> list[int]:
    """The number of runs each QueryRows collapsed, appended as they are formed."""
    seen: list[int] = []
    collapse = QueryRows._collapse_runs

    def counting(self: QueryRows) -> None:
        collapse(self)
        seen.append(int(self.run_macro.sum()))

    monkeypatch.setattr(QueryRows, "_collapse_runs", counting)
    return seen


@st.composite
def run_streams(draw, types: list[str], max_events: int = 14) -> list[dict]:
    """Events in runs of one type (1 to 4 events), times rising with some ties (within a run
    and across runs), now and then an event of another type inside a run; every type occurs."""
    events: list[dict] = []
    t = 0
    while len(events) < max_events and draw(st.integers(0, 5)) > 0 or not events:
        typ = draw(st.sampled_from(types + ["N"]))
        for _ in range(draw(st.integers(1, 4))):
            t += draw(st.sampled_from([0, 1, 1, 2]))
            kind = draw(st.sampled_from(types)) if draw(st.integers(0, 6)) == 0 else typ
            events.append(
                {
                    "time": t,
                    "type": kind,
                    "g": draw(st.sampled_from(G_VALUES)),
                    "k": draw(st.sampled_from(K_VALUES)),
                    "x": draw(st.integers(-3, 5)),
                    "y": draw(st.integers(-8, 8)) / 4,
                    "s": draw(st.sampled_from(S_VALUES)),
                }
            )
    events = events[:max_events]
    for typ in set(types) - {e["type"] for e in events}:  # every type occurs, as in strategies
        events.append(dict(events[-1], time=events[-1]["time"] + 1, type=typ))
    return events


@ORACLE_SETTINGS
@given(
    case=workload_cases(max_queries=2, general=True).flatmap(
        lambda c: st.tuples(st.just(c), run_streams(workload_types(c[1])))
    ),
    sharing=st.sampled_from(SHARING_MODES),
)
def test_streams_of_runs_match_the_oracle(case, sharing):
    (text, wl), events = case
    expected = oracle(events, wl, with_magnitudes=True)
    table = events_to_table(events)
    with every_run_collapses():
        for numeric in NUMERIC_MODES:
            tables = run(table, text, sharing=sharing, numeric=numeric)
            assert_matches_oracle(tables, expected, wl, numeric)


RUNS_TEXT = (
    "q1: RETURN COUNT(*), SUM(B.x), MIN(B.x), AVG(C.y) PATTERN SEQ(A, B, C+) GROUPBY g "
    "WITHIN 10 s SLIDE 5 s; "
    "q2: RETURN COUNT(B), MAX(A.x) PATTERN SEQ(A, NOT N, B, C) WITHIN 20 s"
)


def runs_events() -> list[dict]:
    """Runs of A, B and C in two groups; a tie between a run's last B and a C (not collapsed
    there), an N inside q2's window."""
    kinds = "AAABBBBCCAABBBCCCAAANBBBBCC"
    events, t = [], 0
    for i, kind in enumerate(kinds):
        t += 0 if i == 13 else 1  # the 14th event (C) shares the time of the B before it
        for g in ("g1", "g2"):
            events.append(
                {"time": t, "type": kind, "g": g, "k": 0, "x": i % 5 - 1, "y": i / 4, "s": "u"}
            )
    return events


@pytest.mark.parametrize("numeric", NUMERIC_MODES)
@pytest.mark.parametrize("backend", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_runs_collapse_and_keep_every_aggregate(collapsed, numeric, backend):
    events = runs_events()
    with every_run_collapses():
        tables = run(events_to_table(events), RUNS_TEXT, numeric=numeric, backend=backend)
    wl = parse_workload(RUNS_TEXT)
    assert_matches_oracle(tables, oracle(events, wl, with_magnitudes=True), wl, numeric)
    assert collapsed and max(collapsed) > 0, "no run was collapsed: the macro path is not tested"


@pytest.mark.parametrize("numeric", NUMERIC_MODES)
def test_runs_collapse_by_default_only_before_residue_passes(collapsed, numeric):
    """With the default thresholds, runs that drop this many rows collapse when residue passes
    follow the float pass (exact, bigint), and never for a float pass alone."""
    events = runs_events()
    tables = run(events_to_table(events), RUNS_TEXT, numeric=numeric)
    wl = parse_workload(RUNS_TEXT)
    assert_matches_oracle(tables, oracle(events, wl, with_magnitudes=True), wl, numeric)
    assert (max(collapsed, default=0) > 0) == (numeric != "float")


def test_a_self_loop_state_is_no_run(collapsed):
    """B+ reads its own state: its runs stay event by event (shared bursts handle them)."""
    events = [{"time": t, "type": x, "g": "g1", "k": 0, "x": 1, "y": 0.5, "s": "u"}
              for t, x in enumerate("ABBBBC")]  # fmt: skip
    text = "RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 1 h"
    tables = run(events_to_table(events), text, sharing="none")
    assert np.asarray(collapsed).sum() == 0
    assert tables["q1"]["count"].to_pylist() == [15]


def _runs_by_array_steps(pos, kind, macro, self_loops, pid, seg, time):
    """The runs as array operations, the definition `collapsible_runs` compiles into one pass."""
    n = pos.shape[0]
    ok = (kind == EVENT) & ~macro & (pos >= 0)
    ok[ok] = ~self_loops[pos[ok]]
    same_seg = (pid[1:] == pid[:-1]) & (seg[1:] == seg[:-1])
    link = (pos[1:] == pos[:-1]) & ok[1:] & ok[:-1] & same_seg
    starts = np.flatnonzero(link & ~np.r_[False, link[:-1]])
    ends = np.flatnonzero(link & ~np.r_[link[1:], False]) + 1
    shared_time = same_seg & (time[1:] == time[:-1])
    clear_before = (starts == 0) | ~shared_time[np.maximum(starts - 1, 0)]
    clear_after = (ends == n - 1) | ~shared_time[np.minimum(ends, n - 2)]
    keep = clear_before & clear_after
    return starts[keep], ends[keep]


@settings(deadline=None)  # (the first example compiles the pass)
@given(st.integers(2, 40), st.integers(0, 2**32 - 1))
def test_collapsible_runs_are_the_array_definition(n, seed):
    rng = np.random.default_rng(seed)
    pos = rng.integers(-1, 3, n)
    kind = np.where(rng.random(n) < 0.1, MOVE, EVENT).astype(np.int64)
    macro = rng.random(n) < 0.1
    self_loops = rng.random(3) < 0.3
    pid = np.sort(rng.integers(0, 2, n))
    seg = np.zeros(n, np.int64)
    for p in (0, 1):  # segments ascend within a partition, times within a segment
        at = pid == p
        seg[at] = np.sort(rng.integers(0, 2, at.sum()))
    time = np.cumsum(rng.integers(0, 2, n))
    got = collapsible_runs(pos, kind, macro, self_loops, pid, seg, time, EVENT)
    want = _runs_by_array_steps(pos, kind, macro, self_loops, pid, seg, time)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])

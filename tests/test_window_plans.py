"""Both ways of evaluating sliding windows agree with the oracle: composing pane maps, and
copying events into their windows (the engine picks the cheaper one per query)."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
import pyarrow as pa
import pytest
from compare import assert_matches_oracle, events_to_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import oracle
from strategies import event_streams, workload_cases, workload_types

import gpu_hamlet
from gpu_hamlet.engine.pruning import rows_in_runs
from gpu_hamlet.engine.query_rows import QueryRows
from gpu_hamlet.engine.window_copies import window_copies, windows_holding


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.data(),
    st.booleans(),
    st.sampled_from(["exact", "float"]),
    st.sampled_from(["none", "static"]),
)
def test_pane_maps_and_window_copies_match_oracle(data, copies, numeric, sharing):
    text, wl = data.draw(workload_cases())
    events = data.draw(event_streams(workload_types(wl)))
    expected = oracle(events, wl, with_magnitudes=True)
    with patch.object(QueryRows, "_copies_cheaper", return_value=copies):
        got = gpu_hamlet.aggregate(
            events_to_table(events), text, numeric=numeric, sharing=sharing, backend="cpu"
        )
    assert_matches_oracle(got, expected, wl, numeric)


@pytest.mark.parametrize("copies", [True, False], ids=["copies", "maps"])
@pytest.mark.parametrize("kind", ["int", "float"])
def test_windows_of_more_than_2_to_62_panes_from_near_minus_2_to_62(copies, kind):
    """Windows of 2^62 + 2^61 + 1 one-second panes sliding by 2^61, over events whose first
    window starts at -2^63 (int64 seconds; float times the same values in ms, which are the
    float's panes): the first window holding a pane, ceil((pane - n + 1) / a), wrapped int64 in
    pane - n + 1 and raised NumPy's "negative dimensions" (both routes; the float bounds check
    wrapped silently). The oracle's three windows, each holding every trend."""
    S, W = 2**61, 2**62 + 2**61 + 1
    t0 = -(2**63) + W - 5
    unit = "s"
    times: list[int | float] = [t0, t0 + 1, t0 + 2]
    if kind == "float":  # (float seconds in panes of 1 ms: 2^62 of them reach 4.6e15 s)
        unit, times = "ms", [-4.5e15, -4.5e15 + 2, -4.5e15 + 4]
    events = [{"time": t, "type": ty} for t, ty in zip(times, "ABB")]
    text = f"RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN {W} {unit} SLIDE {S} {unit}"
    wl = gpu_hamlet.parse_workload(text)
    schema = pa.schema(
        [("time", pa.int64() if kind == "int" else pa.float64()), ("type", pa.string())]
    )
    table = pa.Table.from_pylist(events, schema=schema)
    expected = oracle(events, wl)
    assert [r["count"] for r in expected["q1"]] == [3, 3, 3]
    for sharing in ("none", "dynamic"):
        with patch.object(QueryRows, "_copies_cheaper", return_value=copies):
            got = gpu_hamlet.aggregate(table, text, backend="cpu", sharing=sharing)
        if kind == "int":
            assert_matches_oracle(got, expected, wl, event_schema=schema)
            continue
        # Float bounds this far out are k * SLIDE + WITHIN in float64, within a float step (1 s
        # at 7e15 s) of the exact ones (docs/semantics.md section 6): 0.0 for the middle's 0.001.
        rows = got["q1"].to_pylist()
        assert [r["count"] for r in rows] == [3, 3, 3]
        for r, e in zip(rows, expected["q1"]):
            assert abs(r["window_start"] - e["window_start"]) <= 1.0
            assert abs(r["window_end"] - e["window_end"]) <= 1.0


def test_cost_rule_prefers_maps_for_dense_panes_and_copies_for_sparse():
    """Dense panes (a thousand events each, and twelve under windows of ten panes, where the
    rule before chose copies at 2.6x the maps' time: BENCHMARKS.md, "Sliding windows' route")
    take pane maps; partitions of two events take copies."""
    dense = events_to_table(
        [
            {"time": t // 10, "type": "AB"[t % 2], "g": "g1", "k": 0, "x": 1, "y": 0.0, "s": "u"}
            for t in range(40_000)
        ]
    )
    # Sparse: 2000 partitions of one A then one B (a lone event would be pruned: no trend).
    sparse = events_to_table(
        [
            {"time": t, "type": "AB"[t % 2], "g": "g1", "k": t // 2, "x": 1, "y": 0.0, "s": "u"}
            for t in range(4000)
        ]
    )
    long = events_to_table(
        [
            {"time": 5 * t, "type": "ABC"[t % 3], "g": "g1", "k": 0, "x": t, "y": 0.0, "s": "u"}
            for t in range(20_000)
        ]
    )
    text = "RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE [k] WITHIN 300 s SLIDE 100 s"
    chosen = []
    original = QueryRows._copies_cheaper

    def spy(self, starts):
        chosen.append(original(self, starts))
        return chosen[-1]

    options = dict(backend="cpu", numeric="float", on_overflow="null")
    with patch.object(QueryRows, "_copies_cheaper", spy):
        gpu_hamlet.aggregate(dense, text.replace(" WHERE [k]", ""), **options)
        gpu_hamlet.aggregate(sparse, text, **options)
        gpu_hamlet.aggregate(
            long,
            "RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 min SLIDE 1 min",
            **options,
        )
    assert chosen == [False, True, False]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), a=st.integers(1, 3), extra=st.integers(0, 5))
def test_window_copies_list_every_window_of_every_event(data, a, extra):
    """Against the definition: event e is in window k when its pane lies in [k*a, k*a + n);
    copies ordered by partition, window, event. Negative panes and gaps of empty windows."""
    n = a + extra
    m = data.draw(st.integers(0, 30))
    pid = np.sort(
        np.asarray(data.draw(st.lists(st.integers(0, 2), min_size=m, max_size=m)), np.int64)
    )
    pane = np.asarray(data.draw(st.lists(st.integers(-20, 60), min_size=m, max_size=m)), np.int64)
    pane = pane[np.lexsort((pane, pid))]
    want = sorted(
        (int(pid[e]), k, e)
        for e in range(m)
        for k in range(-100, 100)
        if k * a <= pane[e] < k * a + n
    )
    none = np.zeros(0, bool)
    rep, win = window_copies(pid, pane, a, n, len(want), none, none, none)
    assert [(int(pid[e]), int(k), int(e)) for e, k in zip(rep, win)] == want
    # The windows holding an event, which the choice of route reads, from each run's first.
    starts = np.flatnonzero(np.r_[True, (pid[1:] != pid[:-1]) | (pane[1:] != pane[:-1])][:m])
    assert windows_holding(pid, pane, starts, a, n) == len({(p, k) for p, k, _ in want})
    # Pruned as they are made: the copies `rows_in_runs` keeps among all of them.
    flags = [
        np.asarray(data.draw(st.lists(st.booleans(), min_size=m, max_size=m)), bool)
        for _ in range(3)
    ]
    kept = rows_in_runs(pid[rep], win, *(f[rep] for f in flags))
    got_rep, got_win = window_copies(pid, pane, a, n, len(want), *flags)
    assert got_rep.tolist() == rep[kept].tolist()
    assert got_win.tolist() == win[kept].tolist()

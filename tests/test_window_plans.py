"""Both ways of evaluating sliding windows agree with the oracle: composing pane maps, and
copying events into their windows (the engine picks the cheaper one per query)."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
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

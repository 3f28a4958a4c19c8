"""Pruning (gpu_hamlet/pruning.py) keeps every event of every trend, and does drop the others."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_hamlet.pruning import may_complete
from oracle import enumerate_trends

PATTERNS = ["SEQ(A, B+, C)", "SEQ(A, B)", "B+", "SEQ(A+, C+)", "SEQ(A, B, C)"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PATTERNS), st.integers(1, 6),
       st.lists(st.tuples(st.integers(0, 2), st.integers(0, 12), st.sampled_from("ABCD")),
                max_size=24), st.sampled_from([np.int64, np.float64]))
def test_every_event_of_a_trend_is_kept(pattern, within, raw, dtype):
    """Events sorted by (run, time); a trend lies in one run and spans less than `within`."""
    types = [e.rstrip("+") for e in pattern.removeprefix("SEQ(").rstrip(")").split(", ")]
    ev = sorted(raw)
    run = np.asarray([r for r, _, _ in ev], np.int64)
    time = np.asarray([t for _, t, _ in ev], dtype)
    pos = np.asarray([types.index(x) if x in types else -1 for _, _, x in ev], np.int64)
    keep = _mask(may_complete(run, time, pos, len(types), within), len(ev))
    needed = set()
    for r in set(run.tolist()):
        at = np.flatnonzero(run == r)
        for trend in enumerate_trends([(ev[i][2], ev[i][1]) for i in at], pattern):
            if time[at[trend[-1]]] - time[at[trend[0]]] < within:
                needed.update(int(at[j]) for j in trend)
    assert all(keep[i] for i in needed)
    unbounded = _mask(may_complete(run, time, pos, len(types), None), len(ev))
    assert np.all(unbounded | ~keep)  # a distance bound only removes more
    assert not keep[pos < 0].any()  # unmatched events are never kept


def test_lone_and_distant_events_are_dropped():
    # SEQ(A, B+, C): B without an A before it, B too far from its A, a run without C.
    run = np.asarray([0, 0, 0, 0, 1, 1, 2, 2, 2], np.int64)
    time = np.asarray([0, 1, 2, 3, 0, 1, 0, 9, 10], np.int64)
    pos = np.asarray([1, 0, 1, 2, 0, 1, 0, 1, 2], np.int64)
    assert may_complete(run, time, pos, 3, 5).tolist() == [1, 2, 3]
    assert may_complete(run, time.astype(float), pos, 3, 5.0).tolist() == [1, 2, 3]
    # Windows split run 0 after time 1: its B at 2 has no A in its window any more.
    window_run = np.asarray([0, 0, 1, 1, 2, 2, 3, 3, 3], np.int64)
    assert may_complete(window_run, time, pos, 3, None).tolist() == [6, 7, 8]


def _mask(idx: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, bool)
    out[idx] = True
    return out

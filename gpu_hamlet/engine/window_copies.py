"""Copying events into the windows that hold them, for queries whose windows are cheaper to run
from zero than to compose from pane maps (QueryRows._into_windows).

Windows are [k*a, k*a + n) in pane units. Within a partition the events are in time order, so
the events of window k are one contiguous range, and both ends of that range only move forward
as k grows: one pass per partition, no sort. Windows without events are skipped.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def window_copies(
    pid: np.ndarray,
    pane: np.ndarray,
    a: int,
    n: int,
    total: int,
    matched: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(event index, window index) of every copy, at most `total` of them, ordered by
    partition, window and event. Events are sorted by partition (ascending) and pane.

    With `matched`, `starts` and `ends` (per event; empty arrays: keep every copy) each
    window keeps only its `matched` events from its first start to its last end, as
    `pruning.rows_in_runs` would keep them among the copies: the copies it drops are never
    made (docs/architecture.md section 4)."""
    m = pane.shape[0]
    prune = matched.shape[0] > 0
    # With pruning: the first start at or after each event, the last end at or before it.
    next_start = np.empty(m + 1 if prune else 0, np.int64)
    prev_end = np.empty(m if prune else 0, np.int64)
    if prune:
        next_start[m] = m
        for e in range(m - 1, -1, -1):
            next_start[e] = e if starts[e] else next_start[e + 1]
        last = -1
        for e in range(m):
            if ends[e]:
                last = e
            prev_end[e] = last
    rep = np.empty(total, np.int64)
    win = np.empty(total, np.int64)
    o = 0
    i = 0
    while i < m:
        j = i
        while j < m and pid[j] == pid[i]:
            j += 1
        lo = hi = i
        k = -((n - 1 - pane[i]) // a)  # the first window holding the partition's first event
        while lo < j:
            while lo < j and pane[lo] < k * a:
                lo += 1
            if hi < lo:
                hi = lo
            while hi < j and pane[hi] < k * a + n:
                hi += 1
            if not prune:
                for e in range(lo, hi):
                    rep[o] = e
                    win[o] = k
                    o += 1
            elif hi > lo:
                for e in range(next_start[lo], prev_end[hi - 1] + 1):
                    rep[o] = e
                    win[o] = k
                    o += matched[e]
            if lo < j and hi == lo:  # window k is empty: jump to the first holding event lo
                k = -((n - 1 - pane[lo]) // a)
            else:
                k += 1
        i = j
    return rep[:o], win[:o]

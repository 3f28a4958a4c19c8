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
    pid: np.ndarray, pane: np.ndarray, a: int, n: int, total: int
) -> tuple[np.ndarray, np.ndarray]:
    """(event index, window index) of every copy, `total` of them, ordered by partition, window
    and event. Events are sorted by partition (ascending) and pane."""
    rep = np.empty(total, np.int64)
    win = np.empty(total, np.int64)
    o = 0
    i = 0
    m = pane.shape[0]
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
            for e in range(lo, hi):
                rep[o] = e
                win[o] = k
                o += 1
            if lo < j and hi == lo:  # window k is empty: jump to the first holding event lo
                k = -((n - 1 - pane[lo]) // a)
            else:
                k += 1
        i = j
    return rep, win

"""Copying events into the windows that hold them, for queries whose windows are cheaper to run
from zero than to compose from pane maps (QueryRows._into_windows), and the costs that choose
between the two routes (`WindowRouteCosts`).

Windows are [k*a, k*a + n) in pane units. Within a partition the events are in time order, so
the events of window k are one contiguous range, and both ends of that range only move forward
as k grows: one pass per partition, no sort. Windows without events are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from gpu_hamlet.core.panes import first_window


@dataclass(frozen=True)
class WindowRouteCosts:
    """Seconds of the two routes to a query's sliding windows. Copies: each of the query's rows
    once per window holding its pane, about r = ceil(n / a) windows (`copy_s` a copy). Pane
    maps: a map and its products for each non-empty (partition, pane) run (`pane_s` per
    D * (k + 1), about the map's nonzeros: a block of (k + 1)^2 per channel, D = channels *
    (k + 1) + 1 for k states), each window holding an event composed from them (`window_s`),
    and the composing step's own call (`maps_s`, which decides small inputs). What both routes
    pay alike (the rows' own updates, the results) is left out. Forms tried first and dropped:
    maps per D^3 (copies at up to 3x the maps' time on exact sums' larger maps) and per D^2.5
    (maps at up to 1.55x the copies' time for SEQ of 7 to 10 types).

    Fitted by `MALLOC_ARENA_MAX=1 python benchmarks/calibrate_windows.py` (2-core x86_64; 152
    cases from dense panes to about one event per pane, float and exact, 3 to 10 states, and
    bench_small.py's 20 sliding queries; BENCHMARKS.md, "Sliding windows' route"), with one
    malloc arena as Spark's workers run (host_memory.py). The GPU backend uses the same
    constants (not calibrated on a device)."""

    copy_s: float
    pane_s: float
    window_s: float
    maps_s: float

    def copies_cheaper(self, rows: int, r: int, nseg: int, windows: int, D: int, k: int) -> bool:
        copies = self.copy_s * rows * r
        maps = self.pane_s * nseg * D * (k + 1) + self.window_s * windows + self.maps_s
        return copies < maps


WINDOW_ROUTE_COSTS = WindowRouteCosts(copy_s=1e-08, pane_s=6e-09, window_s=1e-08, maps_s=2.3e-04)


@njit(cache=True, nogil=True)
def windows_holding(pid: np.ndarray, pane: np.ndarray, starts: np.ndarray, a: int, n: int) -> int:
    """The windows [k*a, k*a + n) that hold an event, over every partition, from the first
    event of each (partition, pane) run (`starts`, events sorted by partition and pane): each
    run's windows, less those the partition's run before counted. Compiled: a query's choice
    of route makes this call, and NumPy's steps cost a small call more than its runs."""
    total = 0
    after = 0  # the first window the run before (same partition) left uncounted
    for j in range(starts.shape[0]):
        i = starts[j]
        lo = first_window(pane[i], a, n)
        hi = pane[i] // a  # the last
        if j == 0 or pid[i] != pid[starts[j - 1]]:
            after = lo
        total += max(hi - max(lo, after) + 1, 0)
        after = max(after, hi + 1)
    return total


@njit(cache=True, nogil=True)
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
        k = first_window(pane[i], a, n)  # the first window holding the partition's first event
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
                k = first_window(pane[lo], a, n)
            else:
                k += 1
        i = j
    return rep[:o], win[:o]

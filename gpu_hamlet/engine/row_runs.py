"""The runs of a query's rows that collapse into one macro row each (`QueryRows._collapse_runs`,
docs/architecture.md section 2), found in one compiled pass over the rows: the NumPy version
took a dozen array operations per query, as long as the kernel's own pass over few rows."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _ok(j, pos, kind, macro, self_loops, event):
    """Whether row j may be in a run: an event row (not a MOVE or macro row) entering a state
    without a self-loop."""
    p = pos[j]
    return (kind[j] == event) & (not macro[j]) & (p >= 0) & (not self_loops[max(p, 0)])


@njit(cache=True, nogil=True)
def _same_run(i, pid, seg):
    """Whether rows i and i + 1 lie in one (partition, segment)."""
    return (pid[i + 1] == pid[i]) & (seg[i + 1] == seg[i])


@njit(cache=True, nogil=True)
def _tied(i, pid, seg, time):
    """Whether rows i and i + 1 share a timestamp in one (partition, segment)."""
    return _same_run(i, pid, seg) & (time[i + 1] == time[i])


@njit(cache=True, nogil=True)
def collapsible_runs(pos, kind, macro, self_loops, pid, seg, time, event):
    """(first, last) rows of each run: two or more consecutive rows entering one state, each
    `_ok`, in one (partition, segment), whose first row shares no timestamp with the row before
    it in its (partition, segment), nor its last with the row after (rows of one timestamp read
    the state from before it). Ascending.

    Without a branch on the rows (which alternate at random between runs and other rows):
    every row writes its run's bounds, and only the last row of a run that stays moves on."""
    n = pos.shape[0]
    first = np.empty(n // 2 + 1, np.int64)
    last = np.empty(n // 2 + 1, np.int64)
    m = 0
    s = 0  # the first row of the current run
    linked = False  # rows i - 1 and i are in one run
    for i in range(n):
        nxt = False  # rows i and i + 1 are in one run
        if i < n - 1:
            nxt = (
                (pos[i + 1] == pos[i])
                & _same_run(i, pid, seg)
                & _ok(i, pos, kind, macro, self_loops, event)
                & _ok(i + 1, pos, kind, macro, self_loops, event)
            )
        s = i if nxt & (not linked) else s
        before = (s > 0) & _tied(max(s - 1, 0), pid, seg, time)
        after = (i < n - 1) & _tied(min(i, n - 2), pid, seg, time)
        first[m] = s
        last[m] = i
        m += linked & (not nxt) & (not (before | after))
        linked = nxt
    return first[:m].copy(), last[:m].copy()

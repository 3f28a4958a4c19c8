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
    return kind[j] == event and not macro[j] and pos[j] >= 0 and not self_loops[pos[j]]


@njit(cache=True, nogil=True)
def _same_run(i, pid, seg):
    """Whether rows i and i + 1 lie in one (partition, segment)."""
    return pid[i + 1] == pid[i] and seg[i + 1] == seg[i]


@njit(cache=True, nogil=True)
def collapsible_runs(pos, kind, macro, self_loops, pid, seg, time, event):
    """(first, last) rows of each run: two or more consecutive rows entering one state, each
    `_ok`, in one (partition, segment), whose first row shares no timestamp with the row before
    it in its (partition, segment), nor its last with the row after (rows of one timestamp read
    the state from before it). Ascending."""
    n = pos.shape[0]
    first = np.empty(n // 2 + 1, np.int64)
    last = np.empty(n // 2 + 1, np.int64)
    m = 0
    i = 0
    while i < n - 1:
        if not (
            pos[i + 1] == pos[i]
            and _same_run(i, pid, seg)
            and _ok(i, pos, kind, macro, self_loops, event)
            and _ok(i + 1, pos, kind, macro, self_loops, event)
        ):
            i += 1
            continue
        s = i
        i += 1
        while (
            i < n - 1
            and pos[i + 1] == pos[i]
            and _same_run(i, pid, seg)
            and _ok(i + 1, pos, kind, macro, self_loops, event)
        ):
            i += 1
        # Rows s .. i form a run.
        before = s > 0 and _same_run(s - 1, pid, seg) and time[s - 1] == time[s]
        after = i < n - 1 and _same_run(i, pid, seg) and time[i + 1] == time[i]
        if not (before or after):
            first[m] = s
            last[m] = i
            m += 1
    return first[:m].copy(), last[:m].copy()

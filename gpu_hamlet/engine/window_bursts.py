"""One compiled pass each over a sharable set's sorted rows for the window sets of NEXT
conditions (gpu_hamlet/engine/window_sharing.py): the bursts of its Kleene type, and per window
the types present and its Kleene events, which `dynamic` weighs before it shares anything.

As chains of NumPy passes (reductions at group starts, cumulative sums, scatters) they took
about 2.8 ms of a 25 ms call of 5 queries over 100,000 events in 1-minute windows
(bench_next_sharing.py), where not sharing at all took 20 ms (docs/architecture.md section 9).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def window_bursts(pid: np.ndarray, pane: np.ndarray, t: np.ndarray, is_e: np.ndarray) -> np.ndarray:
    """Burst number of every E event of a set stream sorted by partition and time (-1 for other
    events): maximal runs of timestamp groups of E events only, within a partition and pane; the
    E events of a timestamp group that mixes types form a burst of their own (they all read the
    state before the group, so one snapshot serves them)."""
    n = t.shape[0]
    out = np.full(n, -1, np.int64)
    number = -1
    prev_pure = False  # the group before was of E events only (in this partition and pane)
    i = 0
    while i < n:
        j = i + 1
        while j < n and pid[j] == pid[i] and pane[j] == pane[i] and t[j] == t[i]:
            j += 1
        new_part = i == 0 or pid[i] != pid[i - 1] or pane[i] != pane[i - 1]
        pure, has = True, False
        for k in range(i, j):
            if is_e[k]:
                has = True
            else:
                pure = False
        if has:
            if new_part or not pure or not prev_pure:
                number += 1
            for k in range(i, j):
                if is_e[k]:
                    out[k] = number
        prev_pure = pure and has
        i = j
    return out


@njit(cache=True, nogil=True)
def window_presence(
    pid: np.ndarray, win: np.ndarray, codes: np.ndarray, is_e: np.ndarray, ntypes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per window (a run of rows of one partition and window number `win`): its partition, which
    event types it holds ([windows, ntypes + 1]; the last column for codes below 0, types the
    table lacks), and how many of its rows are E events."""
    n = pid.shape[0]
    nw = 0
    for i in range(n):
        if i == 0 or pid[i] != pid[i - 1] or win[i] != win[i - 1]:
            nw += 1
    wpid = np.empty(nw, np.int64)
    present = np.zeros((nw, ntypes + 1), np.bool_)
    e_count = np.zeros(nw, np.float64)
    w = -1
    for i in range(n):
        if i == 0 or pid[i] != pid[i - 1] or win[i] != win[i - 1]:
            w += 1
            wpid[w] = pid[i]
        c = codes[i]
        present[w, c if c >= 0 else ntypes] = True
        if is_e[i]:
            e_count[w] += 1.0
    return wpid, present, e_count

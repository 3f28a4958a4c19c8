"""Burst detection on the host: which events of a sharable set's stream form bursts."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def burst_ids(pid: np.ndarray, pane: np.ndarray, t: np.ndarray, is_e: np.ndarray) -> np.ndarray:
    """Burst id of every event (-1 outside bursts): maximal runs of timestamp groups made only of
    Kleene-type events, within one partition and pane. Events are sorted by partition and time.
    One pass, timestamp group by timestamp group."""
    n = t.shape[0]
    out = np.empty(n, np.int64)
    last = -1  # the id of the latest burst
    prev_pure = False
    i = 0
    while i < n:
        new_part = i == 0 or pid[i] != pid[i - 1] or pane[i] != pane[i - 1]
        j = i
        pure = True
        while j < n and pid[j] == pid[i] and pane[j] == pane[i] and t[j] == t[i]:
            pure = pure and is_e[j]
            j += 1
        if pure and (new_part or not prev_pure):
            last += 1
        out[i:j] = last if pure else -1
        prev_pure = pure
        i = j
    return out

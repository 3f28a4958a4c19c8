"""Burst detection on the host: which events of a sharable set's stream form bursts."""

from __future__ import annotations

import numpy as np


def burst_ids(pid: np.ndarray, pane: np.ndarray, t: np.ndarray, is_e: np.ndarray) -> np.ndarray:
    """Burst id of every event (-1 outside bursts): maximal runs of timestamp groups made only of
    Kleene-type events, within one partition and pane. Events are sorted by partition and time."""
    n = t.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    new_part = np.r_[True, (pid[1:] != pid[:-1]) | (pane[1:] != pane[:-1])]
    new_group = new_part | np.r_[True, t[1:] != t[:-1]]
    gstarts = np.flatnonzero(new_group)
    pure = np.minimum.reduceat(is_e.astype(np.int8), gstarts).astype(bool)
    gid = np.cumsum(new_group) - 1
    pure_e = pure[gid]
    prev_pure = np.r_[False, pure_e[:-1]]
    start = pure_e & new_group & (~prev_pure | new_part)
    bid = np.cumsum(start) - 1
    return np.where(pure_e, bid, -1).astype(np.int64)

"""Dropping events that cannot be part of any trend, before any kernel runs.

A trend is a sequence of events at pattern positions 0, 1, ..., k-1 in time order, all in one
partition and one window (DESIGN.md section 2). An event that is in no trend changes no aggregate,
and removing it removes no trend and creates none (skip-till-any-match has no negation or
contiguity), so every result is unchanged. An event can only be in a trend when its run (its
partition, or its partition's window) holds a position-0 event at or before it and a
position-(k-1) event at or after it, both less than one window length away. On sparse
partitions (one driver's events in a 10-minute window) this removes most events, and with them
most of the per-query work; on dense ones it removes little and costs one compiled pass.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def may_complete(run: np.ndarray, time: np.ndarray, pos: np.ndarray, k: int,
                 within: int | float | None) -> np.ndarray:
    """Indices of the events (sorted by run, then time; pos -1: not matched) that have a start
    event at or before them and an end event at or after them in their run, closer than
    `within` in time (None: any distance)."""
    if pos.shape[0] == 0:
        return np.zeros(0, np.int64)
    bound = time.dtype.type(0 if within is None else within)
    if within is not None and time.dtype.kind == "f":
        # Float windows are assigned by floor(t / pane), which can disagree with an exact
        # difference by a few units in the last place of the largest time: widen the bound by
        # more than that (keeping an extra event is always safe).
        bound += 16 * np.spacing(max(float(np.max(np.abs(time))), float(within)))
    return _may_complete(run, time, pos, k, bound, within is not None)


@njit(cache=True)
def _may_complete(run, time, pos, k, within, bounded):
    # Forward: events with a start at or before them (the latest start is the closest); then
    # backward over those only: an end event without a start before it ends no trend either.
    # A difference of int64 times spanning more than 2^63 wraps negative and keeps the event.
    n = pos.shape[0]
    cand = np.empty(n, np.int64)
    c = 0
    have = False
    t0 = time[0]
    for i in range(n):
        if i > 0 and run[i] != run[i - 1]:
            have = False
        p = pos[i]
        if p < 0:
            continue
        if p == 0:
            have = True
            t0 = time[i]
        if have and (not bounded or time[i] - t0 < within):
            cand[c] = i
            c += 1
    keep = np.zeros(c, np.bool_)
    m = 0
    have = False
    for j in range(c - 1, -1, -1):
        i = cand[j]
        if j < c - 1 and run[i] != run[cand[j + 1]]:
            have = False
        if pos[i] == k - 1:
            have = True
            t0 = time[i]
        if have and (not bounded or t0 - time[i] < within):
            keep[j] = True
            m += 1
    out = np.empty(m, np.int64)
    m = 0
    for j in range(c):
        if keep[j]:
            out[m] = cand[j]
            m += 1
    return out

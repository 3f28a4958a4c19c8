"""A sharable set's bursts as extents of its stream, and the stream with each burst collapsed to
one slot: compiled passes, since the set stream is as long as the events some query matches.

`SharedBursts` (gpu_hamlet/engine/sharing.py) calls them once per call and set. Before, these
were a dozen NumPy passes (masks, bincounts, gathers and a scatter), about 10 ms per 10^6
events of the ridesharing set (benchmarks/bench_stream.py, docs/architecture.md section 4).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def burst_extents(burst_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each burst's first index in the set stream and its number of events. Burst ids ascend
    from 0 along the stream (-1: no burst), and a burst's events are consecutive there
    (`Backend.burst_ids`)."""
    n = burst_id.shape[0]
    nb = 0
    for i in range(n - 1, -1, -1):
        if burst_id[i] >= 0:
            nb = burst_id[i] + 1
            break
    first = np.empty(nb, np.int64)
    count = np.zeros(nb, np.int64)
    for i in range(n):
        b = burst_id[i]
        if b >= 0:
            if count[b] == 0:
                first[b] = i
            count[b] += 1
    return first, count


@njit(cache=True, nogil=True)
def collapsed_stream(burst_id, kept_id, set_idx, pid, rows, time, codes, burst_of):
    """The set stream with each kept burst collapsed to a slot at its first event: per slot its
    set_idx, pid, row, time, burst (numbered by `kept_id`, -1 for none or a burst not kept) and
    type code (the fields of `Slots`). Writes each event's kept burst into burst_of at its
    set_idx."""
    n = burst_id.shape[0]
    sel = np.empty(n, np.int64)
    burst = np.empty(n, np.int64)
    m = 0
    prev = -1
    for i in range(n):
        b = burst_id[i]
        kept = kept_id[b] if b >= 0 else -1
        burst_of[set_idx[i]] = kept
        if kept < 0 or kept != prev:
            sel[m] = i
            burst[m] = kept
            m += 1
        prev = kept
    sel = sel[:m]
    return set_idx[sel], pid[sel], rows[sel], time[sel], burst[:m].copy(), codes[sel]

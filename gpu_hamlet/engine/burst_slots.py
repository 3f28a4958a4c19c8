"""A sharable set's bursts as extents of its stream, and the stream with each burst collapsed to
one slot: compiled passes, since the set stream is as long as the events some query matches.

`SharedBursts` (gpu_hamlet/engine/sharing.py) calls them once per call and set, and
`SharedStages` (stage_sharing.py) collapses its shared runs the same way. Before, these
were a dozen NumPy passes (masks, bincounts, gathers and a scatter), about 10 ms per 10^6
events of the ridesharing set (benchmarks/bench_stream.py, docs/architecture.md section 4).
Bursts and plain events alternate at random, so the loops have no branch on them: every row
writes, to a spare entry where it adds nothing (a mispredicted branch per row cost 2-3 ms per
10^6 rows).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _with_spare(m, a, b, c, d, e, f):
    """Six outputs of m entries plus a spare, of the dtypes of a to f: every row of a pass
    writes at the output's end m, and only a row that stays moves m on (no branch per row)."""
    return (
        np.empty(m + 1, a.dtype),
        np.empty(m + 1, b.dtype),
        np.empty(m + 1, c.dtype),
        np.empty(m + 1, d.dtype),
        np.empty(m + 1, e.dtype),
        np.empty(m + 1, f.dtype),
    )


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
    first = np.empty(nb + 1, np.int64)  # entry nb: the spare
    end = np.empty(nb + 1, np.int64)
    prev = -1
    for i in range(n):
        b = burst_id[i]
        at = b if b >= 0 else nb
        first[b if b >= 0 and b != prev else nb] = i
        end[at] = i + 1  # the last write is the burst's last event
        prev = b
    return first[:nb], end[:nb] - first[:nb]


@njit(cache=True, nogil=True)
def collapsed_stream(burst_id, kept_id, set_idx, pid, rows, time, codes, burst_of):
    """The set stream with each kept burst collapsed to a slot at its first event: per slot its
    set_idx, pid, row, time, burst (numbered by `kept_id`, -1 for none or a burst not kept;
    its last entry is -1, which burst id -1 reads) and type code (the fields of `Slots`).
    Writes each event's kept burst into burst_of at its set_idx."""
    n = burst_id.shape[0]
    m = 0
    prev = -1
    for i in range(n):  # count the slots
        kept = kept_id[burst_id[i]]
        burst_of[set_idx[i]] = kept
        m += (kept < 0) | (kept != prev)
        prev = kept
    # (only a slot moves m on)
    out = _with_spare(m, set_idx, pid, rows, time, kept_id, codes)  # (burst: a kept id)
    m = 0
    prev = -1
    for i in range(n):
        kept = burst_of[set_idx[i]]
        out[0][m] = set_idx[i]
        out[1][m] = pid[i]
        out[2][m] = rows[i]
        out[3][m] = time[i]
        out[4][m] = kept
        out[5][m] = codes[i]
        slot = (kept < 0) | (kept != prev)
        m += slot
        prev = kept
    return out[0][:m], out[1][:m], out[2][:m], out[3][:m], out[4][:m], out[5][:m]


@njit(cache=True, nogil=True)
def matched_slots(lo, hi, code, pos_of_code, drop, set_idx, rows, time, pid, seg):
    """Of the slots in the [lo, hi) ranges, those whose code has a pattern position
    (`pos_of_code` >= 0) and that the query's filters keep (`drop` false): their set_idx, row,
    time, pid, macro segment and position, in one pass (`SharedBursts.compressed`; before, a
    range, a lookup, the filters' gathers, a mask and six gathers per query)."""
    total = 0
    for r in range(lo.shape[0]):
        total += hi[r] - lo[r]
    # (only a matched slot moves m on)
    o_idx, o_rows, o_time, o_pid, o_seg, o_pos = _with_spare(
        total, set_idx, rows, time, pid, seg, pos_of_code
    )
    m = 0
    for r in range(lo.shape[0]):
        for j in range(lo[r], hi[r]):
            p = -1 if drop[j] else pos_of_code[code[j]]
            o_idx[m] = set_idx[j]
            o_rows[m] = rows[j]
            o_time[m] = time[j]
            o_pid[m] = pid[j]
            o_seg[m] = seg[j]
            o_pos[m] = p
            m += p >= 0
    return o_idx[:m], o_rows[:m], o_time[:m], o_pid[:m], o_seg[:m], o_pos[:m]


@njit(cache=True, nogil=True)
def run_lengths(codes: np.ndarray, pid: np.ndarray, role: np.ndarray) -> np.ndarray:
    """How many runs of each length (entry b: runs of b events; entry 0 unused) a set's Kleene
    type forms in the sorted order, before the set is analysed: each burst `SharedBursts`
    finds lies in one such run. role[code] is 1 for the Kleene type, -1 for a type that ends a
    run (one the set's stream keeps whole), and 0 for a type it may drop (no query of the set
    has it, or every query filters it), which a run goes over. A new partition ends a run;
    panes, timestamps that mix types and filters only cut runs further. One pass without a
    branch per row: a row that ends no run adds its count to entry 0."""
    hist = np.zeros(codes.shape[0] + 1, np.int64)
    b = 0
    prev = pid[0] if pid.shape[0] else 0
    for i in range(codes.shape[0]):
        r = role[codes[i]]
        cut = (r < 0) | (pid[i] != prev)
        hist[b * cut] += 1
        b = b * (1 - cut) + (r > 0)
        prev = pid[i]
    hist[b] += 1
    hist[0] = 0
    last = hist.shape[0] - 1
    while last > 0 and hist[last] == 0:
        last -= 1
    return hist[: last + 1]

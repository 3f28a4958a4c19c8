"""Dropping events that cannot be part of any trend, before any kernel runs.

A trend is a sequence of events from one entering a start state of the pattern's automaton to
one entering an end state, in time order, all in one partition and one window
(docs/semantics.md). An event that is in no trend changes no aggregate, and removing it removes
no trend and creates none, so every result is unchanged. An event can only be in a trend when its
run (its partition, or its partition's window) holds a start event at or before it and an end
event at or after it, both less than one window length away. A negated event matters only
between a trend's first and last events, so the same test keeps every one that does. On sparse
partitions (one driver's events in a 10-minute window) this removes most events, and with them
most of the per-query work; on dense ones it removes little and costs one compiled pass.

The test works from the start and end events alone: `reach` gives the ranges of the stream the
starts cover, `spans` the parts of those the ends cover. A caller that can list a query's start
and end events without a pass over the stream (a sharable set's per-type index,
gpu_hamlet/engine/sharing.py) reads no other slots, and queries with the same start events and
window length share one `reach`.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
from numba import njit

from gpu_hamlet.query.time_axis import value_range


def bound(time_max: float, within: int | float | None, dtype: np.dtype) -> tuple:
    """The (within, bounded, lowest, highest) arguments of `reach` and `spans` for `within`
    (None: any distance), given the largest absolute time of the stream."""
    if within is None:
        return dtype.type(0), False, dtype.type(0), dtype.type(0)
    if dtype.kind == "f":
        # Float windows are assigned by floor(t / pane), which can disagree with an exact
        # difference by a few units in the last place of the largest time: widen the bound by
        # more than that (keeping an extra event is always safe).
        b = dtype.type(within) + 16 * np.spacing(max(float(time_max), float(within)))
        return b, True, dtype.type(-np.inf), dtype.type(np.inf)
    # Integers: t + within and t - within are computed only where they cannot overflow.
    lo, hi = _int_range(dtype)
    return dtype.type(within), True, dtype.type(lo + within), dtype.type(hi - within)


@functools.cache
def _int_range(dtype: np.dtype) -> tuple[int, int]:
    """The dtype's least and greatest values: asked per query and call, and the Arrow type's
    lookup cost 3 us of `bound`'s 4 (50 small queries ask 58 times a call)."""
    return value_range(pa.from_numpy_dtype(dtype))


def rows_may_complete(
    run: np.ndarray,
    time: np.ndarray,
    matched: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    within: int | float | None,
) -> np.ndarray:
    """Indices of the `matched` rows (sorted by run, then time) that have a row entering a start
    state (`starts`) at or before them and one entering an end state (`ends`) at or after them
    in their run, closer than `within` in time (None: any distance). Any automaton's trend runs
    from the one to the other, so for every pattern of the language this keeps every row some
    trend needs: its events' rows, and the negated events' move rows between them."""
    if time.shape[0] == 0:
        return np.zeros(0, np.int64)
    tmax = float(np.max(np.abs(time))) if within is not None and time.dtype.kind == "f" else 0.0
    within, bounded, lowest, highest = bound(tmax, within, time.dtype)
    flo, fhi = reach(run, time, np.flatnonzero(starts), within, bounded, highest)
    idx = ranges(*spans(run, time, flo, fhi, np.flatnonzero(ends), within, bounded, lowest))
    return idx[matched[idx]]


def typed_may_complete(
    codes: np.ndarray,
    pos_of_code: np.ndarray,
    is_start: np.ndarray,
    is_end: np.ndarray,
    order: np.ndarray,
    drop: np.ndarray | None,
    run: np.ndarray,
    time: np.ndarray,
    within: int | float | None,
    held: np.ndarray | None = None,
    held_pos: int = -1,
    by_code: tuple[np.ndarray, np.ndarray] | None = None,
    held_starts: bool = False,
    held_ends: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """`rows_may_complete` of a query whose events are one row each at their type's state (a
    flat SEQ), from the events' type codes in sorted order: (the indices kept, their positions).
    `drop`: per event row (`order` maps sorted indices to rows), whether the query's filters drop
    it (None: no filters). `held`: per row, a shared run's id where the row stands for one
    (`SharedStages.compressed`): such a row is at `held_pos` and is kept; with `held_starts`
    (`held_ends`) it starts (ends) trends at its time, its run's first event's. A start later in
    the run reaches no further: the run lies in one pane of its queries, and a window holding a
    trend from that start begins at a pane's start, so it holds the run's first event too.
    `by_code`: the rows of each type code (`rows_by_code`), which the queries of a
    call share; made here when not given. The starts and ends come from those lists and the
    walks read only the rows they cover, all in one compiled call: on small inputs the NumPy
    steps between them cost more than the rows (bench_small.py), and on large ones a pass
    over every row per query was 45% of the pruning (docs/architecture.md section 4)."""
    if time.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros(0, pos_of_code.dtype)
    tmax = float(np.max(np.abs(time))) if within is not None and time.dtype.kind == "f" else 0.0
    args = bound(tmax, within, time.dtype)
    drop = np.zeros(0, np.bool_) if drop is None else drop
    held = np.zeros(0, np.int64) if held is None else held
    ptr, idx = rows_by_code(codes) if by_code is None else by_code
    return _typed_may_complete(
        codes, pos_of_code, is_start, is_end, ptr, idx, order, drop, held, held_pos, run, time,
        held_starts, held_ends, *args,
    )  # fmt: skip


@njit(cache=True, nogil=True)
def rows_by_code(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of each type code (0 to the largest), ascending: code c's are
    idx[ptr[c]:ptr[c + 1]] (a counting sort)."""
    ncodes = codes.max() + 1 if codes.shape[0] else 0
    ptr = np.zeros(ncodes + 1, np.int64)
    for i in range(codes.shape[0]):
        ptr[codes[i] + 1] += 1
    for c in range(ncodes):
        ptr[c + 1] += ptr[c]
    at = ptr[:-1].copy()
    idx = np.empty(ptr[ncodes], np.int64)
    for i in range(codes.shape[0]):
        c = codes[i]
        idx[at[c]] = i
        at[c] += 1
    return ptr, idx


@njit(cache=True, nogil=True)
def _entering(states, pos_of_code, ptr, idx, order, drop, held):
    """The rows (ascending) of the codes whose position is one of `states`, less those the
    filters drop and those that stand for shared runs."""
    ncodes = min(pos_of_code.shape[0], ptr.shape[0] - 1)
    total = 0
    kinds = 0
    for c in range(ncodes):
        p = pos_of_code[c]
        if p >= 0 and states[p]:
            total += ptr[c + 1] - ptr[c]
            kinds += 1
    out = np.empty(total, np.int64)
    m = 0
    filters = drop.shape[0] > 0
    slots = held.shape[0] > 0
    for c in range(ncodes):
        p = pos_of_code[c]
        if p < 0 or not states[p]:
            continue
        for a in range(ptr[c], ptr[c + 1]):
            i = idx[a]
            out[m] = i
            m += not ((filters and drop[order[i]]) or (slots and held[i] >= 0))
    out = out[:m]
    if kinds > 1:
        out.sort()
    return out


@njit(cache=True, nogil=True)
def _typed_may_complete(
    codes, pos_of_code, is_start, is_end, ptr, idx, order, drop, held, held_pos, run, time,
    held_starts, held_ends, within, bounded, lowest, highest,
):  # fmt: skip
    n = codes.shape[0]
    filters = drop.shape[0] > 0
    slots = held.shape[0] > 0  # some rows stand for shared runs
    starts = _entering(is_start, pos_of_code, ptr, idx, order, drop, held)
    ends = _entering(is_end, pos_of_code, ptr, idx, order, drop, held)
    if slots and (held_starts or held_ends):
        runs = np.flatnonzero(held >= 0)
        if held_starts:
            starts = np.sort(np.concatenate((starts, runs)))
        if held_ends:
            ends = np.sort(np.concatenate((ends, runs)))
    flo, fhi = reach(run, time, starts, within, bounded, highest)
    lo, hi = spans(run, time, flo, fhi, ends, within, bounded, lowest)
    ncodes = pos_of_code.shape[0]
    if slots:  # the events in a span, and every run
        inside = np.zeros(n, np.bool_)
        inside[ranges(lo, hi)] = True
        pos = np.empty(n, pos_of_code.dtype)
        for i in range(n):
            c = codes[i]
            p = pos_of_code[c] if c < ncodes else -1
            if filters and p >= 0 and drop[order[i]]:
                p = -1
            pos[i] = held_pos if held[i] >= 0 else p
        keep = np.flatnonzero((inside & (pos >= 0)) | (held >= 0))
        return keep, pos[keep]
    total = 0
    for s in range(lo.shape[0]):
        total += hi[s] - lo[s]
    keep = np.empty(total, np.int64)  # the spans' matched rows, and their positions
    kept = np.empty(total, pos_of_code.dtype)
    m = 0
    for s in range(lo.shape[0]):
        for j in range(lo[s], hi[s]):
            c = codes[j]
            p = pos_of_code[c] if c < ncodes else -1
            if filters and p >= 0 and drop[order[j]]:
                p = -1
            keep[m] = j
            kept[m] = p
            m += p >= 0
    return keep[:m], kept[:m]


@njit(cache=True, nogil=True)
def rows_in_runs(pid, seg, matched, starts, ends):
    """`rows_may_complete` with no distance bound over the runs of equal (pid, seg): the
    `matched` rows with a start at or before them and an end at or after them in their run
    (whole windows, after segmenting). One pass each way, without a branch on the rows: it
    runs once per query on rows pruned already, where the general walk and the NumPy around it
    cost more than the rows (docs/architecture.md section 4)."""
    n = pid.shape[0]
    keep = np.empty(n, np.bool_)
    seen = False
    for i in range(n):
        first = i == 0 or (pid[i] != pid[i - 1]) | (seg[i] != seg[i - 1])
        seen = (seen & (not first)) | starts[i]
        keep[i] = seen & matched[i]
    seen = False
    m = 0
    for i in range(n - 1, -1, -1):
        last = i == n - 1 or (pid[i] != pid[i + 1]) | (seg[i] != seg[i + 1])
        seen = (seen & (not last)) | ends[i]
        keep[i] = keep[i] & seen
        m += keep[i]
    out = np.empty(m + 1, np.int64)  # every row writes; only a kept one moves on
    m = 0
    for i in range(n):
        out[m] = i
        m += keep[i]
    return out[:m]


@njit(cache=True, nogil=True)
def reach(run, time, starts, within, bounded, highest):
    """Ascending, disjoint [lo, hi) ranges of the slots with a start (of `starts`, ascending) at
    or before them in their run, closer than `within` when `bounded`. Times above `highest`
    reach the end of their run (t + within would overflow). Each start covers its run's slots up
    to `within` after it; a later start reaches at least as far, so the walk resumes where the
    previous one stopped and reads each covered slot once, in order."""
    n = run.shape[0]
    flo = np.empty(starts.shape[0], np.int64)
    fhi = np.empty(starts.shape[0], np.int64)
    nf = 0
    for a in range(starts.shape[0]):
        s = starts[a]
        if nf > 0 and s < fhi[nf - 1]:  # inside the previous start's range: same run
            j = fhi[nf - 1]
        else:
            flo[nf] = s
            j = s + 1
            nf += 1
        r, t = run[s], time[s]
        if not bounded or t > highest:
            while j < n and run[j] == r:
                j += 1
        else:
            end = t + within
            while j < n and run[j] == r and time[j] < end:
                j += 1
        fhi[nf - 1] = j
    return flo[:nf].copy(), fhi[:nf].copy()


@njit(cache=True, nogil=True)
def spans(run, time, flo, fhi, ends, within, bounded, lowest):
    """Ascending [lo, hi) ranges of the slots inside the ranges of `reach` (flo, fhi) with an end
    (of `ends`, ascending; those outside the ranges end no trend) at or after them in their run,
    closer than `within` when `bounded`: the slots that may be in a trend. Times below `lowest`
    reach the
    start of their run (t - within would overflow).

    Each covered end covers the covered slots up to `within` before it; an earlier end reaches
    at least as far back, so the walk resumes below where the previous one stopped: the cost is
    the ends and the slots kept."""
    n = run.shape[0]
    nf = flo.shape[0]
    # Backward, over forward-covered slots only; pieces come out in descending order.
    lo = np.empty(ends.shape[0] + nf, np.int64)
    hi = np.empty(ends.shape[0] + nf, np.int64)
    m = 0
    p = nf - 1
    floor = n  # slots at and above it are decided
    for b in range(ends.shape[0] - 1, -1, -1):
        e = ends[b]
        while p >= 0 and flo[p] > e:
            p -= 1
        if p < 0:
            break
        if e >= fhi[p]:  # no start before it: ends no trend
            continue
        r, t = run[e], time[e]
        far = not bounded or t < lowest
        begin = t if far else t - within
        j = min(e, floor - 1)
        q = p
        while q >= 0 and flo[q] > j:
            q -= 1
        if q < 0 or j >= fhi[q]:  # resumed in a gap below the previous walk
            floor = min(floor, e + 1)
            continue
        top = j + 1
        while j >= 0 and run[j] == r and (far or time[j] > begin):
            if j == flo[q]:  # bottom of this forward range: go on in the one below it
                lo[m], hi[m] = j, top
                m += 1
                q -= 1
                if q < 0:
                    j = -1
                    top = 0
                    break
                j = fhi[q] - 1
                top = j + 1
                continue
            j -= 1
        if top > j + 1:
            lo[m], hi[m] = j + 1, top
            m += 1
        floor = min(floor, j + 1)
    return lo[:m][::-1].copy(), hi[:m][::-1].copy()


@njit(cache=True, nogil=True)
def ranges(lo, hi):
    """The concatenated aranges of [lo, hi) ranges."""
    total = 0
    for i in range(lo.shape[0]):
        total += hi[i] - lo[i]
    out = np.empty(total, np.int64)
    c = 0
    for i in range(lo.shape[0]):
        for j in range(lo[i], hi[i]):
            out[c] = j
            c += 1
    return out

"""numba kernels of the CPU backend: the recursions of gpu_hamlet/core/recursions.py, walked one
run, window or burst after another on the host.

The GPU backend (gpu_hamlet/kernels/) calls the same recursions from one thread per run, window
or burst; only the walks here are the CPU's own (and the two-stack window walk, which shares
products between neighbouring windows where a GPU thread recomputes them).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpu_hamlet.core.adjacency import run_adjacent
from gpu_hamlet.core.compile_cache import cover_core
from gpu_hamlet.core.recursions import (
    copy_map,
    fold_pieces,
    matmul,
    piece_map,
    reduce_run,
    run_segments,
    walk_windows,
    window_finals,
)

cover_core(__file__)  # an edit of gpu_hamlet/core recompiles these kernels


@njit(cache=True, nogil=True)
def segment_maps(
    tag, pid, seg, t, pos, W, MU, K, mseg, pred_ptr, pred_idx, is_start, is_end, move_ptr,
    move_from, move_to, k, full, carry, snap, BM, blk_ptr, blk_idx, BS,
):  # fmt: skip
    """Per (pid, segment) run of events sorted by (pid, time): its map, or its zero-start result.

    Row i is a macro event (a shared burst) when mseg[i] >= 0, with coefficients MU[mseg[i]] and
    K[mseg[i]], and a block macro row (a shared sub-pattern's run) when mseg[i] <= BLOCK,
    with its map in BM (BS: scaled, `Blocks`); `carry` lists the states read as predecessors;
    `snap` receives each macro event's snapshot. Returns (maps [runs, D, D or 1, lanes],
    run_pid, run_seg)."""
    n = pos.shape[0]
    D = W.shape[0] * (k + 1) + 1
    ncols = 1 + carry.shape[0] if full else 1
    lanes = W.shape[2]
    nruns = 0
    for i in range(n):
        if i == 0 or pid[i] != pid[i - 1] or seg[i] != seg[i - 1]:
            nruns += 1
    bounds = np.empty(nruns + 1, np.int64)
    run_pid = np.empty(nruns, np.int64)
    run_seg = np.empty(nruns, np.int64)
    r = 0
    for i in range(n):
        if i == 0 or pid[i] != pid[i - 1] or seg[i] != seg[i - 1]:
            bounds[r] = i
            run_pid[r] = pid[i]
            run_seg[r] = seg[i]
            r += 1
    bounds[nruns] = n
    maps = np.empty((nruns, D, D if full else 1, lanes), snap.dtype)
    X = np.empty((D, ncols, lanes), snap.dtype)
    Dl = np.empty((D, ncols, lanes), snap.dtype)
    Xs = np.empty((D, ncols, lanes), snap.dtype)
    run_segments(
        tag, X, Dl, Xs, bounds, 0, nruns, t, pos, W, MU, K, mseg, pred_ptr, pred_idx, is_start,
        is_end, move_ptr, move_from, move_to, k, full, carry, snap, BM, blk_ptr, blk_idx, BS, maps,
    )  # fmt: skip
    return maps, run_pid, run_seg


@njit(cache=True, nogil=True)
def _walk_partitions(run_pid, run_seg, a, n, lo, hi, flip, win_k, fill):
    """`walk_windows` over every partition in turn; returns the number of windows."""
    R = run_pid.shape[0]
    w = 0
    s0 = 0
    while s0 < R:
        s1 = s0
        while s1 < R and run_pid[s1] == run_pid[s0]:
            s1 += 1
        w += walk_windows(run_seg, s0, s1, a, n, lo, hi, flip, win_k, w, fill)
        s0 = s1
    return w


@njit(cache=True, nogil=True)
def _window_plan(run_pid, run_seg, a, n):
    """Every window's (first run, end run, flip run, index), partition by partition, and the
    longest front stack one holds."""
    none = np.empty(0, np.int64)
    nwin = _walk_partitions(run_pid, run_seg, a, n, none, none, none, none, False)
    lo = np.empty(nwin, np.int64)
    hi = np.empty(nwin, np.int64)
    flip = np.empty(nwin, np.int64)
    win_k = np.empty(nwin, np.int64)
    _walk_partitions(run_pid, run_seg, a, n, lo, hi, flip, win_k, True)
    cap = 1
    for x in range(nwin):
        cap = max(cap, flip[x] - lo[x])
    return lo, hi, flip, win_k, cap


@njit(cache=True, nogil=True)
def compose_windows(tag, maps, run_pid, run_seg, a, n, finals):
    """Window results from segment maps; windows are [k*a, k*a + n) in segment units.

    Each window's map is the product of its non-empty segments' maps (newest on the left) applied
    to the zero state. A two-stack sliding aggregation makes each segment map take part in O(1)
    matrix products, whatever the overlap n / a. Returns (values [windows, finals, lanes],
    window pid, window index)."""
    D = maps.shape[1]
    lanes = maps.shape[3]
    lo, hi, flip, win_k, cap = _window_plan(run_pid, run_seg, a, n)
    nwin = lo.shape[0]
    out = np.empty((nwin, finals.shape[0], lanes), maps.dtype)
    win_pid = np.empty(nwin, np.int64)
    G = np.empty((cap, D, D, lanes), maps.dtype)  # front stack: suffix products, by index % cap
    B = np.empty((D, D, lanes), maps.dtype)  # back: product of the runs pushed since the flip
    T = np.empty((D, D, lanes), maps.dtype)
    front = -1  # the flip point the front stack was built at
    pushed = 0  # the back holds runs [front, pushed)
    for w in range(nwin):
        fe = flip[w]
        if fe != front:
            copy_map(tag, maps[fe - 1], G[(fe - 1) % cap])
            for x in range(fe - 2, lo[w] - 1, -1):
                matmul(tag, G[(x + 1) % cap], maps[x], G[x % cap])
            front = fe
            pushed = fe
        while pushed < hi[w]:
            if pushed == fe:
                copy_map(tag, maps[pushed], B)
            else:
                matmul(tag, maps[pushed], B, T)
                copy_map(tag, T, B)
            pushed += 1
        window_finals(tag, G[lo[w] % cap], B, hi[w] > fe, finals, out, w)
        win_pid[w] = run_pid[lo[w]]
    return out, win_pid, win_k


@njit(cache=True, nogil=True)
def reduce_sorted(tag, vals, starts):
    """Ring sums of the runs of rows of `vals` that begin at `starts` (and end at the next)."""
    ng = starts.shape[0]
    n = vals.shape[0]
    out = np.empty((ng, vals.shape[1], vals.shape[2]), vals.dtype)
    for g in range(ng):
        e = starts[g + 1] if g + 1 < ng else n
        for f in range(vals.shape[1]):
            reduce_run(tag, vals, starts[g], e, f, out, g)
    return out


@njit(cache=True, nogil=True)
def burst_coefficients(tag, t, W, event_bounds, burst_bounds):
    """Graphlet coefficients (MU [bursts, 1, lanes], K [bursts, channels, lanes]) of bursts cut
    into pieces (gpu_hamlet/core/recursions.py `pieces`): every piece's map, then each burst's
    pieces folded in order."""
    npieces = event_bounds.shape[0] - 1
    nseg = burst_bounds.shape[0] - 1
    nch = W.shape[0]
    lanes = W.shape[2]
    G = np.empty((npieces, 1, lanes), W.dtype)
    PMU = np.empty((npieces, 1, lanes), W.dtype)
    PK = np.empty((npieces, nch, lanes), W.dtype)
    A = np.empty((nch, 1, lanes), W.dtype)
    for p in range(npieces):
        piece_map(tag, t, W, event_bounds[p], event_bounds[p + 1], PK, p, A, G, PMU)
    MU = np.empty((nseg, 1, lanes), W.dtype)
    K = np.empty((nseg, nch, lanes), W.dtype)
    for b in range(nseg):
        fold_pieces(tag, G, PMU, PK, burst_bounds[b], burst_bounds[b + 1], MU, K, b)
    return MU, K


@njit(cache=True, nogil=True)
def adjacent_results(
    tag, starts, t, pos, mseg, W, MU, K, pred_ptr, pred_idx, pred_cls, is_start, is_end,
    move_ptr, move_from, move_to, k, tree, toff, tsize, slot, rng, nodes, snap, wburst, wprev,
    doff, wesnap, eptr, goff, eslots,
):  # fmt: skip
    """Per run (a whole window) its result from zero, with predicates between adjacent events
    (gpu_hamlet/core/adjacency.py): (maps [runs, D, 1, lanes], as `segment_maps` without `full`,
    and every row's values [rows, channels, lanes]); macro rows' snapshots go to `snap`."""
    nch = W.shape[0]
    D = nch * (k + 1) + 1
    lanes = W.shape[2]
    runs = starts.shape[0] - 1
    maps = np.empty((runs, D, 1, lanes), snap.dtype)
    T = np.empty((nodes, nch, lanes), snap.dtype)
    V = np.empty((pos.shape[0], nch, lanes), snap.dtype)
    A = np.empty((nch, 1, lanes), snap.dtype)
    ES = np.empty((max(eslots, 1), nch, lanes), snap.dtype)
    no_carry = np.zeros(0, np.int64)
    run_adjacent(
        tag, maps, T, V, A, starts, 0, runs, no_carry, t, pos, mseg, W, MU, K, pred_ptr,
        pred_idx, pred_cls, is_start, is_end, move_ptr, move_from, move_to, k, tree, toff, tsize,
        slot, rng, snap, wburst, wprev, doff, wesnap, eptr, goff, ES,
    )  # fmt: skip
    return maps, V

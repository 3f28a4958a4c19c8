"""numba kernels of the CPU backend, written once over a semiring (gpu_hamlet/core/rings.py).

State layout (docs/architecture.md section 2). A query with k pattern positions and `nch` channels
keeps, per channel, one running sum per position plus the final accumulator, and a constant:
component `ch * (k + 1) + p` is position p of channel ch, `ch * (k + 1) + k` its final value, and
the last component (`D - 1`) the constant 1. Channel 0 counts trends; channel ch > 0 carries a
weighted count (COUNT(E): weight 1 on E events; SUM(E.a): weight a; MIN/MAX: the rank of a).

An event at position p with weights w does, from the state before its timestamp:
    c   = [p is a start] * const + sum of channel-0 sums of the predecessor positions of p
    t   = sum of channel-ch sums of the predecessors + w[ch] * c           (ch > 0)
    then position p of each channel grows by c (or t), and so does the final value if p is an end.
Events with equal timestamps all read the state from before that timestamp.

A *segment* (a pane, or a whole tumbling window) is processed from the zero state (its own result,
when a window is a single segment) or, with `full`, into its whole affine map (D x D, so segments
compose into windows).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpu_hamlet.core.rings import r_add, r_is_zero, r_load, r_mul, r_one, r_store, r_zero


@njit(cache=True)
def _apply_event(
    tag, X, Dst, i, p, W, MU, K, mseg, pred_ptr, pred_idx, is_start, is_end, nch, k, ncols, snap
):
    # Reads X, adds into Dst (which may be X itself for a lone event: every channel reads its own
    # predecessors before writing, and channel 0, which the others read through c, is written last).
    # A macro event (a shared burst, gpu_hamlet/engine/sharing.py; mseg[i] >= 0 names its
    # coefficients)
    # adds MU*c and MU*z + K*c instead of c and z + W*c; its c, the burst's snapshot, is recorded
    # in `snap` (column 0).
    stride = k + 1
    cst = X.shape[0] - 1
    m = mseg[i]
    is_macro = m >= 0
    for col in range(ncols):
        if is_start[p]:
            c = r_load(tag, X, cst, col)
        else:
            c = r_zero(tag)
        for qi in range(pred_ptr[p], pred_ptr[p + 1]):
            c = r_add(tag, c, r_load(tag, X, pred_idx[qi], col))
        if is_macro and col == 0:
            r_store(tag, snap, i, 0, c)
        cz = r_is_zero(tag, c)
        for ch in range(1, nch):
            base = ch * stride
            t = r_zero(tag)
            for qi in range(pred_ptr[p], pred_ptr[p + 1]):
                t = r_add(tag, t, r_load(tag, X, base + pred_idx[qi], col))
            if is_macro:
                t = r_mul(tag, r_load(tag, MU, m, 0), t)
                if not cz:
                    t = r_add(tag, t, r_mul(tag, r_load(tag, K, m, ch), c))
            elif not cz:
                t = r_add(tag, t, r_mul(tag, r_load(tag, W, ch, i), c))
            if not r_is_zero(tag, t):
                r_store(tag, Dst, base + p, col, r_add(tag, r_load(tag, Dst, base + p, col), t))
                if is_end[p]:
                    r_store(tag, Dst, base + k, col, r_add(tag, r_load(tag, Dst, base + k, col), t))
        if not cz:
            if is_macro:
                c = r_mul(tag, r_load(tag, MU, m, 0), c)
            r_store(tag, Dst, p, col, r_add(tag, r_load(tag, Dst, p, col), c))
            if is_end[p]:
                r_store(tag, Dst, k, col, r_add(tag, r_load(tag, Dst, k, col), c))


@njit(cache=True)
def _reset(tag, X, carry):
    # Column 0 starts from the zero state (constant 1); column 1 + j from the unit input at
    # channel-0 position carry[j] (the positions some event reads as a predecessor).
    D = X.shape[0]
    for a in range(D):
        for b in range(X.shape[1]):
            r_store(tag, X, a, b, r_zero(tag))
    r_store(tag, X, D - 1, 0, r_one(tag))
    for j in range(X.shape[1] - 1):
        r_store(tag, X, carry[j], j + 1, r_one(tag))


@njit(cache=True)
def _full_map(tag, X, carry, nch, k, M):
    """The segment's D x D map from the columns computed for the constant and carried positions.

    A weighted channel's response to its own input is the count channel's response to the count
    input (the same recursion, with no weight term since c is zero there), so those blocks are
    copied; inputs nobody reads (finals, positions that are no predecessor) map to themselves."""
    D = M.shape[0]
    stride = k + 1
    for a in range(D):
        for b in range(D):
            r_store(tag, M, a, b, r_zero(tag))
        r_store(tag, M, a, a, r_one(tag))
    for a in range(D):
        r_store(tag, M, a, D - 1, r_load(tag, X, a, 0))
    for j in range(carry.shape[0]):
        q = carry[j]
        for a in range(D - 1):
            r_store(tag, M, a, q, r_load(tag, X, a, j + 1))
        for ch in range(1, nch):
            for r in range(stride):
                r_store(tag, M, ch * stride + r, ch * stride + q, r_load(tag, X, r, j + 1))


@njit(cache=True)
def segment_maps(
    tag,
    pid,
    seg,
    t,
    pos,
    W,
    MU,
    K,
    mseg,
    pred_ptr,
    pred_idx,
    is_start,
    is_end,
    k,
    full,
    carry,
    snap,
):
    """Per (pid, segment) run of events sorted by (pid, time): its map, or its zero-start result.

    Row i is a macro event (a shared burst) when mseg[i] >= 0, with coefficients MU[mseg[i]] and
    K[mseg[i]]; `carry` lists the positions read as predecessors; `snap` receives each macro
    event's snapshot. Returns (maps [runs, D, D or 1, lanes], run_pid, run_seg)."""
    proto = snap
    n = pos.shape[0]
    nch = W.shape[0]
    D = nch * (k + 1) + 1
    ncols = 1 + carry.shape[0] if full else 1
    lanes = W.shape[2]
    nruns = 0
    for i in range(n):
        if i == 0 or pid[i] != pid[i - 1] or seg[i] != seg[i - 1]:
            nruns += 1
    maps = np.empty((nruns, D, D if full else 1, lanes), proto.dtype)
    run_pid = np.empty(nruns, np.int64)
    run_seg = np.empty(nruns, np.int64)
    X = np.empty((D, ncols, lanes), proto.dtype)
    Dl = np.empty((D, ncols, lanes), proto.dtype)
    r = -1
    i = 0
    while i < n:
        if i == 0 or pid[i] != pid[i - 1] or seg[i] != seg[i - 1]:
            if r >= 0:
                if full:
                    _full_map(tag, X, carry, nch, k, maps[r])
                else:
                    maps[r] = X
            r += 1
            run_pid[r] = pid[i]
            run_seg[r] = seg[i]
            _reset(tag, X, carry)
        j = i + 1
        while j < n and pid[j] == pid[i] and seg[j] == seg[i] and t[j] == t[i]:
            j += 1
        if j == i + 1:
            _apply_event(
                tag,
                X,
                X,
                i,
                pos[i],
                W,
                MU,
                K,
                mseg,
                pred_ptr,
                pred_idx,
                is_start,
                is_end,
                nch,
                k,
                ncols,
                snap,
            )
        else:
            for a in range(D):
                for b in range(ncols):
                    r_store(tag, Dl, a, b, r_zero(tag))
            for e in range(i, j):
                _apply_event(
                    tag,
                    X,
                    Dl,
                    e,
                    pos[e],
                    W,
                    MU,
                    K,
                    mseg,
                    pred_ptr,
                    pred_idx,
                    is_start,
                    is_end,
                    nch,
                    k,
                    ncols,
                    snap,
                )
            for a in range(D - 1):
                for b in range(ncols):
                    d = r_load(tag, Dl, a, b)
                    if not r_is_zero(tag, d):
                        r_store(tag, X, a, b, r_add(tag, r_load(tag, X, a, b), d))
        i = j
    if r >= 0:
        if full:
            _full_map(tag, X, carry, nch, k, maps[r])
        else:
            maps[r] = X
    return maps, run_pid, run_seg


@njit(cache=True)
def _matmul(tag, A, B, C):
    # C = A @ B over the ring (C must not alias A or B); zero entries are skipped (maps are sparse).
    D = A.shape[0]
    for i in range(D):
        for j in range(D):
            r_store(tag, C, i, j, r_zero(tag))
    for i in range(D):
        for m in range(D):
            a = r_load(tag, A, i, m)
            if r_is_zero(tag, a):
                continue
            for j in range(D):
                b = r_load(tag, B, m, j)
                if not r_is_zero(tag, b):
                    r_store(tag, C, i, j, r_add(tag, r_load(tag, C, i, j), r_mul(tag, a, b)))


@njit(cache=True)
def _window_count(run_pid, run_seg, a, n):
    """Number of windows holding at least one segment, and the most segments one window holds."""
    R = run_pid.shape[0]
    nwin = 0
    cap = 1
    s0 = 0
    while s0 < R:
        s1 = s0
        while s1 < R and run_pid[s1] == run_pid[s0]:
            s1 += 1
        kk = (run_seg[s0] - n + a) // a  # first window holding the segment: ceil((s - n + 1) / a)
        lo = s0
        hi = s0
        while True:
            while hi < s1 and run_seg[hi] < kk * a + n:
                hi += 1
            while lo < hi and run_seg[lo] < kk * a:
                lo += 1
            if lo < hi:
                nwin += 1
                cap = max(cap, hi - lo)
                kk += 1
            else:
                if hi == s1:
                    break
                kk = max(kk + 1, (run_seg[hi] - n + a) // a)
        s0 = s1
    return nwin, cap


@njit(cache=True)
def compose_windows(tag, maps, run_pid, run_seg, a, n, finals):
    """Window results from segment maps; windows are [k*a, k*a + n) in segment units.

    Each window's map is the product of its non-empty segments' maps (newest on the left) applied
    to the zero state. A two-stack sliding aggregation makes each segment map take part in O(1)
    matrix products, whatever the overlap n / a. Returns (values [windows, finals, lanes],
    window pid, window index)."""
    R = maps.shape[0]
    D = maps.shape[1]
    lanes = maps.shape[3]
    cst = D - 1
    nf = finals.shape[0]
    nwin, cap = _window_count(run_pid, run_seg, a, n)
    out = np.empty((nwin, nf, lanes), maps.dtype)
    win_pid = np.empty(nwin, np.int64)
    win_k = np.empty(nwin, np.int64)
    G = np.empty((cap, D, D, lanes), maps.dtype)  # front stack: suffix products, by index % cap
    B = np.empty((D, D, lanes), maps.dtype)  # back: product of the segments pushed since the flip
    T = np.empty((D, D, lanes), maps.dtype)
    v = np.empty((D, 1, lanes), maps.dtype)
    w = 0
    s0 = 0
    while s0 < R:
        s1 = s0
        while s1 < R and run_pid[s1] == run_pid[s0]:
            s1 += 1
        kk = (run_seg[s0] - n + a) // a
        lo = s0
        hi = s0
        flip_end = s0  # the front stack holds [lo, flip_end), the back [flip_end, hi)
        back_empty = True
        while True:
            while hi < s1 and run_seg[hi] < kk * a + n:
                if back_empty:
                    B[:] = maps[hi]
                    back_empty = False
                else:
                    _matmul(tag, maps[hi], B, T)
                    B[:] = T
                hi += 1
            while lo < hi and run_seg[lo] < kk * a:
                lo += 1
            if lo < hi:
                if lo >= flip_end:
                    G[(hi - 1) % cap] = maps[hi - 1]
                    for x in range(hi - 2, lo - 1, -1):
                        _matmul(tag, G[(x + 1) % cap], maps[x], G[x % cap])
                    flip_end = hi
                    back_empty = True
                g = G[lo % cap]
                for c in range(D):
                    r_store(tag, v, c, 0, r_load(tag, g, c, cst))
                for f in range(nf):
                    row = finals[f]
                    if back_empty:
                        val = r_load(tag, v, row, 0)
                    else:
                        val = r_zero(tag)
                        for m in range(D):
                            bm = r_load(tag, B, row, m)
                            if not r_is_zero(tag, bm):
                                val = r_add(tag, val, r_mul(tag, bm, r_load(tag, v, m, 0)))
                    r_store(tag, out, w, f, val)
                win_pid[w] = run_pid[s0]
                win_k[w] = kk
                w += 1
                kk += 1
            else:
                if hi == s1:
                    break
                kk = max(kk + 1, (run_seg[hi] - n + a) // a)
        s0 = s1
    return out, win_pid, win_k


@njit(cache=True)
def reduce_sorted(tag, vals, starts):
    """Ring sums of the runs of rows of `vals` that begin at `starts` (and end at the next)."""
    ng = starts.shape[0]
    n = vals.shape[0]
    nf = vals.shape[1]
    out = np.empty((ng, nf, vals.shape[2]), vals.dtype)
    for g in range(ng):
        e = starts[g + 1] if g + 1 < ng else n
        for f in range(nf):
            acc = r_load(tag, vals, starts[g], f)
            for i in range(starts[g] + 1, e):
                acc = r_add(tag, acc, r_load(tag, vals, i, f))
            r_store(tag, out, g, f, acc)
    return out


#: Timestamp groups per piece of a burst. A burst's coefficients are a product of one linear map
#: per timestamp group (see `burst_coefficients`); the GPU backend computes the maps of all
#: pieces of all bursts in parallel, then folds each burst's pieces in order, so a long burst is
#: not one thread's sequential work. This backend folds the same pieces the same way, so the two
#: agree bit for bit.
PIECE_GROUPS = 64


@njit(cache=True)
def burst_coefficients(tag, seg_id, t, W, nseg, piece_groups):
    """Graphlet coefficients of bursts: for each burst (events sorted, `seg_id` ascending), the
    count multiplier MU and per-channel weights K of its macro event.

    Over the burst's timestamp groups j with m_j events and weight sums A_j (per channel):
    g_0 = 1, g_{j+1} = g_j (1 + m_j); MU = sum m_j g_j; K_0 = 0, K_{j+1} = K_j (1 + m_j) + A_j g_j.
    Then a burst with snapshot y = c (start + predecessor sums) and channel snapshot z adds MU*y
    to the count and MU*z + K*y to each channel: every event's count is y times a prefix product
    (HAMLET's graphlet propagation), computed once however many queries share it.

    Each step maps (g, MU, K) linearly, so consecutive groups compose into one map (g, MU, K)
    from (1, 0, 0): a piece of `piece_groups` groups is computed alone (`_piece`), and a piece
    (g2, MU2, K2) after the pieces before it (g1, MU1, K1) gives (g1 g2, MU1 + g1 MU2,
    g2 K1 + g1 K2)."""
    n = seg_id.shape[0]
    nch = W.shape[0]
    lanes = W.shape[2]
    MU = np.empty((nseg, 1, lanes), W.dtype)
    K = np.empty((nseg, nch, lanes), W.dtype)
    A = np.empty((nch, 1, lanes), W.dtype)
    Kp = np.empty((1, nch, lanes), W.dtype)
    i = 0
    while i < n:
        b = seg_id[i]
        j, g, mu = _piece(tag, seg_id, t, W, i, piece_groups, K, b, A)
        while j < n and seg_id[j] == b:  # fold the burst's further pieces in
            j, g2, mu2 = _piece(tag, seg_id, t, W, j, piece_groups, Kp, 0, A)
            mu = r_add(tag, mu, r_mul(tag, g, mu2))
            for ch in range(nch):
                r_store(
                    tag,
                    K,
                    b,
                    ch,
                    r_add(
                        tag,
                        r_mul(tag, g2, r_load(tag, K, b, ch)),
                        r_mul(tag, g, r_load(tag, Kp, 0, ch)),
                    ),
                )
            g = r_mul(tag, g, g2)
        r_store(tag, MU, b, 0, mu)
        i = j
    return MU, K


@njit(cache=True)
def _piece(tag, seg_id, t, W, i, piece_groups, K, row, A):
    """The map (g, MU, K[row]) of the timestamp groups of burst seg_id[i] from event i on, at most
    `piece_groups` of them; returns (the event after them, g, MU)."""
    n = seg_id.shape[0]
    nch = W.shape[0]
    b = seg_id[i]
    g = r_one(tag)
    mu = r_zero(tag)
    for ch in range(nch):
        r_store(tag, K, row, ch, r_zero(tag))
    groups = 0
    while i < n and seg_id[i] == b and groups < piece_groups:
        j = i
        m = r_zero(tag)
        for ch in range(nch):
            r_store(tag, A, ch, 0, r_zero(tag))
        while j < n and seg_id[j] == b and t[j] == t[i]:
            m = r_add(tag, m, r_one(tag))
            for ch in range(nch):
                r_store(tag, A, ch, 0, r_add(tag, r_load(tag, A, ch, 0), r_load(tag, W, ch, j)))
            j += 1
        one_m = r_add(tag, r_one(tag), m)
        for ch in range(nch):
            kk = r_mul(tag, r_load(tag, K, row, ch), one_m)
            r_store(tag, K, row, ch, r_add(tag, kk, r_mul(tag, r_load(tag, A, ch, 0), g)))
        mu = r_add(tag, mu, r_mul(tag, m, g))
        g = r_mul(tag, g, one_m)
        groups += 1
        i = j
    return i, g, mu

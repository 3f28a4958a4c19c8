"""numba kernels of the CPU backend, written once over a semiring (cpu_fallback/rings.py).

State layout (DESIGN.md section 3). A query with k pattern positions and `nch` channels keeps, per
channel, one running sum per position plus the final accumulator, and a constant:
component `ch * (k + 1) + p` is position p of channel ch, `ch * (k + 1) + k` its final value, and
the last component (`D - 1`) the constant 1. Channel 0 counts trends; channel ch > 0 carries a
weighted count (COUNT(E): weight 1 on E events; SUM(E.a): weight a; MIN/MAX: the rank of a).

An event at position p with weights w does, from the state before its timestamp:
    c   = [p is a start] * const + sum of channel-0 sums of the predecessor positions of p
    t   = sum of channel-ch sums of the predecessors + w[ch] * c           (ch > 0)
    then position p of each channel grows by c (or t), and so does the final value if p is an end.
Events with equal timestamps all read the state from before that timestamp.

A *segment* (a pane, or a whole tumbling window) is processed from the identity (`full`: the
segment's whole affine map, D x D, so segments can be composed into windows) or from the zero state
(only the segment's own result, when a window is a single segment).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

from cpu_fallback.rings import RINGS, Ring


@lru_cache(maxsize=None)
def segment_kernel(ring_name: str):
    """Compile the segment-map kernel for one ring (once per process)."""
    R: Ring = RINGS[ring_name]
    load, store, add, mul, zero, one, is_zero = (
        R.load, R.store, R.add, R.mul, R.zero, R.one, R.is_zero)
    dtype, lanes = R.dtype, R.lanes

    @njit(inline="always")
    def apply_event(X, Dst, i, p, W, pred_ptr, pred_idx, is_start, is_end, nch, k, ncols, cst,
                    rp):
        # Reads X, adds into Dst (which may be X itself for a lone event: every channel reads its
        # own predecessors before writing, and channel 0 is written last).
        stride = k + 1
        for col in range(ncols):
            if is_start[p]:
                c = load(X, cst, col)
            else:
                c = zero()
            for qi in range(pred_ptr[p], pred_ptr[p + 1]):
                c = add(c, load(X, pred_idx[qi], col), rp)
            if is_zero(c):
                cz = True
            else:
                cz = False
            for ch in range(1, nch):
                base = ch * stride
                t = zero()
                for qi in range(pred_ptr[p], pred_ptr[p + 1]):
                    t = add(t, load(X, base + pred_idx[qi], col), rp)
                if not cz:
                    t = add(t, mul(load(W, ch, i), c, rp), rp)
                if not is_zero(t):
                    store(Dst, base + p, col, add(load(Dst, base + p, col), t, rp))
                    if is_end[p]:
                        store(Dst, base + k, col, add(load(Dst, base + k, col), t, rp))
            if not cz:
                store(Dst, p, col, add(load(Dst, p, col), c, rp))
                if is_end[p]:
                    store(Dst, k, col, add(load(Dst, k, col), c, rp))

    @njit(inline="always")
    def reset(X, full, D):
        for a in range(X.shape[0]):
            for b in range(X.shape[1]):
                store(X, a, b, zero())
        if full:
            for a in range(D):
                store(X, a, a, one())
        else:
            store(X, D - 1, 0, one())

    @njit(cache=False)
    def segment_maps(pid, seg, t, pos, W, pred_ptr, pred_idx, is_start, is_end, nch, k, full,
                     rp):
        n = pos.shape[0]
        D = nch * (k + 1) + 1
        cst = D - 1
        ncols = D if full else 1
        nruns = 0
        for i in range(n):
            if i == 0 or pid[i] != pid[i - 1] or seg[i] != seg[i - 1]:
                nruns += 1
        maps = np.empty((nruns, D, ncols, lanes), dtype)
        run_pid = np.empty(nruns, np.int64)
        run_seg = np.empty(nruns, np.int64)
        X = np.empty((D, ncols, lanes), dtype)
        Dl = np.empty((D, ncols, lanes), dtype)
        r = -1
        i = 0
        while i < n:
            if i == 0 or pid[i] != pid[i - 1] or seg[i] != seg[i - 1]:
                if r >= 0:
                    maps[r] = X
                r += 1
                run_pid[r] = pid[i]
                run_seg[r] = seg[i]
                reset(X, full, D)
            j = i + 1
            while j < n and pid[j] == pid[i] and seg[j] == seg[i] and t[j] == t[i]:
                j += 1
            if j == i + 1:
                apply_event(X, X, i, pos[i], W, pred_ptr, pred_idx, is_start, is_end, nch, k,
                            ncols, cst, rp)
            else:
                for a in range(D):
                    for b in range(ncols):
                        store(Dl, a, b, zero())
                for e in range(i, j):
                    apply_event(X, Dl, e, pos[e], W, pred_ptr, pred_idx, is_start, is_end, nch,
                                k, ncols, cst, rp)
                for a in range(D - 1):
                    for b in range(ncols):
                        d = load(Dl, a, b)
                        if not is_zero(d):
                            store(X, a, b, add(load(X, a, b), d, rp))
            i = j
        if r >= 0:
            maps[r] = X
        return maps, run_pid, run_seg

    return segment_maps


@lru_cache(maxsize=None)
def compose_kernel(ring_name: str):
    """Compile the window-composition kernel for one ring.

    Windows are [k*a, k*a + n) in segment units. Each window's map is the product of the maps of
    its non-empty segments (newest on the left), evaluated on the zero state, with a two-stack
    sliding aggregation so that each segment map takes part in O(1) matrix products, whatever
    the overlap n / a.
    """
    R: Ring = RINGS[ring_name]
    load, store, add, mul, zero, one, is_zero = (
        R.load, R.store, R.add, R.mul, R.zero, R.one, R.is_zero)
    dtype, lanes = R.dtype, R.lanes

    @njit(inline="always")
    def matmul(A, B, C, rp):
        # C = A @ B over the ring (C must not alias A or B).
        D = A.shape[0]
        for i in range(D):
            for j in range(D):
                store(C, i, j, zero())
        for i in range(D):
            for m in range(D):
                a = load(A, i, m)
                if is_zero(a):
                    continue
                for j in range(D):
                    b = load(B, m, j)
                    if not is_zero(b):
                        store(C, i, j, add(load(C, i, j), mul(a, b, rp), rp))

    @njit(cache=False)
    def compose(maps, run_pid, run_seg, a, n, finals, rp):
        R_ = maps.shape[0]
        D = maps.shape[1]
        cst = D - 1
        nf = finals.shape[0]
        # Pass 1: count windows, and the largest number of segments of one pid in one window.
        nwin = 0
        cap = 1
        s0 = 0
        while s0 < R_:
            s1 = s0
            while s1 < R_ and run_pid[s1] == run_pid[s0]:
                s1 += 1
            kk = (run_seg[s0] - n + a) // a  # ceil((seg - n + 1) / a)
            lo = s0
            hi = s0
            while True:
                while hi < s1 and run_seg[hi] < kk * a + n:
                    hi += 1
                while lo < hi and run_seg[lo] < kk * a:
                    lo += 1
                if lo < hi:
                    nwin += 1
                    if hi - lo > cap:
                        cap = hi - lo
                    kk += 1
                else:
                    if hi == s1:
                        break
                    nxt = (run_seg[hi] - n + a) // a
                    kk = max(kk + 1, nxt)
            s0 = s1
        out = np.empty((nwin, nf, lanes), dtype)
        win_pid = np.empty(nwin, np.int64)
        win_k = np.empty(nwin, np.int64)
        G = np.empty((cap, D, D, lanes), dtype)
        B = np.empty((D, D, lanes), dtype)
        T = np.empty((D, D, lanes), dtype)
        v = np.empty((D, 1, lanes), dtype)
        u = np.empty((D, 1, lanes), dtype)
        w = 0
        s0 = 0
        while s0 < R_:
            s1 = s0
            while s1 < R_ and run_pid[s1] == run_pid[s0]:
                s1 += 1
            kk = (run_seg[s0] - n + a) // a
            lo = s0
            hi = s0
            flip_end = s0  # front stack holds [lo, flip_end); back holds [flip_end, hi)
            back_empty = True
            while True:
                while hi < s1 and run_seg[hi] < kk * a + n:
                    if back_empty:
                        B[:] = maps[hi]
                        back_empty = False
                    else:
                        matmul(maps[hi], B, T, rp)
                        B[:] = T
                    hi += 1
                while lo < hi and run_seg[lo] < kk * a:
                    lo += 1
                if lo < hi:
                    if lo >= flip_end:
                        # Flip: suffix products of [lo, hi) into the front stack.
                        G[(hi - 1) % cap] = maps[hi - 1]
                        for x in range(hi - 2, lo - 1, -1):
                            matmul(G[(x + 1) % cap], maps[x], G[x % cap], rp)
                        flip_end = hi
                        back_empty = True
                    g = G[lo % cap]
                    for c in range(D):
                        store(v, c, 0, load(g, c, cst))
                    if not back_empty:
                        for c in range(D):
                            acc = zero()
                            for m in range(D):
                                bm = load(B, c, m)
                                if not is_zero(bm):
                                    acc = add(acc, mul(bm, load(v, m, 0), rp), rp)
                            store(u, c, 0, acc)
                        res = u
                    else:
                        res = v
                    for f in range(nf):
                        for ln in range(lanes):
                            out[w, f, ln] = res[finals[f], 0, ln]
                    win_pid[w] = run_pid[s0]
                    win_k[w] = kk
                    w += 1
                    kk += 1
                else:
                    if hi == s1:
                        break
                    nxt = (run_seg[hi] - n + a) // a
                    kk = max(kk + 1, nxt)
            s0 = s1
        return out, win_pid, win_k

    return compose


@lru_cache(maxsize=None)
def reduce_kernel(ring_name: str):
    """Compile a kernel adding up ring values of equal consecutive keys (sorted input)."""
    R: Ring = RINGS[ring_name]
    add, load, store = R.add, R.load, R.store
    dtype, lanes = R.dtype, R.lanes

    @njit(cache=False)
    def reduce_sorted(vals, starts, rp):
        ng = starts.shape[0]
        n = vals.shape[0]
        nf = vals.shape[1]
        out = np.empty((ng, nf, lanes), dtype)
        for g in range(ng):
            e = starts[g + 1] if g + 1 < ng else n
            for f in range(nf):
                acc = load(vals, starts[g], f)
                for i in range(starts[g] + 1, e):
                    acc = add(acc, load(vals, i, f), rp)
                store(out, g, f, acc)
        return out

    return reduce_sorted

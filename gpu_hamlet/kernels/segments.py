"""Segment maps on the device: one thread per (partition, segment) run, all runs in one launch,
runs of several queries (of one shape: ring, channels, pattern length, columns) included.

The same recursion as cpu_fallback/kernels.py `segment_maps` (the state layout is explained
there), in the same operation order, so results are bit-identical to the CPU backend. Events of
a run depend on each other in time order, so a run is sequential inside its thread; runs are
independent. Per-thread scratch (the state X and the delta of an equal-timestamp group) lives in
a global workspace [runs, 2, D, columns, lanes] that the caller sizes to its chunk of runs.
"""

from __future__ import annotations

import functools

from numba import cuda

from gpu_hamlet.kernels.rings import device, device_ring


@functools.cache
def segment_kernel(ring: str):
    """The segment-map kernel of `ring`: kernel[grid, block](starts, qid, t, pos, W, MU, K, mseg,
    pred_ptr, pred_idx, is_start, is_end, k, full, carry, snap, maps, work, prm). Run r belongs to
    query qid[r], whose template is row qid[r] of pred_ptr, pred_idx, is_start, is_end, carry."""
    R = device_ring(ring)
    zero, one, add, mul, is_zero, load, store = R

    @device
    def apply_event(
        X, Dst, i, p, W, MU, K, mseg, pred_ptr, pred_idx, is_start, is_end, nch, k, ncols, snap, prm
    ):
        stride = k + 1
        cst = X.shape[0] - 1
        m = mseg[i]
        is_macro = m >= 0
        for col in range(ncols):
            if is_start[p]:
                c = load(X, cst, col)
            else:
                c = zero()
            for qi in range(pred_ptr[p], pred_ptr[p + 1]):
                c = add(c, load(X, pred_idx[qi], col), prm)
            if is_macro and col == 0:
                store(snap, i, 0, c)
            cz = is_zero(c)
            for ch in range(1, nch):
                base = ch * stride
                t = zero()
                for qi in range(pred_ptr[p], pred_ptr[p + 1]):
                    t = add(t, load(X, base + pred_idx[qi], col), prm)
                if is_macro:
                    t = mul(load(MU, m, 0), t, prm)
                    if not cz:
                        t = add(t, mul(load(K, m, ch), c, prm), prm)
                elif not cz:
                    t = add(t, mul(load(W, ch, i), c, prm), prm)
                if not is_zero(t):
                    store(Dst, base + p, col, add(load(Dst, base + p, col), t, prm))
                    if is_end[p]:
                        store(Dst, base + k, col, add(load(Dst, base + k, col), t, prm))
            if not cz:
                if is_macro:
                    c = mul(load(MU, m, 0), c, prm)
                store(Dst, p, col, add(load(Dst, p, col), c, prm))
                if is_end[p]:
                    store(Dst, k, col, add(load(Dst, k, col), c, prm))

    @device
    def clear(X, rows, cols):
        for a in range(rows):
            for b in range(cols):
                store(X, a, b, zero())

    @device
    def reset(X, carry):
        D = X.shape[0]
        clear(X, D, X.shape[1])
        store(X, D - 1, 0, one())
        for j in range(X.shape[1] - 1):
            store(X, carry[j], j + 1, one())

    @device
    def full_map(X, carry, nch, k, M):
        D = M.shape[0]
        stride = k + 1
        clear(M, D, D)
        for a in range(D):
            store(M, a, a, one())
        for a in range(D):
            store(M, a, D - 1, load(X, a, 0))
        for j in range(carry.shape[0]):
            q = carry[j]
            for a in range(D - 1):
                store(M, a, q, load(X, a, j + 1))
            for ch in range(1, nch):
                for r in range(stride):
                    store(M, ch * stride + r, ch * stride + q, load(X, r, j + 1))

    @cuda.jit
    def kernel(
        starts,
        qid,
        t,
        pos,
        W,
        MU,
        K,
        mseg,
        pred_ptrs,
        pred_idxs,
        is_starts,
        is_ends,
        k,
        full,
        carries,
        snap,
        maps,
        work,
        prm,
    ):
        r = cuda.grid(1)
        if r >= starts.shape[0] - 1:
            return
        q = qid[r]
        pred_ptr, pred_idx, carry = pred_ptrs[q], pred_idxs[q], carries[q]
        is_start, is_end = is_starts[q], is_ends[q]
        X = work[r, 0]
        Dl = work[r, 1]
        nch = W.shape[0]
        D = X.shape[0]
        ncols = X.shape[1]
        reset(X, carry)
        i = starts[r]
        end = starts[r + 1]
        while i < end:
            j = i + 1
            while j < end and t[j] == t[i]:
                j += 1
            if j == i + 1:
                apply_event(
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
                    prm,
                )
            else:
                clear(Dl, D, ncols)
                for e in range(i, j):
                    apply_event(
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
                        prm,
                    )
                for a in range(D - 1):
                    for b in range(ncols):
                        d = load(Dl, a, b)
                        if not is_zero(d):
                            store(X, a, b, add(load(X, a, b), d, prm))
            i = j
        if full:
            full_map(X, carry, nch, k, maps[r])
        else:
            for a in range(D):
                store(maps[r], a, 0, load(X, a, 0))

    return kernel

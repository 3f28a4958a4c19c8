"""Window composition on the device: a window plan per partition, then one thread per window.

The CPU backend (cpu_fallback/kernels.py `compose_windows`) walks each partition's windows with a
two-stack sliding aggregation: a *front* stack of suffix products built at each flip, and a *back*
product of the segments pushed since. Each window's value is back x front[lo] applied to the zero
state. Here the walk runs first (one thread per partition, no matrix work) and records, per
window, its first and end segment and the flip point that window sees; then one thread per window
rebuilds its two products in the CPU's exact multiplication order, so results are bit-identical.
A thread redoes the products its window shares with its neighbours (about n/a matrix products per
window instead of O(1) amortised) in exchange for parallelism over all windows and O(D^2)
scratch per thread.
"""

from __future__ import annotations

import functools

from numba import cuda

from gpu_hamlet.kernels.rings import device, device_ring


@device
def _walk(run_seg, s0, s1, a, n, lo_out, hi_out, flip_out, k_out, w0, fill):
    """Windows [k*a, k*a + n) holding runs s0..s1-1 of one partition, in order; with `fill`,
    written from w0 on. Returns how many there are."""
    kk = (run_seg[s0] - n + a) // a  # first window holding the segment: ceil((s - n + 1) / a)
    lo = s0
    hi = s0
    flip_end = s0
    w = 0
    while True:
        while hi < s1 and run_seg[hi] < kk * a + n:
            hi += 1
        while lo < hi and run_seg[lo] < kk * a:
            lo += 1
        if lo < hi:
            if lo >= flip_end:
                flip_end = hi
            if fill:
                lo_out[w0 + w] = lo
                hi_out[w0 + w] = hi
                flip_out[w0 + w] = flip_end
                k_out[w0 + w] = kk
            w += 1
            kk += 1
        else:
            if hi == s1:
                break
            nk = (run_seg[hi] - n + a) // a  # (max() of ints does not compile for CUDA)
            kk = nk if nk > kk + 1 else kk + 1
    return w


@cuda.jit
def plan_kernel(part_starts, run_seg, a, n, offsets, lo_out, hi_out, flip_out, k_out, fill):
    """Per partition: its window count (fill False, into offsets[p + 1]) or its windows' plan
    (fill True, from offsets[p])."""
    p = cuda.grid(1)
    if p >= part_starts.shape[0] - 1:
        return
    w = _walk(
        run_seg,
        part_starts[p],
        part_starts[p + 1],
        a,
        n,
        lo_out,
        hi_out,
        flip_out,
        k_out,
        offsets[p],
        fill,
    )
    if not fill:
        offsets[p + 1] = w


@functools.cache
def compose_kernel(ring: str):
    """The window kernel of `ring`: kernel[grid, block](maps, lo, hi, flip, finals, out, work,
    prm); `work` is [windows, 3, D, D, lanes] scratch."""
    zero, one, add, mul, is_zero, load, store = device_ring(ring)

    @device
    def matmul(A, B, C, prm):
        # C = A @ B over the ring, skipping zero entries, in the CPU's order.
        D = A.shape[0]
        for i in range(D):
            for j in range(D):
                store(C, i, j, zero())
        for i in range(D):
            for m in range(D):
                x = load(A, i, m)
                if is_zero(x):
                    continue
                for j in range(D):
                    y = load(B, m, j)
                    if not is_zero(y):
                        store(C, i, j, add(load(C, i, j), mul(x, y, prm), prm))

    @device
    def copy(src, dst):
        D = src.shape[0]
        for i in range(D):
            for j in range(D):
                store(dst, i, j, load(src, i, j))

    @cuda.jit
    def kernel(maps, lo, hi, flip, finals, out, work, prm):
        w = cuda.grid(1)
        if w >= lo.shape[0]:
            return
        D = maps.shape[1]
        cst = D - 1
        G = work[w, 0]
        B = work[w, 1]
        T = work[w, 2]
        fe = flip[w]
        # front: maps[fe-1] @ maps[fe-2] @ ... @ maps[lo], multiplied left to right
        copy(maps[fe - 1], G)
        for x in range(fe - 2, lo[w] - 1, -1):
            matmul(G, maps[x], T, prm)
            copy(T, G)
        back = hi[w] > fe
        # back: maps[hi-1] @ (... @ (maps[fe+1] @ maps[fe]))
        if back:
            copy(maps[fe], B)
            for x in range(fe + 1, hi[w]):
                matmul(maps[x], B, T, prm)
                copy(T, B)
        for f in range(finals.shape[0]):
            row = finals[f]
            if back:
                val = zero()
                for m in range(D):
                    bm = load(B, row, m)
                    if not is_zero(bm):
                        val = add(val, mul(bm, load(G, m, cst), prm), prm)
            else:
                val = load(G, row, cst)
            store(out, w, f, val)

    return kernel

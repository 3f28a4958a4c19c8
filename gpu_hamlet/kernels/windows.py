"""Window composition on the device: a window plan per partition, then one thread per window.

Both backends walk each partition's windows with a two-stack sliding aggregation
(gpu_hamlet/core/recursions.py `walk_windows`): a *front* stack of suffix products built at each
flip, and a *back* product of the segments pushed since. Each window's value is back x front[lo]
applied to the zero state. Here the walk runs first (one thread per partition, no matrix work)
and records, per window, its first and end segment and the flip point that window sees; then one
thread per window rebuilds its two products in the CPU's exact multiplication order, so results
are bit-identical.
A thread redoes the products its window shares with its neighbours (about n/a matrix products per
window instead of O(1) amortised) in exchange for parallelism over all windows and O(D^2)
scratch per thread.
"""

from __future__ import annotations

import functools

from numba import cuda

from gpu_hamlet.core.recursions import copy_map, matmul, walk_windows, window_finals
from gpu_hamlet.core.rings import BY_NAME


@cuda.jit
def plan_kernel(part_starts, run_seg, a, n, offsets, lo_out, hi_out, flip_out, k_out, fill):
    """Per partition: its window count (fill False, into offsets[p + 1]) or its windows' plan
    (fill True, from offsets[p])."""
    p = cuda.grid(1)
    if p >= part_starts.shape[0] - 1:
        return
    w = walk_windows(
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
    prm); `work` is [3, D, D, lanes, windows] scratch, windows innermost (segments.py)."""
    Tag = BY_NAME[ring]

    @cuda.jit
    def kernel(maps, lo, hi, flip, finals, out, work, prm):
        w = cuda.grid(1)
        if w >= lo.shape[0]:
            return
        tag = Tag(prm)
        G = work[0, :, :, :, w]
        B = work[1, :, :, :, w]
        T = work[2, :, :, :, w]
        fe = flip[w]
        # front: maps[fe-1] @ maps[fe-2] @ ... @ maps[lo], multiplied left to right
        copy_map(tag, maps[fe - 1], G)
        for x in range(fe - 2, lo[w] - 1, -1):
            matmul(tag, G, maps[x], T)
            copy_map(tag, T, G)
        # back: maps[hi-1] @ (... @ (maps[fe+1] @ maps[fe]))
        back = hi[w] > fe
        if back:
            copy_map(tag, maps[fe], B)
            for x in range(fe + 1, hi[w]):
                matmul(tag, maps[x], B, T)
                copy_map(tag, T, B)
        window_finals(tag, G, B, back, finals, out, w)

    return kernel

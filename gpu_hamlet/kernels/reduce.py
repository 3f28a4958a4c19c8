"""Ring sums of sorted runs of rows on the device (equivalence partitions adding up to a group)."""

from __future__ import annotations

import functools

from numba import cuda

from gpu_hamlet.kernels.rings import device_ring


@functools.cache
def reduce_kernel(ring: str):
    """kernel[grid, block](vals, bounds, out, prm): one thread per (run, column), adding the
    run's rows bounds[g]..bounds[g+1]-1 in order (as the CPU backend does)."""
    zero, one, add, mul, is_zero, load, store = device_ring(ring)

    @cuda.jit
    def kernel(vals, bounds, out, prm):
        x = cuda.grid(1)
        nf = vals.shape[1]
        if x >= (bounds.shape[0] - 1) * nf:
            return
        g = x // nf
        f = x - g * nf
        acc = load(vals, bounds[g], f)
        for i in range(bounds[g] + 1, bounds[g + 1]):
            acc = add(acc, load(vals, i, f), prm)
        store(out, g, f, acc)

    return kernel

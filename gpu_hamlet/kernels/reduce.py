"""Ring sums of sorted runs of rows on the device (equivalence partitions adding up to a group)."""

from __future__ import annotations

import functools

from numba import cuda

from gpu_hamlet.core.recursions import reduce_run
from gpu_hamlet.core.rings import BY_NAME


@functools.cache
def reduce_kernel(ring: str):
    """kernel[grid, block](vals, bounds, out, prm): one thread per (run, column), adding the
    run's rows bounds[g]..bounds[g+1]-1 in order (as the CPU backend does)."""
    Tag = BY_NAME[ring]

    @cuda.jit
    def kernel(vals, bounds, out, prm):
        x = cuda.grid(1)
        nf = vals.shape[1]
        if x >= (bounds.shape[0] - 1) * nf:
            return
        g = x // nf
        reduce_run(Tag(prm), vals, bounds[g], bounds[g + 1], x - g * nf, out, g)

    return kernel

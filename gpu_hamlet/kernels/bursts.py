"""Graphlet coefficients of shared bursts on the device: every burst of the call in one launch.

The coefficients are prefix products over a burst's timestamp groups (cpu_fallback/kernels.py
`burst_coefficients` gives the recurrence). This first version runs one thread per burst, each
scanning its burst sequentially in the CPU's order (so XFloat results are bit-identical); a
segmented parallel scan would split long bursts across threads but reassociate the XFloat
products, which would no longer match the CPU bit for bit.
"""

from __future__ import annotations

import functools

from numba import cuda

from gpu_hamlet.kernels.rings import device_ring


@functools.cache
def burst_kernel(ring: str):
    """kernel[grid, block](bounds, t, W, MU, K, work, prm): burst b's events are
    bounds[b]..bounds[b+1]-1; `work` is [bursts, channels, 1, lanes] scratch."""
    zero, one, add, mul, is_zero, load, store = device_ring(ring)

    @cuda.jit
    def kernel(bounds, t, W, MU, K, work, prm):
        b = cuda.grid(1)
        if b >= bounds.shape[0] - 1:
            return
        nch = W.shape[0]
        A = work[b]
        g = one()
        mu = zero()
        for ch in range(nch):
            store(K, b, ch, zero())
        i = bounds[b]
        end = bounds[b + 1]
        while i < end:
            j = i
            m = zero()
            for ch in range(nch):
                store(A, ch, 0, zero())
            while j < end and t[j] == t[i]:
                m = add(m, one(), prm)
                for ch in range(nch):
                    store(A, ch, 0, add(load(A, ch, 0), load(W, ch, j), prm))
                j += 1
            one_m = add(one(), m, prm)
            for ch in range(nch):
                kk = mul(load(K, b, ch), one_m, prm)
                store(K, b, ch, add(kk, mul(load(A, ch, 0), g, prm), prm))
            mu = add(mu, mul(m, g, prm), prm)
            g = mul(g, one_m, prm)
            i = j
        store(MU, b, 0, mu)

    return kernel

"""Graphlet coefficients of shared bursts on the device: every piece of every burst of the call in
one launch, then every burst in a second.

A burst's coefficients are a product of one linear map per timestamp group
(cpu_fallback/kernels.py `burst_coefficients` gives the recurrence and how maps compose). Bursts
are cut into pieces of PIECE_GROUPS groups: the first kernel runs one thread per piece, scanning
its groups in order; the second runs one thread per burst, folding its pieces' maps in order.
A long burst is thus spread over many threads, while the CPU backend computes the same pieces and
folds them the same way, so XFloat results stay bit-identical.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from gpu_hamlet.kernels.rings import device_ring


def pieces(
    seg_id: np.ndarray, t: np.ndarray, groups: int, nseg: int
) -> tuple[np.ndarray, np.ndarray]:
    """(first event of every piece, then the number of events; first piece of every burst, then
    the number of pieces) for events sorted by burst `seg_id` and time: a piece is `groups`
    consecutive timestamp groups of one burst, the last one of a burst possibly fewer."""
    n = seg_id.shape[0]
    new = np.ones(n, bool)
    new[1:] = (seg_id[1:] != seg_id[:-1]) | (t[1:] != t[:-1])
    group_start = np.flatnonzero(new)
    group_seg = seg_id[group_start]
    first = np.ones(group_start.shape[0], bool)
    first[1:] = group_seg[1:] != group_seg[:-1]
    index = np.arange(group_start.shape[0])
    within = index - np.maximum.accumulate(np.where(first, index, 0))
    at = np.flatnonzero(within % groups == 0)
    event_bounds = np.r_[group_start[at], n].astype(np.int64)
    burst_bounds = np.searchsorted(group_seg[at], np.arange(nseg + 1)).astype(np.int64)
    return event_bounds, burst_bounds


@functools.cache
def piece_kernel(ring: str):
    """kernel[grid, block](bounds, t, W, G, MU, K, work, prm): piece p's events are
    bounds[p]..bounds[p+1]-1, all of one burst; its map goes to G, MU and K at row p. `work` is
    [pieces, channels, 1, lanes] scratch."""
    zero, one, add, mul, is_zero, load, store = device_ring(ring)

    @cuda.jit
    def kernel(bounds, t, W, G, MU, K, work, prm):
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
        store(G, b, 0, g)
        store(MU, b, 0, mu)

    return kernel


@functools.cache
def fold_kernel(ring: str):
    """kernel[grid, block](bounds, G, PMU, PK, MU, K, prm): burst b's pieces are rows
    bounds[b]..bounds[b+1]-1 of G, PMU and PK; their maps, folded in order, go to MU and K at
    row b (in the CPU's operation order)."""
    zero, one, add, mul, is_zero, load, store = device_ring(ring)

    @cuda.jit
    def kernel(bounds, G, PMU, PK, MU, K, prm):
        b = cuda.grid(1)
        if b >= bounds.shape[0] - 1:
            return
        nch = PK.shape[1]
        p = bounds[b]
        g = load(G, p, 0)
        mu = load(PMU, p, 0)
        for ch in range(nch):
            store(K, b, ch, load(PK, p, ch))
        for q in range(p + 1, bounds[b + 1]):
            g2 = load(G, q, 0)
            mu = add(mu, mul(g, load(PMU, q, 0), prm), prm)
            for ch in range(nch):
                store(
                    K, b, ch, add(mul(g2, load(K, b, ch), prm), mul(g, load(PK, q, ch), prm), prm)
                )
            g = mul(g, g2, prm)
        store(MU, b, 0, mu)

    return kernel

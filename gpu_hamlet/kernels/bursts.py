"""Graphlet coefficients of shared bursts on the device: every piece of every burst of the call in
one launch, then every burst in a second.

A burst's coefficients are a product of one linear map per timestamp group; bursts are cut into
pieces (gpu_hamlet/core/recursions.py `pieces`, `piece_map`, `fold_pieces`). The first kernel
runs one thread per piece, scanning its groups in order; the second one thread per burst, folding
its pieces' maps in order. A long burst is thus spread over many threads, while the CPU backend
computes the same pieces and folds them the same way, so results stay bit-identical.
"""

from __future__ import annotations

import functools

from numba import cuda

from gpu_hamlet.core.recursions import fold_pieces, piece_map
from gpu_hamlet.core.rings import BY_NAME


@functools.cache
def piece_kernel(ring: str):
    """kernel[grid, block](bounds, t, W, G, MU, K, work, prm): piece p's events are
    bounds[p]..bounds[p+1]-1, all of one burst; its map goes to G, MU and K at row p. `work` is
    [channels, 1, lanes, pieces] scratch, pieces innermost (segments.py)."""
    Tag = BY_NAME[ring]

    @cuda.jit
    def kernel(bounds, t, W, G, MU, K, work, prm):
        b = cuda.grid(1)
        if b >= bounds.shape[0] - 1:
            return
        piece_map(Tag(prm), t, W, bounds[b], bounds[b + 1], K, b, work[:, :, :, b], G, MU)

    return kernel


@functools.cache
def fold_kernel(ring: str):
    """kernel[grid, block](bounds, G, PMU, PK, MU, K, prm): burst b's pieces are rows
    bounds[b]..bounds[b+1]-1 of G, PMU and PK; their maps, folded in order, go to MU and K at
    row b (in the CPU's operation order)."""
    Tag = BY_NAME[ring]

    @cuda.jit
    def kernel(bounds, G, PMU, PK, MU, K, prm):
        b = cuda.grid(1)
        if b >= bounds.shape[0] - 1:
            return
        fold_pieces(Tag(prm), G, PMU, PK, bounds[b], bounds[b + 1], MU, K, b)

    return kernel

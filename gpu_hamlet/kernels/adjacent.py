"""Windows with predicates between adjacent events on the device: one thread per run (a whole
window), running the recursion of gpu_hamlet/core/adjacency.py that the CPU backend runs, so
results are bit-identical. A run's events depend on each other in time order; runs are
independent. The trees live in one global array, each run's at its own offset."""

from __future__ import annotations

import functools

from numba import cuda

from gpu_hamlet.core.adjacency import run_adjacent
from gpu_hamlet.core.rings import BY_NAME


@functools.cache
def adjacent_kernel(ring: str):
    """The kernel of `ring`: kernel[grid, block](starts, t, pos, mseg, W, MU, K, pred_ptr,
    pred_idx, pred_cls, is_start, is_end, move_ptr, move_from, move_to, k, tree, toff, tsize,
    slot, rng, snap, wburst, wprev, doff, wesnap, eptr, goff, no_carry, T, V, A, ES, maps, prm);
    run r's result goes to maps[r] (its state, from zero)."""
    Tag = BY_NAME[ring]

    @cuda.jit
    def kernel(
        starts, t, pos, mseg, W, MU, K, pred_ptr, pred_idx, pred_cls, is_start, is_end, move_ptr,
        move_from, move_to, k, tree, toff, tsize, slot, rng, snap, wburst, wprev, doff, wesnap,
        eptr, goff, no_carry, T, V, A, ES, maps, prm,
    ):  # fmt: skip
        r = cuda.grid(1)
        if r >= starts.shape[0] - 1:
            return
        tag = Tag(prm)
        run_adjacent(
            tag, maps, T, V, A[r], starts, r, r + 1, no_carry, t, pos, mseg, W, MU, K, pred_ptr,
            pred_idx, pred_cls, is_start, is_end, move_ptr, move_from, move_to, k, tree, toff,
            tsize, slot, rng, snap, wburst, wprev, doff, wesnap, eptr, goff, ES,
        )  # fmt: skip

    return kernel

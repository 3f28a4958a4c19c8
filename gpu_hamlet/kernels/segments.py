"""Segment maps on the device: one thread per (partition, segment) run, all runs in one launch,
runs of several queries (of one shape: ring, channels, pattern length, columns) included.

Each thread runs the recursion of gpu_hamlet/core/recursions.py over its run, the code the CPU
backend runs, so results are bit-identical. Events of a run depend on each other in time order,
so a run is sequential inside its thread; runs are independent. Per-thread scratch (the state X,
the delta of an equal-timestamp group, a block row's scaled inputs) lives in a global workspace
[3, D, columns, lanes, runs] that the caller sizes to its chunk of runs. Every row reads and
writes X, so the runs are the innermost axis: the threads of a warp (consecutive runs) then
touch one element in adjacent words, one memory transaction, where [runs, ...] put each thread's
scratch on cache lines of its own and, across the hundreds of thousands of threads in flight,
out of every cache (docs/architecture.md section 3).
"""

from __future__ import annotations

import functools

from numba import cuda

from gpu_hamlet.core.recursions import run_segments
from gpu_hamlet.core.rings import BY_NAME


@functools.cache
def segment_kernel(ring: str):
    """The segment-map kernel of `ring`: kernel[grid, block](starts, qid, t, pos, W, MU, K, mseg,
    pred_ptr, pred_idx, is_start, is_end, move_ptr, move_from, move_to, k, full, carry, snap, maps,
    work, prm, BM, blk_ptr, blk_idx, BS). Run r belongs to query qid[r], whose template is row
    qid[r] of the template arrays (pred_ptr ... carry) and of blk_ptr and blk_idx."""
    Tag = BY_NAME[ring]

    @cuda.jit
    def kernel(
        starts, qid, t, pos, W, MU, K, mseg, pred_ptrs, pred_idxs, is_starts, is_ends, move_ptrs,
        move_froms, move_tos, k, full, carries, snap, maps, work, prm, BM, blk_ptrs, blk_idxs, BS,
    ):  # fmt: skip
        r = cuda.grid(1)
        if r >= starts.shape[0] - 1:
            return
        tag = Tag(prm)
        q = qid[r]
        X, Dl, Xs = work[0, :, :, :, r], work[1, :, :, :, r], work[2, :, :, :, r]
        run_segments(
            tag, X, Dl, Xs, starts, r, r + 1, t, pos, W, MU, K, mseg, pred_ptrs[q], pred_idxs[q],
            is_starts[q], is_ends[q], move_ptrs[q], move_froms[q], move_tos[q], k, full,
            carries[q], snap, BM, blk_ptrs[q], blk_idxs[q], BS, maps,
        )  # fmt: skip

    return kernel

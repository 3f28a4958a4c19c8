"""The CPU backend: the recursions of gpu_hamlet/core/recursions.py as numba kernels on the host.

With several cores it takes the kernel steps of many queries at once, as the GPU backend does
(gpu_hamlet/engine/backend.py `batches`), and runs them on a pool of threads: the kernels release
the GIL, and the Python around them stays on the calling thread (docs/architecture.md section 4).
"""

from __future__ import annotations

import numpy as np

from cpu_fallback import kernels
from cpu_fallback.bursts import burst_ids
from cpu_fallback.panes import panes
from gpu_hamlet.core import recursions
from gpu_hamlet.core.adjacency import AdjacentRuns
from gpu_hamlet.core.recursions import Blocks
from gpu_hamlet.core.rings import make_tag
from gpu_hamlet.core.weights import as_array
from gpu_hamlet.host_threads import cpu_threads, host_map


class CpuBackend:
    """Runs every engine step with numba on the host (weights described by columns and rows,
    gpu_hamlet/core/weights.py, are built here on the host). With `threads` > 1 it takes batches
    of calls (`batched`) and runs each batch's kernels on that many threads."""

    name = "cpu"
    device: int | None = None
    #: A batch of queries holds at most this many rows (the GPU's is larger: its memory is the
    #: device's, while here every query of a batch keeps its arrays on the host at once).
    batch_events = 5_000_000

    def __init__(self, threads: int | None = None) -> None:
        self.threads = cpu_threads() if threads is None else threads
        self.batched = self.threads > 1

    def _many(self, step: str, calls: list[tuple]) -> list:
        run = getattr(self, step)
        return host_map(lambda c: run(*c), calls, self.threads)

    def segment_maps_many(self, calls: list[tuple]) -> list[tuple]:
        return self._many("segment_maps", calls)

    def compose_windows_many(self, calls: list[tuple]) -> list[tuple]:
        return self._many("compose_windows", calls)

    def reduce_sorted_many(self, calls: list[tuple]) -> list[np.ndarray]:
        return self._many("reduce_sorted", calls)

    def adjacent_results_many(self, calls: list[tuple]) -> list[tuple]:
        return self._many("adjacent_results", calls)

    def segment_maps(
        self, ring, pid, seg, time, pos, weights, mu, k, mseg, template, full, snap, param=0,
        blocks=None,
    ):  # fmt: skip
        if blocks is None:
            blocks = Blocks.none(template.k, snap.dtype, snap.shape[2])
        return kernels.segment_maps(
            make_tag(ring, param),
            pid,
            seg,
            time,
            pos,
            as_array(weights),
            mu,
            k,
            mseg,
            template.pred_ptr,
            template.pred_idx,
            template.is_start,
            template.is_end,
            template.move_ptr,
            template.move_from,
            template.move_to,
            template.k,
            full,
            template.carry,
            snap,
            *blocks,
        )

    def adjacent_results(self, ring, runs: AdjacentRuns, weights, mu, k, mseg, template, snap,
                         param=0, values=False):  # fmt: skip
        maps, V = kernels.adjacent_results(
            make_tag(ring, param),
            runs.starts,
            runs.time,
            runs.pos,
            mseg,
            as_array(weights),
            mu,
            k,
            template.pred_ptr,
            template.pred_idx,
            runs.pred_cls,
            template.is_start,
            template.is_end,
            template.move_ptr,
            template.move_from,
            template.move_to,
            template.k,
            runs.tree,
            runs.toff,
            runs.tsize,
            runs.slot,
            runs.rng,
            runs.nodes,
            snap,
            runs.wburst,
            runs.wprev,
            runs.doff,
            runs.wesnap,
            runs.eptr,
            runs.goff,
            runs.eslots,
        )
        return maps, (V if values else None)

    def compose_windows(self, ring, maps, run_pid, run_seg, a, n, finals, param=0):
        return kernels.compose_windows(
            make_tag(ring, param), maps, run_pid, run_seg, np.int64(a), np.int64(n), finals
        )

    def reduce_sorted(self, ring, values, starts, param=0):
        return kernels.reduce_sorted(make_tag(ring, param), values, starts)

    def segments(self, pid, time, width):
        return panes(pid, time, width)

    def burst_ids(self, pid, pane, time, is_e):
        return burst_ids(pid, pane, time, is_e)

    def burst_coefficients(self, ring, seg_id, time, weights, nseg, param=0):
        event_bounds, burst_bounds = recursions.pieces(seg_id, time, recursions.PIECE_GROUPS, nseg)
        return kernels.burst_coefficients(
            make_tag(ring, param), time, as_array(weights), event_bounds, burst_bounds
        )


__all__ = ["CpuBackend"]

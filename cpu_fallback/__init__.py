"""The CPU backend: the recursions of gpu_hamlet/core/recursions.py as numba kernels on the host."""

from __future__ import annotations

import numpy as np

from cpu_fallback import kernels
from cpu_fallback.bursts import burst_ids
from cpu_fallback.panes import panes
from gpu_hamlet.core import recursions
from gpu_hamlet.core.adjacency import AdjacentRuns
from gpu_hamlet.core.rings import make_tag
from gpu_hamlet.core.weights import as_array


class CpuBackend:
    """Runs every engine step with numba on the host (weights described by columns and rows,
    gpu_hamlet/core/weights.py, are built here on the host)."""

    name = "cpu"

    def segment_maps(
        self, ring, pid, seg, time, pos, weights, mu, k, mseg, template, full, snap, param=0
    ):
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

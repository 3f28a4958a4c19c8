"""The CPU backend: numba kernels over the semirings of cpu_fallback/rings.py."""

from __future__ import annotations

import numpy as np

from cpu_fallback.kernels import compose_kernel, reduce_kernel, segment_kernel


class CpuBackend:
    """Runs every engine step with numba on the host."""

    name = "cpu"

    def segment_maps(self, ring, pid, seg, time, pos, weights, template, full, rp):
        kernel = segment_kernel(ring)
        return kernel(pid, seg, time, pos, weights, template.pred_ptr, template.pred_idx,
                      template.is_start, template.is_end, weights.shape[0], template.k, full, rp)

    def compose_windows(self, ring, maps, run_pid, run_seg, a, n, finals, rp):
        return compose_kernel(ring)(maps, run_pid, run_seg, np.int64(a), np.int64(n), finals, rp)

    def reduce_sorted(self, ring, values, starts, rp):
        return reduce_kernel(ring)(values, starts, rp)


__all__ = ["CpuBackend"]

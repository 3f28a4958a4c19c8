"""The GPU backend: the Backend steps (gpu_hamlet/backend.py) as numba.cuda kernels.

Host NumPy in and out, as the interface says. Each call launches its kernel over all its runs,
windows or bursts at once (never one launch per burst, window or segment), in chunks sized to
`max_device_bytes` so device memory stays bounded whatever the input. Results are bit-identical
to the CPU backend in every ring: same recursions, same operation order, same scalar arithmetic.
numeric='bigint' runs here too: it is the 'modp' ring with more primes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda

from cpu_fallback.rings import layout
from gpu_hamlet.kernels.bursts import burst_kernel
from gpu_hamlet.kernels.device_data import use_rmm_pool
from gpu_hamlet.kernels.launch import boundaries, chunks, grid, to_device
from gpu_hamlet.kernels.reduce import reduce_kernel
from gpu_hamlet.kernels.segments import segment_kernel
from gpu_hamlet.kernels.windows import compose_kernel, plan_kernel

#: Device bytes one launch may use, unless GPU_HAMLET_DEVICE_BYTES or the constructor says.
DEFAULT_DEVICE_BYTES = 1 << 30


@dataclass
class Launch:
    """One kernel launch with its arguments on the device, and its device outputs."""

    kernel: Any
    threads: int
    args: tuple
    out: tuple

    def run(self) -> None:
        self.kernel[grid(self.threads)](*self.args)


class SegmentRuns:
    """The (partition, segment) runs of a segment_maps call and what each costs on the device."""

    def __init__(self, ring: str, pid: np.ndarray, seg: np.ndarray, weights: np.ndarray,
                 template, full: bool) -> None:
        self.ring, self.template, self.full = ring, template, full
        self.dtype, self.lanes = layout(ring)
        self.D = weights.shape[0] * (template.k + 1) + 1
        self.ncols = 1 + template.carry.shape[0] if full else 1
        self.bounds = boundaries((pid[1:] != pid[:-1]) | (seg[1:] != seg[:-1])) if pid.size \
            else np.zeros(1, np.int64)
        self.n = self.bounds.shape[0] - 1
        item = np.dtype(self.dtype).itemsize * self.lanes
        per_run = item * (2 * self.D * self.ncols + self.D * (self.D if full else 1))
        per_event = item * (weights.shape[0] + 1) + 3 * 8
        self.cost = per_run + per_event * np.diff(self.bounds)

    def maps_shape(self, runs: int) -> tuple[int, ...]:
        return runs, self.D, self.D if self.full else 1, self.lanes

    def upload(self, r0: int, r1: int, time, pos, weights, mu, k, mseg, snap, param) -> Launch:
        """Runs r0..r1-1 on the device, ready to launch; outputs (maps, snapshots)."""
        e0, e1 = self.bounds[r0], self.bounds[r1]
        tpl = self.template
        maps = cuda.device_array(self.maps_shape(r1 - r0), self.dtype)
        work = cuda.device_array((r1 - r0, 2, self.D, self.ncols, self.lanes), self.dtype)
        dsnap = to_device(snap[e0:e1])
        args = (to_device(self.bounds[r0:r1 + 1] - e0), to_device(time[e0:e1]),
                to_device(pos[e0:e1]), to_device(weights[:, e0:e1]), to_device(mu), to_device(k),
                to_device(mseg[e0:e1]), to_device(tpl.pred_ptr), to_device(tpl.pred_idx),
                to_device(tpl.is_start), to_device(tpl.is_end), np.int64(tpl.k), self.full,
                to_device(tpl.carry), dsnap, maps, work, np.int64(param))
        return Launch(segment_kernel(self.ring), r1 - r0, args, (maps, dsnap))


class GpuBackend:
    """Runs every engine step with numba.cuda kernels (on the device, or in numba's simulator)."""

    name = "gpu"

    def __init__(self, max_device_bytes: int | None = None) -> None:
        if max_device_bytes is None:
            max_device_bytes = int(os.environ.get("GPU_HAMLET_DEVICE_BYTES", DEFAULT_DEVICE_BYTES))
        self.budget = max_device_bytes
        use_rmm_pool()

    def segment_maps(self, ring, pid, seg, time, pos, weights, mu, k, mseg, template, full, snap,
                     param=0):
        runs = SegmentRuns(ring, pid, seg, weights, template, full)
        maps = np.empty(runs.maps_shape(runs.n), runs.dtype)
        for r0, r1 in chunks(runs.cost, self.budget):
            launch = runs.upload(r0, r1, time, pos, weights, mu, k, mseg, snap, param)
            launch.run()
            launch.out[0].copy_to_host(maps[r0:r1])
            e0, e1 = runs.bounds[r0], runs.bounds[r1]
            snap[e0:e1] = launch.out[1].copy_to_host()
        starts = runs.bounds[:-1]
        return maps, pid[starts].astype(np.int64), seg[starts].astype(np.int64)

    def compose_windows(self, ring, maps, run_pid, run_seg, a, n, finals, param=0):
        dtype, lanes = layout(ring)
        lo, hi, flip, win_k, win_pid = self._window_plan(run_pid, run_seg, int(a), int(n))
        nw = lo.shape[0]
        nf = finals.shape[0]
        out = np.empty((nw, nf, lanes), dtype)
        D = maps.shape[1]
        per_map = maps[0].nbytes if maps.shape[0] else 0
        kernel = compose_kernel(ring)
        dfinals = to_device(finals)
        for w0, w1 in chunks(3 * per_map + per_map * (hi - lo), self.budget):
            m0, m1 = lo[w0], hi[w1 - 1]
            dout = cuda.device_array((w1 - w0, nf, lanes), dtype)
            work = cuda.device_array((w1 - w0, 3, D, D, lanes), dtype)
            kernel[grid(w1 - w0)](to_device(maps[m0:m1]), to_device(lo[w0:w1] - m0),
                                  to_device(hi[w0:w1] - m0), to_device(flip[w0:w1] - m0), dfinals,
                                  dout, work, np.int64(param))
            dout.copy_to_host(out[w0:w1])
        return out, win_pid, win_k

    @staticmethod
    def _window_plan(run_pid: np.ndarray, run_seg: np.ndarray, a: int, n: int):
        """Per window: first run, end run, flip run, window index and partition id (two launches
        over all partitions: count, then fill)."""
        parts = boundaries(run_pid[1:] != run_pid[:-1]) if run_pid.size else np.zeros(1, np.int64)
        nparts = parts.shape[0] - 1
        dparts, dseg = to_device(parts), to_device(run_seg)
        offsets = np.zeros(nparts + 1, np.int64)
        dummy = cuda.device_array(1, np.int64)
        if nparts:
            doff = to_device(offsets)
            plan_kernel[grid(nparts)](dparts, dseg, a, n, doff, dummy, dummy, dummy, dummy, False)
            offsets = np.cumsum(doff.copy_to_host())
        nw = int(offsets[-1])
        plan = [cuda.device_array(nw, np.int64) for _ in range(4)]
        if nw:
            plan_kernel[grid(nparts)](dparts, dseg, a, n, to_device(offsets), *plan, True)
        lo, hi, flip, win_k = (x.copy_to_host() for x in plan)
        win_pid = np.repeat(run_pid[parts[:-1]], np.diff(offsets)).astype(np.int64)
        return lo, hi, flip, win_k, win_pid

    def reduce_sorted(self, ring, values, starts, param=0):
        dtype, lanes = layout(ring)
        ng, nf = starts.shape[0], values.shape[1]
        out = np.empty((ng, nf, lanes), dtype)
        bounds = np.r_[starts, values.shape[0]].astype(np.int64)
        kernel = reduce_kernel(ring)
        row = values[0].nbytes if values.shape[0] else 0
        for g0, g1 in chunks(row * (1 + np.diff(bounds)), self.budget):
            b0, b1 = bounds[g0], bounds[g1]
            dout = cuda.device_array((g1 - g0, nf, lanes), dtype)
            kernel[grid((g1 - g0) * nf)](to_device(values[b0:b1]),
                                         to_device(bounds[g0:g1 + 1] - b0), dout, np.int64(param))
            dout.copy_to_host(out[g0:g1])
        return out

    def burst_coefficients(self, ring, seg_id, time, weights, nseg, param=0):
        dtype, lanes = layout(ring)
        nch = weights.shape[0]
        MU = np.empty((nseg, 1, lanes), dtype)
        K = np.empty((nseg, nch, lanes), dtype)
        bounds = np.searchsorted(seg_id, np.arange(nseg + 1)).astype(np.int64)
        kernel = burst_kernel(ring)
        item = np.dtype(dtype).itemsize * lanes
        per_event = item * nch + 8
        for b0, b1 in chunks(item * (2 * nch + 1) + per_event * np.diff(bounds), self.budget):
            e0, e1 = bounds[b0], bounds[b1]
            dmu = cuda.device_array((b1 - b0, 1, lanes), dtype)
            dk = cuda.device_array((b1 - b0, nch, lanes), dtype)
            work = cuda.device_array((b1 - b0, nch, 1, lanes), dtype)
            kernel[grid(b1 - b0)](to_device(bounds[b0:b1 + 1] - e0), to_device(time[e0:e1]),
                                  to_device(weights[:, e0:e1]), dmu, dk, work, np.int64(param))
            dmu.copy_to_host(MU[b0:b1])
            dk.copy_to_host(K[b0:b1])
        return MU, K

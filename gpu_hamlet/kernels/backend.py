"""The GPU backend: the Backend steps (gpu_hamlet/engine/backend.py) as numba.cuda kernels.

Host NumPy in and out, as the interface says, except the weights that come described by the
event table's columns and rows (gpu_hamlet/core/weights.py): those columns are read where they are
on the device and the weights are built there (gpu_hamlet/kernels/weights.py). Each call launches
its kernel over all its runs, windows or bursts at once (never one launch per burst, window or
segment), in chunks sized to `max_device_bytes` so device memory stays bounded whatever the input
(besides the event columns held for the call, 8 bytes per event each). The `*_many` steps take
the calls of all queries of a round (gpu_hamlet/engine/backend.py `drive`) and launch once per shape
(ring, map size, windowing, modulus) and chunk, not once per query. Results are bit-identical to
the CPU backend in every ring: same recursions, same operation order, same scalar arithmetic.
numeric='bigint' runs here too: it is the 'modp' ring with more primes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda

from gpu_hamlet.core import recursions
from gpu_hamlet.core.adjacency import AdjacentRuns
from gpu_hamlet.core.recursions import BLOCK, Blocks
from gpu_hamlet.core.rings import kernel_param, layout
from gpu_hamlet.core.weights import EventWeights, as_array
from gpu_hamlet.kernels.adjacent import adjacent_kernel
from gpu_hamlet.kernels.burst_ids import device_burst_ids
from gpu_hamlet.kernels.bursts import fold_kernel, piece_kernel
from gpu_hamlet.kernels.device_data import open_device
from gpu_hamlet.kernels.launch import (
    boundaries,
    chunks,
    gpu_step,
    grid,
    partition_chunks,
    to_device,
)
from gpu_hamlet.kernels.panes import device_panes
from gpu_hamlet.kernels.reduce import reduce_kernel
from gpu_hamlet.kernels.segments import segment_kernel
from gpu_hamlet.kernels.weights import device_weights
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


def _stack(rows: list[np.ndarray], width: int) -> np.ndarray:
    """Int64 rows of different lengths as one [len(rows), width] array, zero-padded."""
    out = np.zeros((len(rows), width), np.int64)
    for i, r in enumerate(rows):
        out[i, : r.shape[0]] = r
    return out


def shape_groups(calls: list[tuple]) -> list[list[int]]:
    """Indices of segment_maps calls that one launch can run together: same ring, channels,
    pattern length, map columns and modulus (their templates may differ)."""
    shapes: dict[tuple, list[int]] = {}
    for i, c in enumerate(calls):
        tpl, full = c[9], bool(c[10])
        key = (c[0], c[5].shape[0], tpl.k, full, tpl.carry.shape[0] if full else 0, int(c[12]))
        shapes.setdefault(key, []).append(i)
    return list(shapes.values())


class SegmentRuns:
    """The (partition, segment) runs of several segment_maps calls of one shape (ring, channels,
    pattern length, columns, modulus), side by side for one launch, and what each run costs on
    the device. Each call is (ring, pid, seg, time, pos, weights, mu, k, mseg, template, full,
    snap, param), as Backend.segment_maps takes it."""

    def __init__(self, calls: list[tuple]) -> None:
        calls = [c if len(c) > 13 else (*c, None) for c in calls]
        ring, _, _, _, _, W0, _, _, _, tpl0, full, _, param, _ = calls[0]
        self.ring, self.full, self.param, self.k = ring, full, param, tpl0.k
        self.dtype, self.lanes = layout(ring)
        self.D = W0.shape[0] * (tpl0.k + 1) + 1
        self.ncols = 1 + tpl0.carry.shape[0] if full else 1
        bounds, qid, e_off, mu_off = [np.zeros(1, np.int64)], [], 0, 0
        self.call_runs, self.call_events = [0], [0]
        mseg = []
        blocks = [
            c[13] if c[13] is not None else Blocks.none(c[9].k, self.dtype, self.lanes)
            for c in calls
        ]
        bm_off = 0
        for q, (_, pid, seg, _, _, _, mu, _, ms, _, _, _, _, _) in enumerate(calls):
            b = (
                boundaries((pid[1:] != pid[:-1]) | (seg[1:] != seg[:-1]))
                if pid.size
                else np.zeros(1, np.int64)
            )
            bounds.append(b[1:] + e_off)
            qid.append(np.full(b.shape[0] - 1, q, np.int64))
            mseg.append(np.where(ms >= 0, ms + mu_off, np.where(ms <= BLOCK, ms - bm_off, ms)))
            bm_off += blocks[q].bm.shape[0]
            e_off += pid.shape[0]
            mu_off += mu.shape[0]
            self.call_runs.append(self.call_runs[-1] + b.shape[0] - 1)
            self.call_events.append(e_off)
        self.bounds = np.concatenate(bounds)
        self.qid = np.concatenate(qid)
        self.n = self.bounds.shape[0] - 1
        cat = np.concatenate
        self.time = cat([c[3] for c in calls])
        self.pos = cat([c[4] for c in calls])
        ws = [c[5] for c in calls]
        # Described weights are built on the device per chunk (gpu_hamlet/kernels/weights.py);
        # only arrays given built are concatenated here.
        self.described = all(isinstance(w, EventWeights) for w in ws)
        self.weights: list[EventWeights] | np.ndarray = (
            ws if self.described else cat([as_array(w) for w in ws], axis=1)
        )
        nch = ws[0].shape[0]
        self.mu, self.kc = cat([c[6] for c in calls]), cat([c[7] for c in calls])
        self.mseg = cat(mseg)
        # A call passes no snapshot rows when nobody reads them (`apply_event`); with another
        # that does, it gets zeros of its own, so that rows stay aligned.
        snaps = [c[11] for c in calls]
        if any(sn.shape[0] for sn in snaps):
            snaps = [
                sn if sn.shape[0] else np.zeros((c[1].shape[0], *sn.shape[1:]), sn.dtype)
                for sn, c in zip(snaps, calls, strict=True)
            ]
        self.snap = cat(snaps)
        tpls = [c[9] for c in calls]
        self.pred_ptr = _stack([t.pred_ptr for t in tpls], self.k + 1)
        self.pred_idx = _stack(
            [t.pred_idx for t in tpls], max(1, *(t.pred_idx.shape[0] for t in tpls))
        )
        self.is_start = _stack([t.is_start.astype(np.int64) for t in tpls], self.k).astype(bool)
        self.is_end = _stack([t.is_end.astype(np.int64) for t in tpls], self.k).astype(bool)
        self.carry = _stack([t.carry[: self.ncols - 1] for t in tpls], self.ncols - 1)
        self.bm = cat([b.bm for b in blocks])
        self.bs = cat([b.bs for b in blocks])
        self.blk_ptr = _stack([b.blk_ptr for b in blocks], self.k + 1)
        self.blk_idx = _stack([b.blk_idx for b in blocks], max(b.blk_idx.shape[0] for b in blocks))
        self.moves = tuple(
            _stack(
                [getattr(t, name) for t in tpls], max(1, *(getattr(t, name).shape[0] for t in tpls))
            )
            for name in ("move_ptr", "move_from", "move_to")
        )
        item = np.dtype(self.dtype).itemsize * self.lanes
        per_run = item * (3 * self.D * self.ncols + self.D * (self.D if full else 1))
        # weights and snapshot, time, pos, mseg; rows and labels of described weights
        per_event = item * (nch + 1) + 3 * 8 + (16 if self.described else 0)
        self.cost = per_run + per_event * np.diff(self.bounds)

    def maps_shape(self, runs: int) -> tuple[int, ...]:
        return runs, self.D, self.D if self.full else 1, self.lanes

    def upload(self, r0: int, r1: int) -> Launch:
        """Runs r0..r1-1 on the device, ready to launch; outputs (maps, snapshots)."""
        e0, e1 = self.bounds[r0], self.bounds[r1]
        maps = cuda.device_array(self.maps_shape(r1 - r0), self.dtype)
        # Runs innermost: a warp's threads reach the same scratch element of consecutive runs
        # in one transaction (segments.py).
        work = cuda.device_array((3, self.D, self.ncols, self.lanes, r1 - r0), self.dtype)
        dsnap = to_device(self.snap[e0:e1])
        if isinstance(self.weights, list):  # described: each call's part of events e0..e1-1
            c0 = np.searchsorted(self.call_events, e0, side="right") - 1
            c1 = np.searchsorted(self.call_events, e1, side="left")
            W = device_weights(
                [
                    (
                        self.weights[j],
                        max(e0, self.call_events[j]) - self.call_events[j],
                        min(e1, self.call_events[j + 1]) - self.call_events[j],
                    )
                    for j in range(c0, c1)
                ]
            )
        else:
            W = to_device(self.weights[:, e0:e1])
        args = (
            to_device(self.bounds[r0 : r1 + 1] - e0),
            to_device(self.qid[r0:r1]),
            to_device(self.time[e0:e1]),
            to_device(self.pos[e0:e1]),
            W,
            to_device(self.mu),
            to_device(self.kc),
            to_device(self.mseg[e0:e1]),
            to_device(self.pred_ptr),
            to_device(self.pred_idx),
            to_device(self.is_start),
            to_device(self.is_end),
            *(to_device(m) for m in self.moves),
            np.int64(self.k),
            self.full,
            to_device(self.carry),
            dsnap,
            maps,
            work,
            kernel_param(self.ring, self.param),
            to_device(self.bm),
            to_device(self.blk_ptr),
            to_device(self.blk_idx),
            to_device(self.bs),
        )
        return Launch(segment_kernel(self.ring), r1 - r0, args, (maps, dsnap))


def device_budget(max_device_bytes: int | None) -> int:
    """The device bytes one launch may use: `max_device_bytes`, else GPU_HAMLET_DEVICE_BYTES,
    else DEFAULT_DEVICE_BYTES; a positive int, or a ValueError naming where it came from."""
    where, value = "max_device_bytes", max_device_bytes
    if value is None:
        where, text = "GPU_HAMLET_DEVICE_BYTES", os.environ.get("GPU_HAMLET_DEVICE_BYTES")
        if text is None:
            return DEFAULT_DEVICE_BYTES
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{where} must be a number of bytes, not {text!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{where} must be a positive int (bytes), not {value!r}")
    return int(value)


class GpuBackend:
    """Runs every engine step with numba.cuda kernels (on the device, or in numba's simulator)."""

    name = "gpu"

    def __init__(self, max_device_bytes: int | None = None, device: int | None = None) -> None:
        """`device`: the CUDA ordinal to run on (a Spark task's GPU, gpu_hamlet.devices.
        choose_device); None, the current device. It is selected, and the allocator set, before
        anything is allocated (kernels/device_data.py, open_device)."""
        self.budget = device_budget(max_device_bytes)
        self.device = open_device(device)

    def segment_maps(
        self, ring, pid, seg, time, pos, weights, mu, k, mseg, template, full, snap, param=0,
        blocks=None,
    ):  # fmt: skip
        return self.segment_maps_many(
            [(ring, pid, seg, time, pos, weights, mu, k, mseg, template, full, snap, param, blocks)]
        )[0]

    @gpu_step
    def segment_maps_many(self, calls: list[tuple]) -> list[tuple]:
        """segment_maps of several calls (queries), one launch per shape (ring, channels,
        pattern length, columns, modulus) and device-memory chunk, not per call."""
        out: dict[int, tuple] = {}  # by call
        for members in shape_groups(calls):
            group = [calls[i] for i in members]
            runs = SegmentRuns(group)
            maps: np.ndarray = np.empty(runs.maps_shape(runs.n), runs.dtype)
            for r0, r1 in chunks(runs.cost, self.budget):
                launch = runs.upload(r0, r1)
                launch.run()
                launch.out[0].copy_to_host(maps[r0:r1])
                e0, e1 = runs.bounds[r0], runs.bounds[r1]
                runs.snap[e0:e1] = launch.out[1].copy_to_host()
            for j, i in enumerate(members):
                pid, seg, snap = calls[i][1], calls[i][2], calls[i][11]
                r0, r1 = runs.call_runs[j], runs.call_runs[j + 1]
                e0, e1 = runs.call_events[j], runs.call_events[j + 1]
                if snap.shape[0]:
                    snap[...] = runs.snap[e0:e1]
                starts = runs.bounds[r0:r1] - e0
                out[i] = (maps[r0:r1], pid[starts].astype(np.int64), seg[starts].astype(np.int64))
        return [out[i] for i in range(len(calls))]

    @gpu_step
    def adjacent_results(self, ring, runs: AdjacentRuns, weights, mu, k, mseg, template, snap,
                         param=0, values=False):  # fmt: skip
        """Each run's result with predicates between adjacent events, in launches of whole runs
        whose trees, rows and states fit the device budget."""
        W = as_array(weights)
        nch, lanes = W.shape[0], W.shape[2]
        dtype = layout(ring)[0]
        D = nch * (template.k + 1) + 1
        maps = np.empty((runs.runs, D, 1, lanes), dtype)
        V = np.empty((runs.starts[-1], nch, lanes), dtype) if values else None
        item = nch * lanes * np.dtype(dtype).itemsize
        run_nodes = np.diff(
            np.r_[runs.toff[:, 0] if runs.toff.size else np.zeros(runs.runs), runs.nodes]
        )
        rows = np.diff(runs.starts)
        # A macro row's event snapshots take slots wesnap .. wesnap + its burst's count, in row
        # order: a launch's rows hold slots [slot_at[e0], slot_at[e1]).
        count = np.where(runs.wesnap >= 0, runs.eptr[runs.wburst + 1] - runs.eptr[runs.wburst], 0)
        slot_at = np.r_[0, np.cumsum(count)]
        cost = (run_nodes + rows * (3 + 4 * runs.rng.shape[1]) + 2 * D) * item
        cost += np.diff(slot_at[runs.starts]) * item
        no_carry = to_device(np.zeros(0, np.int64))
        for r0, r1 in chunks(cost, self.budget):
            e0, e1 = int(runs.starts[r0]), int(runs.starts[r1])
            s0 = int(slot_at[e0])
            n0 = int(runs.toff[r0, 0]) if runs.toff.size else 0
            nodes = int(run_nodes[r0:r1].sum())
            out = cuda.device_array((r1 - r0, D, 1, lanes), dtype)
            snap_d = to_device(snap[e0:e1])
            V_d = cuda.device_array((max(e1 - e0, 1), nch, lanes), dtype)
            adjacent_kernel(ring)[grid(r1 - r0)](
                to_device(runs.starts[r0 : r1 + 1] - e0),
                to_device(runs.time[e0:e1]),
                to_device(runs.pos[e0:e1]),
                to_device(mseg[e0:e1]),
                to_device(W[:, e0:e1]),
                to_device(mu),
                to_device(k),
                to_device(template.pred_ptr),
                to_device(template.pred_idx),
                to_device(runs.pred_cls),
                to_device(template.is_start),
                to_device(template.is_end),
                to_device(template.move_ptr),
                to_device(template.move_from),
                to_device(template.move_to),
                template.k,
                to_device(runs.tree),
                to_device(runs.toff[r0:r1] - n0),
                to_device(runs.tsize[r0:r1]),
                to_device(runs.slot[e0:e1]),
                to_device(runs.rng[e0:e1]),
                snap_d,
                to_device(runs.wburst[e0:e1]),
                to_device(np.where(runs.wprev[e0:e1] >= 0, runs.wprev[e0:e1] - e0, -1)),
                to_device(runs.doff),
                to_device(np.where(runs.wesnap[e0:e1] >= 0, runs.wesnap[e0:e1] - s0, -1)),
                to_device(runs.eptr),
                to_device(runs.goff),
                no_carry,
                cuda.device_array((max(nodes, 1), nch, lanes), dtype),
                V_d,
                cuda.device_array((r1 - r0, nch, 1, lanes), dtype),
                cuda.device_array((max(int(slot_at[e1]) - s0, 1), nch, lanes), dtype),
                out,
                kernel_param(ring, param),
            )
            out.copy_to_host(maps[r0:r1])
            snap[e0:e1] = snap_d.copy_to_host()
            if V is not None:
                V[e0:e1] = V_d.copy_to_host()[: e1 - e0]
        return maps, V

    def compose_windows(self, ring, maps, run_pid, run_seg, a, n, finals, param=0):
        return self.compose_windows_many([(ring, maps, run_pid, run_seg, a, n, finals, param)])[0]

    @gpu_step
    def compose_windows_many(self, calls: list[tuple]) -> list[tuple]:
        """compose_windows of several calls, one launch per shape (ring, map size, windowing,
        finals, modulus): each call's partitions are renumbered after the previous call's."""
        out: dict[int, tuple] = {}  # by call
        groups: dict[tuple, list[int]] = {}
        for i, (ring, maps, _, _, a, n, finals, param) in enumerate(calls):
            key = (ring, maps.shape[1:], int(a), int(n), tuple(finals.tolist()), int(param))
            groups.setdefault(key, []).append(i)
        for members in groups.values():
            # Partitions renumbered densely, each call's after the previous call's.
            dense, firsts, offsets = [], [], [0]
            for i in members:
                run_pid = calls[i][2]
                new = (
                    np.r_[True, run_pid[1:] != run_pid[:-1]] if run_pid.size else np.zeros(0, bool)
                )
                dense.append(np.cumsum(new) - 1 + offsets[-1])
                firsts.append(run_pid[new])
                offsets.append(offsets[-1] + int(new.sum()))
            ring, _, _, _, a, n, finals, param = calls[members[0]]
            vals, win_pid, win_k = self._compose(
                ring,
                np.concatenate([calls[i][1] for i in members]),
                np.concatenate(dense),
                np.concatenate([calls[i][3] for i in members]),
                a,
                n,
                finals,
                param,
            )
            cut = np.searchsorted(win_pid, offsets)
            for j, i in enumerate(members):
                w0, w1 = cut[j], cut[j + 1]
                pid = firsts[j][win_pid[w0:w1] - offsets[j]].astype(np.int64)
                out[i] = (vals[w0:w1], pid, win_k[w0:w1])
        return [out[i] for i in range(len(calls))]

    def _compose(self, ring, maps, run_pid, run_seg, a, n, finals, param):
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
            work = cuda.device_array((3, D, D, lanes, w1 - w0), dtype)
            kernel[grid(w1 - w0)](
                to_device(maps[m0:m1]),
                to_device(lo[w0:w1] - m0),
                to_device(hi[w0:w1] - m0),
                to_device(flip[w0:w1] - m0),
                dfinals,
                dout,
                work,
                kernel_param(ring, param),
            )
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
        return self.reduce_sorted_many([(ring, values, starts, param)])[0]

    @gpu_step
    def reduce_sorted_many(self, calls: list[tuple]) -> list[np.ndarray]:
        """reduce_sorted of several calls, one launch per shape (ring, row shape, modulus)."""
        out: dict[int, np.ndarray] = {}  # by call
        groups: dict[tuple, list[int]] = {}
        for i, (ring, values, _, param) in enumerate(calls):
            groups.setdefault((ring, values.shape[1:], int(param)), []).append(i)
        for members in groups.values():
            rows = np.cumsum([0] + [calls[i][1].shape[0] for i in members])
            ring, _, _, param = calls[members[0]]
            sums = self._reduce(
                ring,
                np.concatenate([calls[i][1] for i in members]),
                np.concatenate([calls[i][2] + r for i, r in zip(members, rows)]),
                param,
            )
            ends = np.cumsum([0] + [calls[i][2].shape[0] for i in members])
            for j, i in enumerate(members):
                out[i] = sums[ends[j] : ends[j + 1]]
        return [out[i] for i in range(len(calls))]

    def _reduce(self, ring, values, starts, param):
        dtype, lanes = layout(ring)
        ng, nf = starts.shape[0], values.shape[1]
        out = np.empty((ng, nf, lanes), dtype)
        bounds = np.r_[starts, values.shape[0]].astype(np.int64)
        kernel = reduce_kernel(ring)
        row = values[0].nbytes if values.shape[0] else 0
        for g0, g1 in chunks(row * (1 + np.diff(bounds)), self.budget):
            b0, b1 = bounds[g0], bounds[g1]
            dout = cuda.device_array((g1 - g0, nf, lanes), dtype)
            kernel[grid((g1 - g0) * nf)](
                to_device(values[b0:b1]),
                to_device(bounds[g0 : g1 + 1] - b0),
                dout,
                kernel_param(ring, param),
            )
            dout.copy_to_host(out[g0:g1])
        return out

    def segments(self, pid, time, width):
        return self.segments_many([(pid, time, width)])[0]

    @gpu_step
    def segments_many(self, calls: list[tuple]) -> list[tuple]:
        """segments of several calls, one launch per shape (pane width, time type) and
        device-memory chunk: the calls' events side by side, a run starting at each call's
        first event."""
        out: dict[int, tuple] = {}  # by call
        groups: dict[tuple, list[int]] = {}
        for i, (_, time, width) in enumerate(calls):
            groups.setdefault((width, time.dtype.kind == "f"), []).append(i)
        per_event = 8 * 6 + 3  # inputs, pane, scan, start index; flags
        for members in groups.values():
            offsets = np.cumsum([0] + [calls[i][0].shape[0] for i in members])
            n = int(offsets[-1])
            pid = np.concatenate([calls[i][0] for i in members])
            time = np.concatenate([calls[i][1] for i in members])
            first = np.zeros(n, bool)
            first[offsets[:-1][offsets[:-1] < n]] = True
            seg, parts = np.empty(n, np.int64), []
            step = max(1, self.budget // per_event)
            for e0 in range(0, n, step):
                e1 = min(n, e0 + step)
                seg[e0:e1], s = device_panes(pid, time, calls[members[0]][2], first, e0, e1)
                parts.append(s)
            starts = np.concatenate(parts) if parts else np.zeros(0, np.int64)
            cut = np.searchsorted(starts, offsets)
            for j, i in enumerate(members):
                out[i] = (
                    seg[offsets[j] : offsets[j + 1]],
                    starts[cut[j] : cut[j + 1]] - offsets[j],
                )
        return [out[i] for i in range(len(calls))]

    @gpu_step
    def burst_ids(self, pid, pane, time, is_e):
        out = np.empty(pid.shape[0], np.int64)
        offset = 0
        per_event = 8 * 7 + 3  # inputs, group and burst numbers, output, scan totals, flags
        for e0, e1 in partition_chunks(pid, max(1, self.budget // per_event)):
            ids, count = device_burst_ids(pid[e0:e1], pane[e0:e1], time[e0:e1], is_e[e0:e1])
            out[e0:e1] = np.where(ids >= 0, ids + offset, -1)
            offset += count
        return out

    @gpu_step
    def burst_coefficients(self, ring, seg_id, time, weights, nseg, param=0):
        dtype, lanes = layout(ring)
        nch = weights.shape[0]
        described = isinstance(weights, EventWeights)
        MU = np.empty((nseg, 1, lanes), dtype)
        K = np.empty((nseg, nch, lanes), dtype)
        ev_bounds, bounds = recursions.pieces(seg_id, time, recursions.PIECE_GROUPS, nseg)
        item = np.dtype(dtype).itemsize * lanes
        per_piece = item * (3 * nch + 2) + 8
        per_event = item * nch + 8 + (16 if described else 0)  # + rows and labels
        cost = (
            item * (nch + 1)
            + 8
            + per_piece * np.diff(bounds)
            + per_event * np.diff(ev_bounds[bounds])
        )
        for b0, b1 in chunks(cost, self.budget):
            p0, p1 = bounds[b0], bounds[b1]
            e0, e1 = ev_bounds[p0], ev_bounds[p1]
            g = cuda.device_array((p1 - p0, 1, lanes), dtype)
            pmu = cuda.device_array((p1 - p0, 1, lanes), dtype)
            pk = cuda.device_array((p1 - p0, nch, lanes), dtype)
            work = cuda.device_array((nch, 1, lanes, p1 - p0), dtype)
            piece_kernel(ring)[grid(p1 - p0)](
                to_device(ev_bounds[p0 : p1 + 1] - e0),
                to_device(time[e0:e1]),
                device_weights([(weights, e0, e1)]) if described else to_device(weights[:, e0:e1]),
                g,
                pmu,
                pk,
                work,
                kernel_param(ring, param),
            )
            dmu = cuda.device_array((b1 - b0, 1, lanes), dtype)
            dk = cuda.device_array((b1 - b0, nch, lanes), dtype)
            fold_kernel(ring)[grid(b1 - b0)](
                to_device(bounds[b0 : b1 + 1] - p0), g, pmu, pk, dmu, dk, kernel_param(ring, param)
            )
            dmu.copy_to_host(MU[b0:b1])
            dk.copy_to_host(K[b0:b1])
        return MU, K

"""The CPU backend: the recursions of gpu_hamlet/core/recursions.py as numba kernels on the host.

With several cores the engine advances many queries at once, as for the GPU backend
(gpu_hamlet/engine/backend.py `batches`), and each kernel call starts on a pool of threads as
soon as a query asks for it (`submit`): the kernels release the GIL, and the Python around them
goes on in the calling thread meanwhile (docs/architecture.md section 4).
"""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np

from cpu_fallback import kernels
from cpu_fallback.bursts import burst_ids
from gpu_hamlet.core import recursions
from gpu_hamlet.core.adjacency import AdjacentRuns
from gpu_hamlet.core.panes import panes
from gpu_hamlet.core.rings import make_tag
from gpu_hamlet.core.weights import as_array
from gpu_hamlet.host_threads import cpu_threads, host_map, host_submit

#: A call of `burst_coefficients` over at least this many events per share is cut into one share
#: per thread. The kernel takes about 0.1 us an event (bench_sharing.py, bursts of 50: 10 ms of
#: the calling thread, 100,000 events), so a share is at least 2 ms, beyond the handover's cost.
COEFFICIENT_SHARE_EVENTS = 20_000


class CpuBackend:
    """Runs every engine step with numba on the host (weights described by columns and rows,
    gpu_hamlet/core/weights.py, are built here on the host). With `threads` > 1 the engine
    advances queries together (`batched`) and each kernel call starts on one of the threads as
    it comes (`submit`)."""

    name = "cpu"
    device: int | None = None
    #: A batch of queries holds at most this many rows (the GPU's is larger: its memory is the
    #: device's, while here every query of a batch keeps its arrays on the host at once).
    batch_events = 5_000_000

    def __init__(self, threads: int | None = None) -> None:
        self.threads = cpu_threads() if threads is None else threads
        self.batched = self.threads > 1

    #: The steps whose calls start on the threads: the kernels that walk a query's rows or
    #: windows. The others (segmenting, one burst set's coefficients) take less than a handover.
    threaded = frozenset({"segment_maps", "compose_windows", "reduce_sorted", "adjacent_results"})

    def submit(self, step: str, args: tuple) -> Future | None:
        """The call of `step` started on this backend's threads (`drive` goes on with other
        queries meanwhile), or None to make it in the caller's thread: one thread, another
        step, or a call over few rows (its largest array's)."""
        if step not in self.threaded:
            return None
        rows = max((a.shape[0] for a in args if isinstance(a, np.ndarray) and a.ndim), default=0)
        return host_submit(getattr(self, step), args, self.threads, rows)

    def segment_maps(
        self, ring, pid, seg, time, pos, weights, mu, k, mseg, template, full, snap, param=0,
        blocks=None,
    ):  # fmt: skip
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
            *((None,) * 4 if blocks is None else blocks),  # (None: no block rows' code)
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
        """Each burst's coefficients are its own, so a large call is cut into consecutive bursts
        of about equal events, one share per thread (the same bits): one set's call is made in
        the calling thread while the queries wait for it (COEFFICIENT_SHARE_EVENTS)."""
        event_bounds, burst_bounds = recursions.pieces(seg_id, time, recursions.PIECE_GROUPS, nseg)
        tag, W = make_tag(ring, param), as_array(weights)
        shares = min(self.threads, seg_id.shape[0] // COEFFICIENT_SHARE_EVENTS, nseg)
        if shares < 2:
            return kernels.burst_coefficients(tag, time, W, event_bounds, burst_bounds)
        firsts = event_bounds[burst_bounds[:-1]]  # each burst's first event
        targets = np.arange(1, shares) * (seg_id.shape[0] / shares)
        cuts = [0, *np.searchsorted(firsts, targets).tolist(), nseg]

        def share(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
            p0, p1 = burst_bounds[lo], burst_bounds[hi]
            return kernels.burst_coefficients(
                tag, time, W, event_bounds[p0 : p1 + 1], burst_bounds[lo : hi + 1] - p0
            )

        parts = host_map(lambda c: share(*c), zip(cuts[:-1], cuts[1:]), shares)
        return tuple(np.concatenate(arrays) for arrays in zip(*parts))


__all__ = ["CpuBackend"]

"""Segmenting on the device (Backend.segments): the pane of every event and the starts of its
(partition, pane) runs, for the calls of many queries at once.

One elementwise kernel computes each event's pane and whether it starts a run (recomputing its
predecessor's pane rather than waiting for it), a prefix sum numbers the starts, and a scatter
writes their indices. Chunks of the concatenated calls carry one event of left context, so they
may be cut anywhere.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda, int64

from gpu_hamlet.kernels.launch import grid, to_device
from gpu_hamlet.kernels.scan import inclusive_scan


@functools.cache
def _mark_kernel(is_float: bool):
    """kernel(pid, t, width, first, skip, seg, start): events skip.. of the chunk get their pane
    and start flag; `first` marks the first event of each call (a run starts there)."""
    if is_float:

        @cuda.jit(device=True)
        def pane(x, w):
            return int64(math.floor(x / w))
    else:

        @cuda.jit(device=True)
        def pane(x, w):
            return x // w

    @cuda.jit
    def mark(pid, t, width, first, skip, seg, start):
        j = cuda.grid(1)
        if j < skip or j >= t.shape[0]:
            return
        s = pane(t[j], width)
        seg[j - skip] = s
        new = first[j]
        if not new and j > 0:
            new = pid[j] != pid[j - 1] or s != pane(t[j - 1], width)
        start[j - skip] = new

    return mark


@cuda.jit
def _scatter(start, numbered, base, out):
    i = cuda.grid(1)
    if i < start.shape[0] and start[i]:
        out[numbered[i] - 1] = base + i


def device_panes(
    pid: np.ndarray, t: np.ndarray, width: int | float, first: np.ndarray, e0: int, e1: int
) -> tuple[np.ndarray, np.ndarray]:
    """Panes of events e0..e1-1 of a concatenated stream and the indices (into the stream) of
    the runs starting among them."""
    n = e1 - e0
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    c0 = max(e0 - 1, 0)
    skip = e0 - c0
    seg = cuda.device_array(n, np.int64)
    start = cuda.device_array(n, np.bool_)
    is_float = t.dtype.kind == "f"
    w = np.float64(width) if is_float else np.int64(width)
    _mark_kernel(is_float)[grid(e1 - c0)](
        to_device(pid[c0:e1]), to_device(t[c0:e1]), w, to_device(first[c0:e1]), skip, seg, start
    )
    numbered = inclusive_scan(start)
    count = int(numbered[n - 1 : n].copy_to_host()[0])
    out = cuda.device_array(max(count, 1), np.int64)
    _scatter[grid(n)](start, numbered, np.int64(e0), out)
    return seg.copy_to_host(), out.copy_to_host()[:count]

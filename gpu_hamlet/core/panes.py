"""Segmenting on the host: the pane of every event and where its (partition, pane) runs start.

The CPU backend's `segments` step, and on every backend what the engine's host-side pruning
needs (`SortedKeys.window_runs`, the gates' samples): those arrays stay on the host, and on a
GPU each such call was a round trip to the device (an H200 spent 14 ms of a 57 ms call on the
call's window runs: BENCHMARKS.md, GPU kernels). The device's pane kernel gives the same bits
(`tests/test_gpu_kernels.py`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from gpu_hamlet.core.rings import jitable


def panes(pid: np.ndarray, time: np.ndarray, width: int | float) -> tuple[np.ndarray, np.ndarray]:
    """(pane of every event, first event of every run of equal partition and pane) for events
    sorted by partition and time: floor(time / width), in the time column's own arithmetic.
    The runs are found in one compiled pass: a call segments every query's rows, and NumPy's
    four steps for them cost a small call more than its rows (bench_small.py)."""
    if time.dtype.kind == "f":
        seg = float_panes(time, width)
    else:
        seg = time // np.int64(width)  # (NumPy divides by one divisor without a division)
    return seg, _run_starts(pid, seg)


def float_panes(time: np.ndarray, width: float) -> np.ndarray:
    """The pane of every float time, floor(time / width), as int64. Beyond 2^62 panes lie only
    events the query cannot match (evaluate.py `_check_float_panes`): they are held there,
    apart from its own, not cast past int64."""
    return np.clip(np.floor(time / width), -(2.0**62), 2.0**62).astype(np.int64)


@jitable
def first_window(pane, a, n):
    """ceil((pane - n + 1) / a): the first window [k*a, k*a + n) holding `pane` (all in panes),
    for ints and arrays alike, from the quotients and remainders of the pane and n - 1 by a.
    pane - n + 1 itself wrapped int64 where a pane near -2^62 meets a window of more than 2^62
    panes, which docs/semantics.md section 6 allows (windows of 2^62 seconds)."""
    return pane // a - (n - 1) // a + (pane % a > (n - 1) % a)


@njit(cache=True, nogil=True)
def _run_starts(pid: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """The first index of every run of equal (pid, seg): each index is written, and only a
    run's first moves on (no branch per event)."""
    n = seg.shape[0]
    starts = np.empty(n, np.int64)
    m = min(n, 1)
    if n:
        starts[0] = 0
    for i in range(1, n):
        starts[m] = i
        m += (pid[i] != pid[i - 1]) | (seg[i] != seg[i - 1])
    return starts[:m].copy() if 2 * m < n else starts[:m]  # (no copy of most of it)

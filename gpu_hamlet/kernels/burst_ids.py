"""Burst detection on the device (Backend.burst_ids): elementwise flags and two prefix sums.

A burst is a maximal run of timestamp groups made only of Kleene-type events within one
partition and pane (cpu_fallback/bursts.py says the same with NumPy). On the device: flag where
a (partition, pane) run and a timestamp group start, number the groups by a scan, mark groups
holding another type, flag burst starts, number them by a second scan.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpu_hamlet.kernels.launch import grid, to_device
from gpu_hamlet.kernels.scan import inclusive_scan


@cuda.jit
def _starts(pid, pane, t, new_part, new_group):
    i = cuda.grid(1)
    if i >= pid.shape[0]:
        return
    part = i == 0 or pid[i] != pid[i - 1] or pane[i] != pane[i - 1]
    new_part[i] = part
    new_group[i] = part or t[i] != t[i - 1]


@cuda.jit
def _mark_mixed(group, is_e, mixed):
    # group: 1-based timestamp group of each event; every writer writes 1, so races are benign.
    i = cuda.grid(1)
    if i < group.shape[0] and not is_e[i]:
        mixed[group[i] - 1] = 1


@cuda.jit
def _burst_starts(new_part, new_group, group, mixed, start):
    i = cuda.grid(1)
    if i >= group.shape[0]:
        return
    pure = mixed[group[i] - 1] == 0
    prev_pure = i > 0 and mixed[group[i - 1] - 1] == 0
    start[i] = pure and new_group[i] and (not prev_pure or new_part[i])


@cuda.jit
def _ids(group, mixed, numbered, out):
    i = cuda.grid(1)
    if i < group.shape[0]:
        out[i] = numbered[i] - 1 if mixed[group[i] - 1] == 0 else -1


def device_burst_ids(
    pid: np.ndarray, pane: np.ndarray, t: np.ndarray, is_e: np.ndarray
) -> tuple[np.ndarray, int]:
    """Burst ids of events that hold whole partitions (numbered from 0), and how many bursts."""
    n = pid.shape[0]
    dpid, dpane, dt, de = (to_device(a) for a in (pid, pane, t, is_e))
    new_part = cuda.device_array(n, np.bool_)
    new_group = cuda.device_array(n, np.bool_)
    blocks = grid(n)
    _starts[blocks](dpid, dpane, dt, new_part, new_group)
    group = inclusive_scan(new_group)
    mixed = to_device(np.zeros(n, np.int8))
    _mark_mixed[blocks](group, de, mixed)
    start = cuda.device_array(n, np.bool_)
    _burst_starts[blocks](new_part, new_group, group, mixed, start)
    numbered = inclusive_scan(start)
    out = cuda.device_array(n, np.int64)
    _ids[blocks](group, mixed, numbered, out)
    return out.copy_to_host(), int(numbered[n - 1 : n].copy_to_host()[0])

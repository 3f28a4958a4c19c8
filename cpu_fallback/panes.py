"""Segmenting on the host: the pane of every event and where its (partition, pane) runs start."""

from __future__ import annotations

import numpy as np


def panes(pid: np.ndarray, time: np.ndarray, width: int | float) -> tuple[np.ndarray, np.ndarray]:
    """(pane of every event, first event of every run of equal partition and pane) for events
    sorted by partition and time: floor(time / width), in the time column's own arithmetic."""
    if time.dtype.kind == "f":
        seg = np.floor(time / width).astype(np.int64)
    else:
        seg = time // np.int64(width)
    n = seg.shape[0]
    change = np.ones(n, bool)
    change[1:] = (pid[1:] != pid[:-1]) | (seg[1:] != seg[:-1])
    return seg, np.flatnonzero(change)

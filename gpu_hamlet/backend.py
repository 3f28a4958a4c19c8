"""The backend interface: the data-parallel steps the engine delegates to CPU or GPU kernels.

The engine (gpu_hamlet/engine.py) decides what to compute; a backend only runs the kernels. Each
step takes and returns host NumPy arrays, and `ring` names the number system
(cpu_fallback/rings.py), so both backends give identical results.
"""

from __future__ import annotations

import logging
from typing import Protocol

import numpy as np

log = logging.getLogger("gpu_hamlet")


class Backend(Protocol):
    """What a backend provides. Arrays are NumPy; `param` is the ring's parameter (the modulus of 'modp')."""

    name: str

    def segment_maps(
        self, ring: str, pid: np.ndarray, seg: np.ndarray, time: np.ndarray, pos: np.ndarray,
        weights: np.ndarray, mu: np.ndarray, k: np.ndarray, mseg: np.ndarray, template,
        full: bool, snap: np.ndarray, param: int = 0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per (pid, segment) run of sorted events: its map (full) or its result from zero.

        Rows with mseg >= 0 are macro events (shared bursts) with coefficients mu[mseg], k[mseg];
        their snapshots go to `snap`.
        Returns (maps [runs, D, D or 1, lanes], run_pid, run_seg)."""
        ...

    def burst_coefficients(
        self, ring: str, seg_id: np.ndarray, time: np.ndarray, weights: np.ndarray, nseg: int,
        param: int = 0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Graphlet coefficients (MU [segments, 1, lanes], K [segments, channels, lanes]) of
        bursts given as events sorted by segment id."""
        ...

    def compose_windows(
        self, ring: str, maps: np.ndarray, run_pid: np.ndarray, run_seg: np.ndarray, a: int,
        n: int, finals: np.ndarray, param: int = 0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Window results [windows, finals, lanes], window pid and index, from segment maps."""
        ...

    def reduce_sorted(
        self, ring: str, values: np.ndarray, starts: np.ndarray, param: int = 0
    ) -> np.ndarray:
        """Ring sums of consecutive runs of values beginning at `starts`."""
        ...


def select_backend(name: str) -> Backend:
    """The backend for `name` ('cpu', 'gpu' or 'auto': the GPU when one is visible)."""
    from cpu_fallback import CpuBackend

    if name == "cpu":
        return CpuBackend()
    if name in ("gpu", "auto"):
        if name == "auto":
            log.info("gpu_hamlet: backend=auto uses the CPU backend (no GPU backend is built yet)")
            return CpuBackend()
        raise ValueError("backend='gpu' is not available: the GPU kernels are not built yet; "
                         "use backend='cpu' or 'auto'")
    raise ValueError(f"backend must be 'auto', 'cpu' or 'gpu', not {name!r}")

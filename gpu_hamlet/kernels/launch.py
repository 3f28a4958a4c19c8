"""Launch geometry and chunking: how much work one launch gets and how it fits device memory."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

import numpy as np
from numba import cuda
from numba.cuda.cudadrv.driver import CudaAPIError

from gpu_hamlet.errors import GpuHamletError
from gpu_hamlet.kernels.device_data import POOL_FRACTION_ENV, bind_thread

#: Threads per block: kernels are sequential per thread and register-heavy, so small blocks.
BLOCK = 128


def grid(n: int) -> tuple[int, int]:
    """(blocks, threads per block) covering n threads."""
    n = int(n)  # numba-cuda 0.30 takes only Python ints as launch dimensions
    tpb = max(1, min(BLOCK, n))
    return (n + tpb - 1) // tpb, tpb


def chunks(cost: np.ndarray, budget: int) -> Iterator[tuple[int, int]]:
    """Consecutive ranges [lo, hi) of items whose summed cost (bytes on the device) stays within
    `budget`; an item costlier than the budget gets a range of its own."""
    cum = np.cumsum(cost, dtype=np.float64)
    lo = 0
    while lo < cost.shape[0]:
        base = cum[lo - 1] if lo else 0.0
        hi = max(lo + 1, int(np.searchsorted(cum, base + budget, side="right")))
        yield lo, hi
        lo = hi


def partition_chunks(pid: np.ndarray, events: int) -> Iterator[tuple[int, int]]:
    """Ranges [lo, hi) of about `events` events sorted by ascending partition id, cut only where
    the partition changes (a partition larger than that gets a range of its own)."""
    n, lo = pid.shape[0], 0
    while lo < n:
        hi = lo + events
        if hi < n:
            cut = int(np.searchsorted(pid, pid[hi], side="left"))
            hi = cut if cut > lo else int(np.searchsorted(pid, pid[hi], side="right"))
        hi = min(hi, n)
        yield lo, hi
        lo = hi


def to_device(x: np.ndarray):
    """A contiguous device copy of a host array (or slice of one)."""
    return cuda.to_device(np.ascontiguousarray(x))


def boundaries(change: np.ndarray) -> np.ndarray:
    """Start of every run of equal keys and the end of the last: [0, ..., n] from the n - 1
    flags `change[i]` = (row i + 1 starts a new run)."""
    n = change.shape[0] + 1
    return np.r_[0, np.flatnonzero(change) + 1, n].astype(np.int64)


#: CUDA_ERROR_OUT_OF_MEMORY, the driver's code when an allocation does not fit.
OUT_OF_MEMORY = 2

Step = TypeVar("Step", bound=Callable[..., Any])


def gpu_step(step: Step) -> Step:
    """A GPU backend step: it runs on the backend's GPU in whatever thread calls it
    (`device_data.bind_thread`: the engine's host threads would run on device 0), and one
    whose device allocations fail for want of memory raises a GpuHamletError naming what to
    change, not the driver's bare error (issue 22; never a hang or a silent fall back to the
    CPU). Chunking keeps each launch within the backend's `budget`; what still does not fit is
    the event columns of the call and other processes' memory."""

    @functools.wraps(step)
    def checked(self, *args, **kwargs):
        bind_thread(self.device)
        try:
            return step(self, *args, **kwargs)
        except (CudaAPIError, MemoryError) as exc:
            if isinstance(exc, CudaAPIError) and int(exc.args[0]) != OUT_OF_MEMORY:
                raise
            where = "the current GPU" if self.device is None else f"GPU {self.device}"
            raise GpuHamletError(
                f"{where} ran out of memory in the GPU backend's {step.__name__} step, with "
                f"launches of up to {self.budget:,} bytes: lower GPU_HAMLET_DEVICE_BYTES so each "
                "launch takes less, give this process more of the GPU "
                f"({POOL_FRACTION_ENV}, or spark.rapids.python.memory.gpu.allocFraction under "
                "the RAPIDS Accelerator; fewer concurrent tasks per GPU), feed the events in "
                "smaller batches (gpu_hamlet.aggregate_stream), or use backend='cpu'"
            ) from exc

    return cast(Step, checked)

"""Getting data onto the device: Arrow columns to device arrays, and RMM as the allocator.

Neither cuDF nor RMM can be installed without a GPU, so their paths are short, guarded by imports
and untested in CI (the simulator covers the plain copy path only).
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
from numba import cuda

from gpu_hamlet.devices import simulator_enabled

#: The share of the device's free memory the RMM pool of a process starts with, unless
#: GPU_HAMLET_GPU_MEMORY_FRACTION says otherwise: half, as the RAPIDS Accelerator's Python workers
#: take by default, so that the plugin's own pool (spark.rapids.memory.gpu.allocFraction) and this
#: one fit on one GPU (docs/architecture.md section 5, "The GPU of a task").
DEFAULT_POOL_FRACTION = 0.5
POOL_FRACTION_ENV = "GPU_HAMLET_GPU_MEMORY_FRACTION"

#: The GPU this process runs on once open_device has run (None: not opened, or the current one).
_opened: list[int | None] = []
_OPENING = threading.Lock()
_bound = threading.local()  # the device each thread selected (`bind_thread`)


def pool_bytes(free: int, env: Mapping[str, str]) -> int | None:
    """Initial size of this process's RMM pool, in bytes (a multiple of 256, as RMM wants), or
    None when the RAPIDS Accelerator's Python worker (spark.python.daemon.module=rapids.daemon)
    has already set a pool up from spark.rapids.python.memory.gpu.allocFraction: then that pool
    is used as it is."""
    if env.get("RAPIDS_PYTHON_ENABLED", "").lower() == "true" and (
        env.get("RAPIDS_POOLED_MEM_ENABLED", "").lower() == "true"
    ):
        return None
    text = env.get(POOL_FRACTION_ENV)
    fraction = DEFAULT_POOL_FRACTION
    if text is not None:
        try:
            fraction = float(text)
        except ValueError:
            fraction = -1.0
        if not 0.0 < fraction <= 1.0:
            raise ValueError(
                f"{POOL_FRACTION_ENV}={text!r}: the share of the GPU's free memory for the "
                "engine's memory pool must be a number in (0, 1]"
            )
    return int(free * fraction) >> 8 << 8


def open_device(device: int | None) -> int | None:
    """Bind this process to GPU `device` (a CUDA ordinal; None: the current one) and set its
    allocator, once per process and before anything is allocated: numba's allocations then come
    from an RMM pool (when RMM is installed) shared with cuDF, sized by pool_bytes. Returns the
    device the process runs on. A later call naming another device keeps the first, with a
    warning (one GPU per Spark executor, as the RAPIDS Accelerator runs)."""
    with _OPENING:  # (threads racing here each set the allocator up)
        if _opened:
            if device is not None and _opened[0] is not None and device != _opened[0]:
                warnings.warn(
                    f"gpu-hamlet: this process already runs on GPU {_opened[0]}; the task's GPU "
                    f"{device} is not used (give each Spark executor one GPU)",
                    stacklevel=2,
                )
        else:
            if not simulator_enabled():
                _use_rmm_pool(device)
            _opened.append(device)
    bind_thread(_opened[0])
    return _opened[0]


def bind_thread(device: int | None) -> None:
    """Make `device` the calling thread's GPU: numba's CUDA context is per thread, and a thread
    that selected none runs on device 0 (the engine's host threads, a caller's own threads),
    whichever GPU the process opened. Each GPU step binds its thread (`launch.gpu_step`)."""
    if device is None or getattr(_bound, "device", None) == device:
        return
    cuda.select_device(device)
    _bound.device = device


def _use_rmm_pool(device: int | None) -> None:
    try:
        import cuda.bindings.runtime as cudart  # an RMM dependency (cuda-python)
        import rmm
        from rmm.allocators.numba import RMMNumbaManager
    except ImportError:
        return
    if device is not None:
        cudart.cudaSetDevice(device)  # the free memory below is the task's GPU's
    _, free, _ = cudart.cudaMemGetInfo()
    size = pool_bytes(free, os.environ)
    if size is not None:
        rmm.reinitialize(  # (the maximum too: RMM's default pool grows to the whole GPU)
            pool_allocator=True,
            initial_pool_size=size,
            maximum_pool_size=size,
            devices=0 if device is None else device,
        )
    cuda.set_memory_manager(RMMNumbaManager)


@functools.cache
def cudf_available() -> bool:
    """Whether cuDF can be imported (never under the simulator: cuDF needs a real device)."""
    if simulator_enabled():
        return False
    try:
        import cudf  # noqa: F401
    except ImportError:
        return False
    return True


def arrow_to_device(table: pa.Table, columns: Sequence[str]) -> dict[str, object]:
    """Device arrays (anything with `__cuda_array_interface__`) of numeric, null-free columns.

    With cuDF installed the table goes through `cudf.DataFrame.from_arrow` and the columns are
    read in place, without a copy back to the host; otherwise each column is copied from the host
    once. Timestamps become their int64 ticks."""
    if not cudf_available():
        return {c: cuda.to_device(_ticks(table.column(c).to_numpy())) for c in columns}
    import cudf

    frame = cudf.DataFrame.from_arrow(table.select(list(columns)))
    out = {}
    for c in columns:
        col = frame[c]
        if col.dtype.kind in "mM":
            col = col.astype("int64")
        out[c] = cuda.as_cuda_array(col.values)
    return out


def _ticks(values: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(values)
    return values.view(np.int64) if values.dtype.kind in "mM" else values

"""Getting data onto the device: Arrow columns to device arrays, and RMM as the allocator.

Neither cuDF nor RMM can be installed without a GPU, so their paths are short, guarded by imports
and untested in CI (the simulator covers the plain copy path only).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from numba import cuda

from gpu_hamlet.devices import simulator_enabled


@functools.cache
def use_rmm_pool() -> bool:
    """Allocate numba's device memory from an RMM pool when RMM is installed, shared with cuDF
    and without a cudaMalloc per array. Must run before the first CUDA context is created (the
    GPU backend calls it when built). Returns whether the pool is in use."""
    if simulator_enabled():
        return False
    try:
        import rmm
        from rmm.allocators.numba import RMMNumbaManager
    except ImportError:
        return False
    rmm.reinitialize(pool_allocator=True)
    cuda.set_memory_manager(RMMNumbaManager)
    return True


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

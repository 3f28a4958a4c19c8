"""Which GPU a Spark task (or a local run) should use, the way the RAPIDS Accelerator expects.

The Accelerator's executors see their GPU through `CUDA_VISIBLE_DEVICES` (then it is device 0 of
the visible ones) or, with GPU scheduling, through the task's `gpu` resource addresses. No GPU
resource means the CPU backend, unless the caller insists on a GPU.

Whether a device is visible at all is asked without importing numba.cuda: importing it fixes, for
the whole process, whether numba.cuda is the real driver or numba's CUDA simulator, and the test
suite decides that only after asking (tests/conftest.py).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import Mapping

_DRIVER_LIBS = ("libcuda.so.1", "libcuda.so", "nvcuda.dll")


def cuda_visible() -> bool:
    """Whether a real CUDA device is visible to this process (never the simulator).

    CuPy answers when it is installed; otherwise the CUDA
    driver is asked directly, which honours CUDA_VISIBLE_DEVICES like every CUDA library.
    Asked once per process: the driver reads CUDA_VISIBLE_DEVICES when it starts, so the answer
    cannot change after, and asking took 110 us (a failed import of CuPy, then the driver's
    library looked for), more than a small `aggregate` call's whole engine work with
    backend='auto' (benchmarks/bench_small.py)."""
    return _visible_devices() > 0


@functools.cache
def _visible_devices() -> int:
    try:
        import cupy
    except ImportError:
        return _driver_device_count()
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except cupy.cuda.runtime.CUDARuntimeError:
        return 0


def _driver_device_count() -> int:
    for name in _DRIVER_LIBS:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    return 0


def simulator_enabled() -> bool:
    """Whether numba.cuda is (or, once imported, will be) numba's CUDA simulator."""
    from numba.core import config

    config.reload_config()
    # numba's config sets its options as module globals at run time (reload_config)
    return bool(config.ENABLE_CUDASIM)  # type: ignore[attr-defined]


def enable_simulator() -> None:
    """Run numba.cuda kernels in numba's CUDA simulator (for tests on machines without a GPU).

    Must come before anything imports numba.cuda: that import picks the simulator or the driver."""
    if "numba.cuda" in sys.modules and "numba.cuda.simulator" not in sys.modules:
        raise RuntimeError(
            "numba.cuda is already imported with the real driver; enable the "
            "simulator before importing it (or set NUMBA_ENABLE_CUDASIM=1)"
        )
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    simulator_enabled()


def task_gpu_addresses() -> list[str]:
    """The `gpu` resource addresses Spark assigned to the running task (empty outside tasks)."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return []
    ctx = TaskContext.get()
    if ctx is None:
        return []
    info = ctx.resources().get("gpu")
    return list(info.addresses) if info is not None else []


def choose_device(
    env: Mapping[str, str] | None = None, addresses: list[str] | None = None
) -> int | None:
    """GPU ordinal to use, or None for the CPU.

    CUDA_VISIBLE_DEVICES set (and not empty): device 0, the first visible one. Otherwise the
    task's first `gpu` resource address. Otherwise None."""
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() not in ("", "-1", "NoDevFiles"):
        return 0
    addresses = task_gpu_addresses() if addresses is None else addresses
    if addresses:
        return int(addresses[0])
    return None

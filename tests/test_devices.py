"""Which GPU a process runs on, how much of it the engine's memory pool takes, and what happens
when it is full (issue 22, items 4 to 6): the task's GPU is selected once, before anything is
allocated; the pool is a configured share of the free memory, or the RAPIDS Python worker's own
pool; an allocation that does not fit fails with the settings to change."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from numba.cuda.cudadrv.driver import CudaAPIError

import gpu_hamlet
from gpu_hamlet.datagen import kleene_stream
from gpu_hamlet.errors import GpuHamletError
from gpu_hamlet.kernels import GpuBackend, device_data
from gpu_hamlet.kernels import backend as gpu_backend_module
from gpu_hamlet.kernels.launch import OUT_OF_MEMORY, grid

pytestmark = pytest.mark.gpu


def test_launch_dimensions_are_python_ints():
    """numba-cuda 0.30 refuses NumPy integers as launch dimensions (seen on an H200: every
    launch sized from an array length failed)."""
    blocks, threads = grid(np.int64(300))
    assert (type(blocks), type(threads)) == (int, int)
    assert (blocks, threads) == (3, 128)


def test_pool_is_the_configured_share_of_the_free_memory():
    free = 80 * 2**30 + 1000
    assert device_data.pool_bytes(free, {}) == (free // 2) >> 8 << 8
    quarter = device_data.pool_bytes(free, {device_data.POOL_FRACTION_ENV: "0.25"})
    assert quarter == (free // 4) >> 8 << 8 and quarter % 256 == 0
    for bad in ("0", "1.5", "half", "-0.2"):
        with pytest.raises(ValueError, match=rf"GPU_HAMLET_GPU_MEMORY_FRACTION='{bad}'"):
            device_data.pool_bytes(free, {device_data.POOL_FRACTION_ENV: bad})


def test_the_rapids_python_workers_pool_is_kept():
    rapids = {"RAPIDS_PYTHON_ENABLED": "true", "RAPIDS_POOLED_MEM_ENABLED": "true"}
    assert device_data.pool_bytes(2**30, rapids) is None
    assert device_data.pool_bytes(2**30, {"RAPIDS_PYTHON_ENABLED": "true"}) == 2**29


def test_the_tasks_gpu_is_selected_once_per_process_and_thread(monkeypatch):
    """The device is opened once per process, and selected in each thread that runs a step:
    numba's context is per thread, so the engine's host threads ran on device 0."""
    selected: list[int] = []
    monkeypatch.setattr(device_data, "_opened", [])
    monkeypatch.setattr(device_data, "_bound", threading.local())
    monkeypatch.setattr(device_data.cuda, "select_device", selected.append)
    be = GpuBackend(device=3)
    assert be.device == 3 and GpuBackend(device=3).device == 3
    with pytest.warns(UserWarning, match="already runs on GPU 3; the task's GPU 5 is not used"):
        assert GpuBackend(device=5).device == 3
    assert selected == [3]
    pid, time = np.zeros(4, np.int64), np.arange(4, dtype=np.int64)
    with ThreadPoolExecutor(1) as pool:
        for _ in range(2):
            pool.submit(be.segments, pid, time, 2).result()
    assert selected == [3, 3]  # (once for the other thread)


def test_threads_racing_to_open_the_device_set_its_allocator_up_once(monkeypatch):
    pools: list[int | None] = []
    monkeypatch.setattr(device_data, "_opened", [])
    monkeypatch.setattr(device_data, "_bound", threading.local())
    monkeypatch.setattr(device_data.cuda, "select_device", lambda device: None)
    monkeypatch.setattr(device_data, "simulator_enabled", lambda: False)
    monkeypatch.setattr(device_data, "_use_rmm_pool", lambda d: time.sleep(0.01) or pools.append(d))
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(device_data.open_device, [0] * 8)) == [0] * 8
    assert pools == [0] and device_data._opened == [0]


def test_no_device_named_keeps_the_current_one(monkeypatch):
    selected: list[int] = []
    monkeypatch.setattr(device_data, "_opened", [])
    monkeypatch.setattr(device_data.cuda, "select_device", selected.append)
    assert GpuBackend().device is None and selected == []


def out_of_memory(*_args, **_kwargs):
    raise CudaAPIError(OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY")


def test_out_of_device_memory_names_what_to_change(monkeypatch):
    """A device allocation that does not fit fails the call with the settings to change, not
    the driver's bare error, and never falls back to the CPU."""
    monkeypatch.setattr(gpu_backend_module, "to_device", out_of_memory)
    events = kleene_stream(200, seed=1, types=("A", "B", "C"), mean_burst=3)
    with pytest.raises(
        GpuHamletError, match=r"ran out of memory in the GPU backend's \w+ step"
    ) as e:
        gpu_hamlet.aggregate(
            events, "RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 20 s", backend="gpu"
        )
    assert "GPU_HAMLET_DEVICE_BYTES" in str(e.value) and "backend='cpu'" in str(e.value)
    assert isinstance(e.value.__cause__, CudaAPIError)


def test_other_driver_errors_pass_through(monkeypatch):
    def launch_failed(*_args, **_kwargs):
        raise CudaAPIError(719, "CUDA_ERROR_LAUNCH_FAILED")

    monkeypatch.setattr(gpu_backend_module, "to_device", launch_failed)
    events = kleene_stream(200, seed=1, types=("A", "B", "C"), mean_burst=3)
    with pytest.raises(CudaAPIError, match="LAUNCH_FAILED"):
        gpu_hamlet.aggregate(
            events, "RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 20 s", backend="gpu"
        )


def test_the_device_budget_is_a_positive_number_of_bytes(monkeypatch):
    """0, -1, 1.5 and True were taken as budgets; a string failed in a floor division and
    GPU_HAMLET_DEVICE_BYTES=abc said only "invalid literal for int()"."""
    monkeypatch.delenv("GPU_HAMLET_DEVICE_BYTES", raising=False)
    assert gpu_backend_module.device_budget(None) == gpu_backend_module.DEFAULT_DEVICE_BYTES
    assert gpu_backend_module.device_budget(np.int64(4096)) == 4096
    for bad in (0, -1, 1.5, True, "1GiB"):
        with pytest.raises(ValueError, match=r"max_device_bytes must be a positive int \(bytes\)"):
            gpu_backend_module.device_budget(bad)
    monkeypatch.setenv("GPU_HAMLET_DEVICE_BYTES", "abc")
    with pytest.raises(ValueError, match="GPU_HAMLET_DEVICE_BYTES must be a number of bytes, not"):
        gpu_backend_module.device_budget(None)
    monkeypatch.setenv("GPU_HAMLET_DEVICE_BYTES", "0")
    with pytest.raises(ValueError, match="GPU_HAMLET_DEVICE_BYTES must be a positive int"):
        gpu_backend_module.device_budget(None)


def test_the_pool_is_bounded_by_the_configured_share(monkeypatch):
    """RMM's pool grows to the whole GPU by default: the share of the free memory is its
    maximum as well as its start (with fake cuda-python and RMM modules: neither is installed
    without the `gpu` extra), on the task's GPU, and numba allocates from it."""
    import sys
    import types

    calls: dict[str, object] = {}
    runtime = types.SimpleNamespace(
        cudaSetDevice=lambda d: calls.setdefault("device", d),
        cudaMemGetInfo=lambda: (0, 8 * 2**30, 16 * 2**30),
    )
    bindings = types.ModuleType("cuda.bindings")
    bindings.runtime = runtime  # type: ignore[attr-defined]
    rmm = types.ModuleType("rmm")
    rmm.reinitialize = lambda **kw: calls.setdefault("pool", kw)  # type: ignore[attr-defined]
    numba_allocators = types.ModuleType("rmm.allocators.numba")
    numba_allocators.RMMNumbaManager = object  # type: ignore[attr-defined]
    package = types.ModuleType("cuda")
    package.bindings = bindings  # type: ignore[attr-defined]
    modules = {
        "cuda": package,
        "cuda.bindings": bindings,
        "cuda.bindings.runtime": runtime,
        "rmm": rmm,
        "rmm.allocators": types.ModuleType("rmm.allocators"),
        "rmm.allocators.numba": numba_allocators,
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(  # (the simulator has none)
        device_data.cuda, "set_memory_manager", lambda m: calls.setdefault("mm", m), raising=False
    )
    monkeypatch.setenv(device_data.POOL_FRACTION_ENV, "0.25")
    device_data._use_rmm_pool(2)
    assert calls["device"] == 2 and calls["mm"] is object
    assert calls["pool"] == dict(
        pool_allocator=True, initial_pool_size=2**31, maximum_pool_size=2**31, devices=2
    )

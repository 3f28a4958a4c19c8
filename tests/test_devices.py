"""Which GPU a process runs on and how much of it the engine's memory pool takes (issue 22,
items 5 and 6): the task's GPU is selected once, before anything is allocated; the pool is a
configured share of the free memory, or the RAPIDS Python worker's own pool."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_hamlet.kernels import GpuBackend, device_data
from gpu_hamlet.kernels.launch import grid

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


def test_the_tasks_gpu_is_selected_once_per_process(monkeypatch):
    selected: list[int] = []
    monkeypatch.setattr(device_data, "_opened", [])
    monkeypatch.setattr(device_data.cuda, "select_device", selected.append)
    assert GpuBackend(device=3).device == 3
    assert GpuBackend(device=3).device == 3
    with pytest.warns(UserWarning, match="already runs on GPU 3; the task's GPU 5 is not used"):
        assert GpuBackend(device=5).device == 3
    assert selected == [3]


def test_no_device_named_keeps_the_current_one(monkeypatch):
    selected: list[int] = []
    monkeypatch.setattr(device_data, "_opened", [])
    monkeypatch.setattr(device_data.cuda, "select_device", selected.append)
    assert GpuBackend().device is None and selected == []

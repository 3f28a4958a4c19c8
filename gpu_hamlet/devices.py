"""Which GPU a Spark task (or a local run) should use, the way the RAPIDS Accelerator expects.

The Accelerator's executors see their GPU through `CUDA_VISIBLE_DEVICES` (then it is device 0 of
the visible ones) or, with GPU scheduling, through the task's `gpu` resource addresses. No GPU
resource means the CPU backend, unless the caller insists on a GPU.
"""

from __future__ import annotations

import os
from typing import Mapping


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


def choose_device(env: Mapping[str, str] | None = None,
                  addresses: list[str] | None = None) -> int | None:
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

"""The threads host work runs on: the CPU backend's kernels and the engine's Arrow and numba steps
over all rows (encoding, sorting), which release the GIL (docs/architecture.md section 4)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from typing import Any, TypeVar

PREFIX = "gpu-hamlet-cpu"
#: Work over fewer rows than this runs in the calling thread: handing it over costs more than
#: it saves, and threads running Python take turns on the GIL (a small call got slower).
PARALLEL_ROWS = 200_000
#: A kernel call over fewer rows than this runs in the calling thread (`host_submit`). A row costs
#: 40-100 ns in the kernel, so this is about 0.1-0.25 ms of work: below it the handover, and the
#: two threads taking turns on the GIL around it, cost more than the overlap saves (50 queries
#: over 2,100 events: 30.6 ms with 500 rows here, 22.4 ms with 2,500; docs/architecture.md
#: section 4).
SUBMIT_ROWS = 2500
T = TypeVar("T")
R = TypeVar("R")


def cpu_threads() -> int:
    """OMP_NUM_THREADS when set (a Spark Python worker gets its task's cores there), else the
    cores this process may use."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return _usable_cores()


@cache
def _usable_cores() -> int:
    """Asked once: a system call each time is a tenth of a small call's cost."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@cache
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(threads, thread_name_prefix=PREFIX)


# A child forked after the pool started inherits the pool but none of its threads, and a call
# handed to it waited for ever (a multiprocessing worker of a process that had aggregated).
os.register_at_fork(after_in_child=_pool.cache_clear)


def host_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    threads: int | None = None,
    rows: int | None = None,
) -> list[R]:
    """fn over items, on `threads` threads (default `cpu_threads()`). In this thread when one
    would do, when the work is over fewer than PARALLEL_ROWS `rows`, and when this is one of
    the pool's threads already (waiting there for the pool could wait for ever)."""
    items = list(items)
    if len(items) < 2 or (rows is not None and rows < PARALLEL_ROWS) or _in_pool():
        return [fn(x) for x in items]
    threads = cpu_threads() if threads is None else threads  # (reads the environment)
    if threads < 2:
        return [fn(x) for x in items]
    return list(_pool(threads).map(fn, items))


def host_submit(fn: Callable[..., R], args: tuple, threads: int, rows: int) -> Future[R] | None:
    """fn(*args) started on `threads` threads, to be waited for later; None where it should run
    in this thread: one thread, a call over fewer than SUBMIT_ROWS rows, or this is one of the
    pool's threads already. For calls that release the GIL (numba kernels): the caller's Python
    goes on meanwhile."""
    if threads < 2 or rows < SUBMIT_ROWS or _in_pool():
        return None
    return _pool(threads).submit(fn, *args)


def _in_pool() -> bool:
    """Whether this is one of the pool's threads (which must not wait for the pool)."""
    return threading.current_thread().name.startswith(PREFIX)


class Once:
    """Entries of caches that the threads building query rows fill (evaluate.py), each made
    once: a second thread asking for an entry waits for the first one's rather than making it
    again. Each key has its own lock, so two threads make different entries at once. Letting
    both make it cost a 16-core GPU machine 2.6x: sixteen threads each segmented the call's
    rows on the device at once for the same windows (`SortedKeys.window_runs`), queueing on
    the device's allocations (BENCHMARKS.md, GPU kernels)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards `_locks`
        self._locks: dict[tuple, threading.Lock] = {}

    def get(self, cache: dict, key: Any, make: Callable[[], Any]) -> Any:
        """cache[key], made by `make()` where it is not there yet."""
        if key not in cache:
            with self._lock:
                lock = self._locks.setdefault((id(cache), key), threading.Lock())
            with lock:
                if key not in cache:
                    cache[key] = make()
        return cache[key]

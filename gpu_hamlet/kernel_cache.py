"""The on-disk cache of the compiled CPU kernels, and a timed warm-up that tells whether it was
used.

Every numba kernel of the CPU backend is declared `@njit(cache=True)` at module level, so numba
compiles each signature once and later processes (the next run, every Spark Python worker) load
the machine code instead of compiling it again (about 30 s of CPU per process otherwise). The
rings and recursions of gpu_hamlet/core are compiled into each kernel that calls them, and cached
with it.

Where numba keeps the cache: `NUMBA_CACHE_DIR` when set; else `__pycache__` beside the sources when
that folder is writable (an editable install, or a virtual environment of one's own); else the
user's cache folder (`~/.cache/numba` on Linux), so a read-only `pip install .` also caches. numba
keys each entry by its source file's modification stamp; the CPU kernels' stamp also covers the
files of gpu_hamlet/core (gpu_hamlet/core/compile_cache.py), so editing a recursion recompiles
them.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

#: The packages whose kernels are counted.
PACKAGES = ("gpu_hamlet", "cpu_fallback")


def dispatchers() -> list:
    """The numba CPU kernels (dispatchers) of the project's modules imported so far."""
    from numba.core.registry import CPUDispatcher

    found = []
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in PACKAGES or module is None:
            continue
        found += [
            v
            for v in vars(module).values()
            if isinstance(v, CPUDispatcher) and v.__module__ == name
        ]
    return found


def cache_dirs() -> tuple[str, ...]:
    """The folders numba caches the project's kernels in (one per source folder)."""
    return tuple(sorted({d.stats.cache_path for d in dispatchers() if d.stats.cache_path}))


def _counts() -> tuple[int, int]:
    """(signatures loaded from the cache, signatures compiled because the cache lacked them)."""
    stats = [d.stats for d in dispatchers()]
    return (
        sum(sum(s.cache_hits.values()) for s in stats),
        sum(sum(s.cache_misses.values()) for s in stats),
    )


@dataclass(frozen=True)
class WarmUp:
    """What a warm-up took: its wall time and how many kernel signatures it loaded or compiled."""

    seconds: float
    loaded: int
    compiled: int
    cache_dirs: tuple[str, ...]

    def describe(self) -> str:
        where = os.path.commonpath(self.cache_dirs) if self.cache_dirs else "numba's cache"
        if self.compiled:
            return (
                f"compiled ({self.compiled} signatures) in {self.seconds:.1f} s; first run: "
                f"numba cached them under {where}, later runs load them"
            )
        return (
            f"loaded {self.loaded} compiled signatures from under {where} in {self.seconds:.1f} s"
        )


def warm_up(run: Callable[[], object]) -> WarmUp:
    """Call `run` (a small engine call that uses the kernels a job will need) and report whether
    that compiled kernels or loaded them from the cache. Run on the Spark driver before a job, it
    also fills the cache for the job's Python workers, which then load instead of compiling."""
    hits, misses = _counts()
    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    hits2, misses2 = _counts()
    return WarmUp(seconds, hits2 - hits, misses2 - misses, cache_dirs())


__all__ = ["PACKAGES", "WarmUp", "cache_dirs", "dispatchers", "warm_up"]

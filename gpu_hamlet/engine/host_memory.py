"""Host memory: keep freed blocks for the next step instead of handing them back to the kernel.

glibc's malloc maps every block above its mmap threshold (at most 32 MiB) on its own and unmaps
it when freed. A call over 10^7 events builds dozens of temporaries of 80 MB (one int64 or
float64 per row), so each is mapped again and faulted in page by page: on the ridesharing
benchmark at 10^7 events that was a third of the call (`benchmarks/bench_stream.py`, docs/
architecture.md section 4). Raising the threshold and the trim threshold once per process lets
the heap keep and reuse those blocks. Only glibc has these settings; elsewhere nothing changes.
`GPU_HAMLET_KEEP_FREED_MEMORY=0` keeps the C library's defaults.

The CPU backend's kernels run on threads, and glibc gives each thread an arena of its own whose
heaps hold at most 64 MiB: a larger block made there (a sliding query's pane maps, 141 MB for
SEQ of ten types over 200,000 events) is mapped and faulted in on every call whatever the
thresholds say. One arena for the whole process (MALLOC_ARENA_MAX=1, read when the process
starts: too late to set here) made such calls 1.5x faster and nothing slower in our runs
(BENCHMARKS.md, "Sliding windows' route"). gpu-hamlet's own Spark sessions give it to their
Python workers (`SPARK_WORKER_CONF`); the README says how to set it elsewhere.
"""

from __future__ import annotations

import ctypes
import os
import platform

#: mallopt parameters (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: Blocks up to this size come from the heap (a column of 3.3e7 int64 rows).
MMAP_THRESHOLD = 256 << 20
#: Free memory at the top of the heap kept for reuse, beyond what the process uses.
TRIM_THRESHOLD = 256 << 20

#: Spark settings of the sessions gpu-hamlet starts (`gpu-hamlet run`, `explain`, the demo):
#: the Python workers that run the engine start with one malloc arena.
SPARK_WORKER_CONF = {"spark.executorEnv.MALLOC_ARENA_MAX": "1"}

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Apply the settings once per process (idempotent); True when glibc took them."""
    global _applied
    if _applied is None:
        _applied = _apply()
    return _applied


def _apply() -> bool:
    if os.environ.get("GPU_HAMLET_KEEP_FREED_MEMORY", "1") == "0":
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL("libc.so.6")
    return all(
        libc.mallopt(param, value) == 1
        for param, value in ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    )

"""numba's on-disk cache for kernels that compile the core's recursions into themselves.

numba keys a cached kernel by the modification stamp of the file that defines it, and nothing
else: the CPU kernels (cpu_fallback/kernels.py) inline the rings and recursions of this package,
so after an edit here they would load stale machine code. `cover_core(path)` makes the stamp of
every kernel defined in `path` also cover this package's sources, so such an edit recompiles them
(docs/architecture.md, "Compiled code and its cache").
"""

from __future__ import annotations

import os
from pathlib import Path

from numba.core import caching

CORE = Path(__file__).resolve().parent


def core_stamp() -> tuple:
    """(name, modification time, size) of every source file of gpu_hamlet/core."""
    return tuple(
        (p.name, st.st_mtime, st.st_size) for p in sorted(CORE.glob("*.py")) for st in (os.stat(p),)
    )


def cover_core(path: str) -> None:
    """Make the cache stamp of the kernels defined in file `path` include `core_stamp()`: numba
    tries each locator class in turn, so a subclass of each, answering only for `path`, goes
    first."""
    impl = vars(caching).get("CacheImpl") or vars(caching)["_CacheImpl"]  # renamed in 0.62
    target = os.path.realpath(path)
    covered = []
    for base in impl._locator_classes:
        if getattr(base, "covers", None) is not None:
            continue

        class Covered(base):  # type: ignore[misc, valid-type]
            covers = target

            @classmethod
            def from_function(cls, py_func, py_file):
                if os.path.realpath(py_file) != cls.covers:
                    return None
                return super().from_function(py_func, py_file)

            def get_source_stamp(self):
                return (super().get_source_stamp(), core_stamp())

        covered.append(Covered)
    impl._locator_classes[:0] = covered

"""Flat queries' pruning started on the host's threads ahead of the query that needs it.

A call over fewer than `PARALLEL_ROWS` rows builds its queries' rows one after another in the
calling thread: two threads each running queries' Python took turns on the GIL and lost (50
ridesharing queries over 10^5 events: 9.6-10.1 ms in one thread, 11.6-12.7 ms in two;
BENCHMARKS.md, Streaming in chunks). But a flat query's matching and pruning is one compiled
call that releases the GIL (`pruning.typed_may_complete`), and on that call it was a fifth of
the time, with only a few microseconds of Python around it. So those calls start on the host's
threads a few queries ahead, and the calling thread builds the rows of the queries before them
meanwhile, as the kernels' calls start as they come (docs/architecture.md section 4).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future

import numpy as np

from gpu_hamlet.engine.pruning import typed_may_complete
from gpu_hamlet.host_threads import host_submit

#: Queries whose pruning has started and whose rows are not built yet, at most: each holds its
#: kept rows until then.
AHEAD = 4
#: A query over fewer sorted rows than this is pruned by the query itself: its compiled call
#: (about 0.3-0.5 ns a row) is then shorter than handing it over.
AHEAD_ROWS = 20_000

Pruned = tuple[np.ndarray, np.ndarray]


class PruningAhead:
    """The pruning of the queries `names` (in the order their rows are built), started up to
    AHEAD queries ahead; `args_of(name)` gives a query's `typed_may_complete` arguments, or None
    where its rows are not built that way (shared sources, other patterns)."""

    def __init__(
        self, names: Iterable[str], args_of: Callable[[str], tuple | None], threads: int
    ) -> None:
        self._names = iter(names)
        self._args_of = args_of
        self._threads = threads
        self._started: dict[str, Future[Pruned]] = {}
        self._top_up()

    def take(self, name: str) -> Pruned | None:
        """Query `name`'s kept rows and positions, or None where it prunes them itself: none
        was started, or its call has not left the queue yet (taken back, so a caller on the
        host's threads never waits for a call queued behind it)."""
        started = self._started.pop(name, None)
        self._top_up()
        if started is None or started.cancel():
            return None
        return started.result()

    def _top_up(self) -> None:
        while len(self._started) < AHEAD:
            name = next(self._names, None)
            if name is None:
                return
            args = self._args_of(name)
            if args is None:
                continue
            rows = args[0].shape[0]  # (the sorted type codes)
            started = host_submit(typed_may_complete, args, self._threads, rows, AHEAD_ROWS)
            if started is not None:
                self._started[name] = started

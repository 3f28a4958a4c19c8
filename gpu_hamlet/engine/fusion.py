"""Queries of one plan shape answered by one run (docs/architecture.md section 4, fusion).

Every query of a call pays fixed costs in each step after its rows are built: weights, kernel
calls, windows, groups and the result table, some tens of NumPy and Arrow calls of a few
microseconds each. Queries whose plans have one shape (`QueryPlan.shape`: one automaton up to
the names of its types, the same windows, partitions, channels and result columns) and whose
rows are plain or read one set's shared bursts (their macro rows index the set's coefficient
segments) differ only in the events they read. Their rows, built query by
query as before, become one query's (`QueryRows.fused`: each query's partitions numbered after
the previous one's), every later step runs once for all of them, and `FusedResults` cuts the
result table into each query's at the end. On the ridesharing workload's 50 queries over 10^5
events, all of one shape, this took most of the call (BENCHMARKS.md, Streaming in chunks).

Only queries of few rows are fused (`FUSE_ROWS`): above it the fixed costs are a small share of
a query's work, while one kernel call over many queries' rows runs on one thread where their own
calls would share the host's threads. A fused run holds at most `FUSED_ROWS` rows and
partitions and `FUSED_KERNEL_ROWS` rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from gpu_hamlet.engine.backend import Backend, drive
from gpu_hamlet.engine.options import Options
from gpu_hamlet.engine.query_rows import QueryRows
from gpu_hamlet.engine.results import QueryResults
from gpu_hamlet.engine.sharing import SharedBursts
from gpu_hamlet.query.plan import QueryPlan
from gpu_hamlet.query.schema import in_result_order

#: A query is fused with others when it has at most this many rows and partitions. A query's
#: fixed costs are about 150 us, the kernel's rows 30-60 ns each: from 20,000 rows the fixed
#: costs are a tenth or less of the query's work. A fused query holds a copy of the
#: partitions' groups and steps over them: 300 queries of a few rows over 100,000 groups took
#: 0.37 s in fused pairs, 0.27 s alone.
FUSE_ROWS = 20_000
#: The rows and partitions of one fused run at most (its memory beside its queries' own).
FUSED_ROWS = 250_000
#: The rows of one fused run at most: each of its kernel calls runs on one thread, and runs of
#: up to this many rows (1-3 ms of kernel) still share the host's threads. With 250,000, 25
#: queries of 10,000 rows each took 33-38 ms fused against 29-31 alone; with 50,000, 29-32 ms
#: (`none`, bench_sharing.py's stream of bursts of 50; a `/tmp` sweep, three rounds).
FUSED_KERNEL_ROWS = 50_000


class FusedResults(QueryResults):
    """The tables of several queries of one plan shape from their fused rows: one run of every
    step, then the result table cut into each query's (its groups are numbered after the
    previous query's, so its output rows are consecutive)."""

    def __init__(
        self, members: list[QueryRows], plans: list[QueryPlan], options: Options, be: Backend
    ) -> None:
        super().__init__(QueryRows.fused(members), plans[0], options, be)
        self.plans = plans
        gid_of_pid = members[0].gid_of_pid
        self.groups = int(gid_of_pid.max()) + 1 if gid_of_pid.shape[0] else 1

    def _tables(self, k: np.ndarray, rep: np.ndarray, gid: np.ndarray, cols) -> Any:
        """One table for every member, put in result order once (the members share its GROUPBY
        columns: one plan shape), then cut: a check or sort per query was a tenth of 50
        ridesharing queries' call over 10^5 events."""
        member = gid // self.groups  # ascending
        table = self._unordered(k, rep, cols)
        q = self.plan.query
        if q.groupby or (k[1:] < k[:-1])[member[1:] == member[:-1]].any():
            table = in_result_order(table, q.groupby, member)
        cut = np.searchsorted(member, np.arange(len(self.plans) + 1))
        return {
            plan.query.name: table.slice(lo, hi - lo)
            for plan, lo, hi in zip(self.plans, cut[:-1], cut[1:])
        }


def runs(built: dict[str, QueryRows], options: dict[str, Options]) -> list[list[str]]:
    """The queries of `built` as runs: a query alone, or queries of one plan shape, options and
    shared source, each of at most FUSE_ROWS rows and partitions, together at most FUSED_ROWS
    rows and partitions (each query holds a copy of the partitions' groups: many groups and many
    queries of few rows took queries x partitions of memory) and FUSED_KERNEL_ROWS rows."""
    out: list[list[str]] = []
    # per shape: the run filling up, its rows and partitions, its rows
    open_runs: dict[tuple, tuple[list[str], int, int]] = {}
    for name, rows in built.items():
        shape = rows.plan.shape
        # (each query of a run takes its rows and a copy of the partitions' groups)
        n = rows.pos.shape[0] + rows.gid_of_pid.shape[0]
        one_set = all(isinstance(s, SharedBursts) for s in rows.sources) and len(rows.sources) < 2
        if shape is None or n > FUSE_ROWS or not one_set or rows.snapshots is not None:
            out.append([name])  # (snapshots are recorded per query)
            continue
        key = (shape, options[name], tuple(id(s) for s in rows.sources))
        names, held, kernel = open_runs.get(key, ([], 0, 0))
        m = rows.pos.shape[0]
        if names and (held + n > FUSED_ROWS or kernel + m > FUSED_KERNEL_ROWS):
            out.append(names)
            names, held, kernel = [], 0, 0
        names.append(name)
        open_runs[key] = (names, held + n, kernel + m)
    out.extend(names for names, _, _ in open_runs.values())
    return out


def tables(
    built: dict[str, QueryRows],
    plans: dict[str, QueryPlan],
    options: dict[str, Options],
    be: Backend,
) -> dict[str, pa.Table]:
    """Each query's result table from its rows, queries of one shape fused (`runs`), the steps
    of all runs driven together (gpu_hamlet/engine/backend.py `drive`). A value that does not
    fit its column raises a NumericOverflowError; a fused run's names its first query, so the
    caller runs the queries alone to name the right one (evaluate.py `first_overflow`)."""
    steps = {}
    fused = set()
    for names in [list(built)] if len(built) == 1 else runs(built, options):
        if len(names) == 1:
            (name,) = names
            steps[name] = QueryResults(built[name], plans[name], options[name], be).table_steps()
            continue
        key = "\0" + names[0]  # (no query name holds a NUL)
        fused.add(key)
        steps[key] = FusedResults(
            [built[n] for n in names], [plans[n] for n in names], options[names[0]], be
        ).table_steps()
    done = drive(steps, be)
    out: dict[str, pa.Table] = {}
    for key, value in done.items():
        out.update(value if key in fused else {key: value})
    return out

"""What Spark tasks run: the in-process engine over sorted shards of events, as `mapInArrow`,
and the second stage that composes the pane summaries of cut groups, as `applyInArrow`.

Everything here is shipped to executors, so it lives inside the installed package and holds only
plain data (the workload, options and Arrow schemas).

A shard is the rows of one group of the common GROUPBY values, or of one time slice of a cut group,
named by its label `__shard`. Rows arrive sorted by label and time in several Arrow batches; the
last shard of a batch may continue in the next one, so its rows are carried over and processed with
it. A slice of a cut group answers the windows inside it and emits, per query, one summary row: the
maps of its segments near its boundaries (gpu_hamlet/engine/summaries.py). The second stage receives
all summary rows of one (query, group) and composes the windows that cross the cuts.
"""

from __future__ import annotations

import dataclasses
import functools
import pickle
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.accumulators import Accumulator, AccumulatorParam

from gpu_hamlet.devices import choose_device, cuda_visible
from gpu_hamlet.engine.backend import say_once
from gpu_hamlet.engine.evaluate import evaluate
from gpu_hamlet.engine.options import Options
from gpu_hamlet.engine.partitions import grouping_values
from gpu_hamlet.engine.sharing import RunStats
from gpu_hamlet.engine.summaries import Cut, compose_query, summarize
from gpu_hamlet.errors import GpuHamletError
from gpu_hamlet.query.time_axis import time_axis
from gpu_hamlet.query.workload import Workload

QUERY_COL = "__query"  # the index of a result row's query in the workload
SHARD_COL = "__shard"  # the label of a row's group or slice (gpu_hamlet/spark/placement.py)
GROUP_COL, SUMMARY_COL = "__group", "__summary"


def packed_columns(
    schemas: tuple[pa.Schema, ...],
) -> tuple[tuple[pa.DataType, ...], tuple[tuple[int, ...], ...]]:
    """Slots shared by all queries' result columns: the r-th column of a type in any query goes
    to that type's r-th slot. Returns the slot types and, per query, the slot of each column.

    One intermediate table holds every query's rows; giving each query columns of its own would
    make it hundreds of columns wide, mostly null, which Spark converts and stores per row."""
    types: list[pa.DataType] = []
    of_type: dict[pa.DataType, list[int]] = {}  # the slots of each type
    slots = []
    for schema in schemas:
        seen: dict[pa.DataType, int] = {}
        mine = []
        for f in schema:
            r = seen[f.type] = seen.get(f.type, -1) + 1
            same = of_type.setdefault(f.type, [])
            if r == len(same):
                same.append(len(types))
                types.append(f.type)
            mine.append(same[r])
        slots.append(tuple(mine))
    return tuple(types), tuple(slots)


def slot_name(n: int) -> str:
    """The intermediate table's column of slot n (names safe for Spark)."""
    return f"_c{n}"


@dataclass(frozen=True)
class ShardJob:
    """The plain data a task needs."""

    workload: Workload
    names: tuple[str, ...]
    schemas: tuple[pa.Schema, ...]  # each query's result schema
    keys: tuple[str, ...]  # common GROUPBY attributes
    options: Options
    cuts: dict[int, tuple]  # shard label of each slice of a cut group: (slice, t0, R, last slice)
    type_names: tuple[str, ...]  # the type column arrives as codes into these
    stats: Accumulator | None = None  # of RunStats: each task adds its sharing decisions
    #: The events' column names, in the order the columns arrive (then the shard label): Spark
    #: carries them under names of the job's own (gpu_hamlet/spark/job.py); () keeps the names
    event_columns: tuple[str, ...] = ()

    @functools.cached_property
    def layout(self) -> tuple[tuple[pa.DataType, ...], tuple[tuple[int, ...], ...]]:
        return packed_columns(self.schemas)

    @property
    def result_schema(self) -> pa.Schema:
        """Result rows of every query in one table: the query's index, then the slots its columns
        are packed into (packed_columns; null where a query has fewer columns)."""
        types, _ = self.layout
        return pa.schema(
            [pa.field(QUERY_COL, pa.int32())]
            + [pa.field(slot_name(n), t) for n, t in enumerate(types)]
        )

    def columns(self, i: int) -> list[tuple[str, str]]:
        """(slot column, result column name) of query i, in its result's order."""
        return [(slot_name(n), f.name) for n, f in zip(self.layout[1][i], self.schemas[i])]

    @property
    def wide_schema(self) -> pa.Schema:
        """What the engine tasks emit: result rows, and summary rows of cut groups (the group's
        shard key and the pickled summary; null in result rows)."""
        return self.result_schema.append(pa.field(GROUP_COL, pa.binary())).append(
            pa.field(SUMMARY_COL, pa.binary())
        )

    def task_options(self) -> Options:
        """The options with the backend this task has: 'auto' is the CPU without a GPU. A task
        with no GPU named (no CUDA_VISIBLE_DEVICES, no 'gpu' task resource) uses the process's
        current device when it sees one: a local master schedules no GPUs, and its tasks ran on
        the CPU (`auto`) or failed (`gpu`) on a machine with one (`docker run --gpus all`)."""
        options = self.options
        if options.backend != "cpu" and choose_device() is None and not cuda_visible():
            if options.backend == "gpu":
                raise GpuHamletError(  # (rebuilt on the driver as `aggregate` raises it)
                    "backend='gpu', but this Spark task has no GPU: no CUDA device is visible "
                    "to it, and neither CUDA_VISIBLE_DEVICES nor a 'gpu' task resource "
                    "(spark.task.resource.gpu.amount) names one"
                )
            say_once("backend=auto: a Spark task sees no CUDA device; its tasks use the CPU")
            options = dataclasses.replace(options, backend="cpu")
        return options

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        wl = self.workload
        options = self.task_options()
        stats = None if self.stats is None else RunStats()
        carry: pa.Table | None = None
        names = pa.array(self.type_names, pa.string())
        at = None
        for batch in batches:
            if self.event_columns:
                batch = pa.RecordBatch.from_arrays(
                    batch.columns, names=[*self.event_columns, SHARD_COL]
                )
            if at is None:  # (by place: an event column may be named as the shard label)
                at = list(self.event_columns or batch.schema.names[:-1]).index(options.type_col)
            batch = batch.set_column(
                at, options.type_col, pa.DictionaryArray.from_arrays(batch.column(at), names)
            )
            table = pa.Table.from_batches([batch])
            if carry is not None:
                table = pa.concat_tables([carry, table])
            cut = self._last_shard_start(table)
            carry = table.slice(cut)
            if cut:
                yield from self._process(table.slice(0, cut), wl, options, stats)
        if carry is not None and carry.num_rows:
            yield from self._process(carry, wl, options, stats)
        if self.stats is not None:
            self.stats.add(stats)

    def _last_shard_start(self, table: pa.Table) -> int:
        labels = table.column(table.num_columns - 1).to_numpy()  # (SHARD_COL, last)
        differ = np.flatnonzero(labels != labels[-1])
        return int(differ[-1]) + 1 if differ.size else 0

    def _process(
        self, table: pa.Table, wl, options: Options, stats: RunStats | None
    ) -> Iterator[pa.RecordBatch]:
        """The shards of `table`: whole groups in one engine call, each slice of a cut group in
        its own; each call's sharing decisions are added to `stats` (one RunStats per call:
        aggregate() keeps one list of snapshots per query)."""

        def recorded(call, *args):
            one = None if stats is None else RunStats()
            out = call(*args, options, stats=one)
            if one is not None:
                stats.add(one)
            return out

        def engine(events: pa.Table, options: Options, stats: RunStats | None):
            return evaluate(events, wl, options, stats=stats, part=True)

        # The shard label is the last column (an event column may have its name too)
        labels = table.column(table.num_columns - 1).to_numpy()
        events = table.select(range(table.num_columns - 1))
        cut = np.isin(labels, np.fromiter(self.cuts, np.int64, len(self.cuts)))
        whole = np.flatnonzero(~cut)
        if whole.size == labels.shape[0]:
            res = recorded(engine, events)
            yield from self._wide(res, self.wide_schema)
        elif whole.size:
            res = recorded(engine, events.take(pa.array(whole)))
            yield from self._wide(res, self.wide_schema)
        bounds = np.r_[np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]]), labels.shape[0]]
        for a, b in zip(bounds[:-1], bounds[1:]):
            if not cut[a]:
                continue
            r, t0, R, rmax = self.cuts[int(labels[a])]
            slices = Cut(t0, R, rmax)
            shard = events.slice(int(a), int(b - a))
            inside, summaries = recorded(summarize, shard, wl, slices)
            yield from self._wide(inside, self.wide_schema)
            group = pickle.dumps(
                tuple(grouping_values(shard.column(k).slice(0, 1))[0].as_py() for k in self.keys)
            )
            rows = [
                (
                    self.names.index(name),
                    pickle.dumps({"part": r, "cut": slices, "schema": shard.schema, "summary": s}),
                )
                for name, s in summaries.items()
                if s is not None
            ]
            if rows:
                yield _summary_rows(rows, group, self.wide_schema)

    def _wide(self, results: dict[str, pa.Table], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        for i, name in enumerate(self.names):
            t = results.get(name)
            if t is None or not t.num_rows:
                continue
            n = t.num_rows
            cols: list[pa.Array | None] = [None] * len(schema)
            cols[0] = pa.array(np.full(n, i, np.int32))
            for j, slot in enumerate(self.layout[1][i]):
                cols[1 + slot] = t.column(j).combine_chunks().cast(schema.field(1 + slot).type)
            cols = [c if c is not None else pa.nulls(n, f.type) for c, f in zip(cols, schema)]
            yield from pa.Table.from_arrays(cols, schema=schema).to_batches()


class StatsParam(AccumulatorParam):
    """Adds up the RunStats of engine tasks (`RunStats.add`)."""

    def zero(self, value: RunStats) -> RunStats:
        return RunStats()

    def addInPlace(self, total: RunStats, more: RunStats) -> RunStats:
        total.add(more)
        return total


def compose_group(job, table):  # no hints: Spark 4.1 cannot read them through functools.partial
    """The second stage (`applyInArrow` over one query and cut group, given as
    functools.partial(compose_group, job): a pa.Table in, a pa.Table out): the crossing windows
    from the summaries of all the group's slices, as result rows."""
    options = job.task_options()
    i = table.column(QUERY_COL)[0].as_py()
    name = job.names[i]
    blobs = sorted(
        (pickle.loads(b) for b in table.column(SUMMARY_COL).to_pylist()), key=lambda x: x["part"]
    )
    schema = blobs[0]["schema"]
    q = job.workload.queries[i]
    axis = time_axis(schema.field(options.time_col).type, options.time_col)
    result = compose_query([b["summary"] for b in blobs], q, schema, axis, blobs[0]["cut"], options)
    return pa.Table.from_batches(
        list(job._wide({name: result}, job.result_schema)), schema=job.result_schema
    )


def _summary_rows(rows: list[tuple[int, bytes]], group: bytes, schema: pa.Schema) -> pa.RecordBatch:
    """One summary row per query: the query's index, the group and the pickled summary."""
    n = len(rows)
    cols = [pa.array([i for i, _ in rows], pa.int32())]
    cols += [pa.nulls(n, f.type) for f in schema][1:-2]
    cols += [pa.array([group] * n, pa.binary()), pa.array([b for _, b in rows], pa.binary())]
    return pa.RecordBatch.from_arrays(cols, schema=schema)

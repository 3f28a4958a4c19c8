"""What Spark tasks run: the in-process engine over sorted shards of events, as `mapInArrow`.

Everything here is shipped to executors, so it lives inside the installed package and holds only
plain data (the workload, options and Arrow schemas).

A shard is the rows of one shard key (the common GROUPBY values, and the time range `__range` for
a split group). Rows arrive sorted by shard key and time in several Arrow batches; the last shard
of a batch may continue in the next one, so its rows are carried over and processed with it. A
split group's shard owns the windows starting in its time range [t0 + r*R, t0 + (r+1)*R) (the
first and last ranges extend to infinity) and has received the first w_max of the next range too,
so each of its windows is complete and computed by exactly one task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_hamlet.devices import choose_device
from gpu_hamlet.engine import aggregate
from gpu_hamlet.workload import Workload

QUERY_COL = "__query"
RANGE_COL = "__range"
T0_COL, R_COL, RMAX_COL = "__t0", "__R", "__rmax"
SHARD_EXTRA = (RANGE_COL, T0_COL, R_COL, RMAX_COL)


def wide_name(i: int, j: int) -> str:
    """Column j of query i in the intermediate table (names safe for Spark)."""
    return f"_q{i}_{j}"


@dataclass(frozen=True)
class ShardJob:
    """The plain data a task needs."""

    workload: Workload
    names: tuple[str, ...]
    schemas: tuple[pa.Schema, ...]  # each query's result schema
    keys: tuple[str, ...]  # common GROUPBY attributes
    options: dict

    @property
    def wide_schema(self) -> pa.Schema:
        fields = [pa.field(QUERY_COL, pa.string())]
        for i, s in enumerate(self.schemas):
            fields += [pa.field(wide_name(i, j), f.type) for j, f in enumerate(s)]
        return pa.schema(fields)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        wl = self.workload
        options = dict(self.options)
        if options["backend"] != "cpu" and choose_device() is None:
            if options["backend"] == "gpu":
                raise RuntimeError(
                    "backend='gpu', but this Spark task has no GPU: neither CUDA_VISIBLE_DEVICES "
                    "nor a 'gpu' task resource (spark.task.resource.gpu.amount)")
            options["backend"] = "cpu"
        carry: pa.Table | None = None
        for batch in batches:
            table = pa.Table.from_batches([batch])
            if carry is not None:
                table = pa.concat_tables([carry, table])
            cut = self._last_shard_start(table)
            carry = table.slice(cut)
            if cut:
                yield from self._process(table.slice(0, cut), wl, options)
        if carry is not None and carry.num_rows:
            yield from self._process(carry, wl, options)

    def _last_shard_start(self, table: pa.Table) -> int:
        n = table.num_rows
        same = np.ones(n, bool)
        for name in self.keys + (RANGE_COL,):
            col = table.column(name)
            last = col[n - 1]
            eq = pc.is_null(col) if not last.is_valid else pc.equal(col, last).fill_null(False)
            same &= eq.to_numpy(zero_copy_only=False)
        differ = np.flatnonzero(~same)
        return int(differ[-1]) + 1 if differ.size else 0

    def _process(self, table: pa.Table, wl, options: dict) -> Iterator[pa.RecordBatch]:
        split = table.column(R_COL).is_valid().to_numpy(zero_copy_only=False)
        events = table.drop_columns(list(SHARD_EXTRA))
        whole = np.flatnonzero(~split)
        if whole.size:
            res = aggregate(events.take(pa.array(whole)), wl, require_all_types=False, **options)
            yield from self._wide(res, None)
        if split.any():
            idx = np.flatnonzero(split)
            part = table.take(pa.array(idx))
            starts = np.r_[0, np.flatnonzero(~_equal_to_next(part, self.keys + (RANGE_COL,))) + 1]
            ends = np.r_[starts[1:], part.num_rows]
            for a, b in zip(starts, ends):
                shard = part.slice(int(a), int(b - a))
                res = aggregate(shard.drop_columns(list(SHARD_EXTRA)), wl,
                                require_all_types=False, **options)
                own = tuple(shard.column(c)[0].as_py() for c in (RANGE_COL, T0_COL, R_COL,
                                                                  RMAX_COL))
                yield from self._wide(res, own)

    def _wide(self, results: dict[str, pa.Table], own) -> Iterator[pa.RecordBatch]:
        schema = self.wide_schema
        for i, name in enumerate(self.names):
            t = results[name]
            if own is not None:
                t = t.filter(_owned(t.column("window_start"), *own))
            n = t.num_rows
            if not n:
                continue
            cols = [pa.array([name] * n, pa.string())]
            for k, s in enumerate(self.schemas):
                for j, f in enumerate(s):
                    cols.append(t.column(j).combine_chunks().cast(f.type) if k == i
                                else pa.nulls(n, f.type))
            yield from pa.Table.from_arrays(cols, schema=schema).to_batches()


def _equal_to_next(table: pa.Table, names: tuple[str, ...]) -> np.ndarray:
    """For rows 0..n-2: whether row i has the same values as row i+1 in `names`."""
    n = table.num_rows
    same = np.ones(max(n - 1, 0), bool)
    for name in names:
        col = table.column(name).combine_chunks()
        a, b = col.slice(0, n - 1), col.slice(1)
        eq = pc.equal(a, b).fill_null(False).to_numpy(zero_copy_only=False)
        both_null = (pc.is_null(a).to_numpy(zero_copy_only=False)
                     & pc.is_null(b).to_numpy(zero_copy_only=False))
        same &= eq | both_null
    return same


def range_of(ticks: np.ndarray, t0, R, rmax: int) -> np.ndarray:
    """The time range of each tick: floor((t - t0) / R) clamped to [0, rmax]; the same formula the
    driver gives Spark (integer division for integer ticks), so both sides agree at boundaries."""
    if ticks.dtype.kind == "i":
        r = (ticks - np.int64(t0)) // np.int64(R)
    else:
        r = np.floor((ticks - t0) / R)
    return np.clip(r, 0, rmax).astype(np.int64)


def _owned(starts: pa.ChunkedArray, r: int, t0, R, rmax: int) -> pa.Array:
    """Windows whose start falls in the shard's range."""
    ticks = starts.cast(pa.int64()) if pa.types.is_timestamp(starts.type) else starts
    return pa.array(range_of(ticks.to_numpy(), t0, R, rmax) == r)

"""A stream of event batches answered in bounded memory (docs/architecture.md section 4).

A window's results depend only on the events inside it, and windows are aligned to multiples of
their slide, never to the data, so a stream in time order can be cut anywhere. `Stream` gathers
batches until `rows_per_chunk` new rows, cuts at their latest time T and answers the buffer with
`evaluate`: of its windows, those ending in (previous cut, T] are final, since each of their
events is earlier than T and later batches may not go back before T. The buffer then keeps only
the events a later window can hold (from T minus the longest WITHIN on), so memory holds one
chunk and one window of events, however long the stream; each chunk re-reads the window of
events before it, which is the price of the cut.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_hamlet.engine.evaluate import evaluate
from gpu_hamlet.engine.events import check_columns, first_null, used_columns, warn_absent_types
from gpu_hamlet.engine.options import Options
from gpu_hamlet.engine.sharing import RunStats, start_stats
from gpu_hamlet.errors import EventDataError
from gpu_hamlet.query.parser import as_workload
from gpu_hamlet.query.plan import Windowing
from gpu_hamlet.query.schema import as_stored, decoded, in_result_order, stored
from gpu_hamlet.query.time_axis import TimeAxis, column_ticks
from gpu_hamlet.query.workload import Workload


def aggregate_stream(
    batches: Iterable[pa.RecordBatch | pa.Table],
    workload: Workload | str,
    *,
    rows_per_chunk: int = 1_000_000,
    backend: str = "auto",
    sharing: str = "dynamic",
    numeric: str = "exact",
    on_overflow: str = "error",
    time_col: str = "time",
    type_col: str = "type",
    stats: RunStats | None = None,
) -> dict[str, pa.Table]:
    """`aggregate` over batches that arrive in time order (a `pa.RecordBatchReader`, a
    generator of tables), holding about `rows_per_chunk` events and one window's at a time.

    Every event must be at or after the time where the stream was last cut (the latest time of
    the chunk before); within a chunk the order is free. The results are those of `aggregate`
    over the whole stream, in its order (floats within their stated error: a chunk may take
    another route for a sliding window, docs/semantics.md section 12)."""
    options = Options(backend, sharing, numeric, on_overflow, time_col, type_col)
    start_stats(stats)
    if (
        not isinstance(rows_per_chunk, int)
        or isinstance(rows_per_chunk, bool)
        or rows_per_chunk < 1
    ):
        raise ValueError(f"rows_per_chunk must be a positive int, got {rows_per_chunk!r}")
    wl = as_workload(workload)
    if isinstance(batches, (pa.Table, pa.RecordBatch)) or _is_data_frame(batches):
        # (iterating one would give its columns, named as batches of the wrong type)
        raise EventDataError(
            f"aggregate_stream reads an iterable of batches (a RecordBatchReader, a list or a "
            f"generator of Tables), not one {type(batches).__name__}: pass [events], or call "
            f"aggregate"
        )
    if isinstance(batches, (str, bytes, os.PathLike)):  # (a str iterates its characters)
        raise EventDataError(
            f"aggregate_stream reads an iterable of batches, not a path ({batches!r}): pass "
            "pyarrow.parquet.ParquetFile(path).iter_batches() or "
            "pyarrow.dataset.dataset(path).to_batches(), or call aggregate"
        )
    if not isinstance(batches, Iterable):  # (a bare TypeError: 'NoneType' is not iterable)
        raise EventDataError(
            f"aggregate_stream reads an iterable of batches (a RecordBatchReader, a list or a "
            f"generator of Tables), not {type(batches).__name__}"
        )
    stream = Stream(wl, options, rows_per_chunk, stats)
    for batch in batches:
        stream.add(batch)
    return stream.finish(getattr(batches, "schema", None))


class Stream:
    """The buffer, the last cut and the final windows so far of `aggregate_stream`."""

    def __init__(
        self, wl: Workload, options: Options, rows_per_chunk: int, stats: RunStats | None
    ) -> None:
        self.wl, self.options, self.rows_per_chunk, self.stats = wl, options, rows_per_chunk, stats
        self.schema: pa.Schema | None = None
        self.axis: TimeAxis | None = None
        self.horizon: int | float = 0  # the longest WITHIN, in ticks
        self.buffer: list[pa.Table] = []
        self.new_rows = 0  # rows added since the last cut
        self.seen = 0  # rows of the stream so far (to name a row at fault)
        self.cut: int | float | None = None  # later events may not be earlier than this
        self.done: int | float | None = None  # the windows ending here or before are final
        self.types: set[str] = set()
        self.results: dict[str, list[pa.Table]] = {q.name: [] for q in wl}

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        if not isinstance(table, pa.Table):
            raise EventDataError(
                f"aggregate_stream reads pyarrow RecordBatches or Tables; batch at row "
                f"{self.seen} is a {type(batch).__name__}"
            )
        if self.schema is None:
            self._start(table.schema)
        elif not table.schema.equals(self.schema):
            raise EventDataError(
                f"the batch at row {self.seen} of the stream has another schema than the first "
                f"batch: {_difference(table.schema, self.schema)}"
            )
        given = table.num_rows
        table, rows = self._read(table)
        ticks = column_ticks(table.column(self.options.time_col))
        if self.cut is not None and ticks.size:
            early = np.flatnonzero(ticks < self.cut)
            if early.size:
                i = int(early[0])
                raise EventDataError(
                    f"row {self.seen + (i if rows is None else rows[i])} of the stream: "
                    f"{self.options.time_col} "
                    f"{table.column(self.options.time_col)[i]} is earlier than "
                    f"{self._show(self.cut)}, where the stream was cut after the chunk before; "
                    f"aggregate_stream needs the batches in time order"
                )
        self.buffer.append(table)
        self.seen += given  # (rows `_read` dropped count: later errors name rows of the stream)
        self.new_rows += table.num_rows
        if self.new_rows >= self.rows_per_chunk:
            self._chunk(final=False)

    def _read(self, table: pa.Table) -> tuple[pa.Table, np.ndarray | None]:
        """The batch as the buffer holds it, and each of its rows' row in the batch (None: the
        same rows): only the
        columns the workload reads, as the types the engine reads them (Arrow filters no
        string_view column, nor a run-end encoded one the workload does not read; section 1 of
        docs/semantics.md), and without the events of types no pattern names where their times
        are null, NaN or infinite (`aggregate` drops such events before it reads a time). A
        null type, time or non-finite time left is an error naming its row of the stream (a
        chunk's own row numbers would mislead)."""
        time_col, type_col = self.options.time_col, self.options.type_col
        read = pa.Table.from_arrays(
            [as_stored(table.column(c)) for c in self.columns], schema=self.read_schema
        )
        rows = None  # every row of the batch, in order
        if read.column(type_col).null_count:
            at = self.seen + first_null(read.column(type_col))
            raise EventDataError(f"row {at} of the stream: its type ('{type_col}') is null")
        time = read.column(time_col)
        ticks = None if time.null_count else column_ticks(time)
        if ticks is None or (ticks.dtype.kind == "f" and not np.isfinite(ticks).all()):
            types = decoded(read.column(type_col))
            used = pc.is_in(types, value_set=self.used_types)
            # (the dropped events' types are present all the same: `finish`'s warning names them)
            self.types.update(pc.unique(pc.filter(types, pc.invert(used))).to_pylist())
            rows = np.flatnonzero(used.to_numpy(zero_copy_only=False))
            read = read.take(pa.array(rows))
            time = read.column(time_col)
            if time.null_count:
                at = self.seen + rows[first_null(time)]
                raise EventDataError(f"row {at} of the stream: its time ('{time_col}') is null")
            bad = np.flatnonzero(~np.isfinite(column_ticks(time)))
            if bad.size:
                at = self.seen + rows[bad[0]]
                raise EventDataError(
                    f"row {at} of the stream: its time ('{time_col}') is {time[int(bad[0])]}, "
                    f"not a finite number"
                )
        return read, rows

    def finish(self, schema: pa.Schema | None) -> dict[str, pa.Table]:
        """The last chunk answered, and every query's final windows in `aggregate`'s order."""
        if self.schema is None:
            if schema is None:
                raise EventDataError("aggregate_stream got no batches, so no schema to answer")
            self._start(schema)
            self.buffer.append(schema.empty_table())
        self._chunk(final=True)
        if self.seen:
            warn_absent_types(self.wl, self.types, self.options.type_col, stacklevel=3)
        out = {}
        for q in self.wl:
            parts = self.results[q.name]  # each in result order: one needs no sort
            out[q.name] = (
                parts[0] if len(parts) == 1 else in_result_order(pa.concat_tables(parts), q.groupby)
            )
        return out

    def _start(self, schema: pa.Schema) -> None:
        self.schema = schema
        # (every batch has this schema: its columns are checked once, here)
        self.axis = check_columns(schema, self.wl, self.options.time_col, self.options.type_col)
        self.horizon = _horizon(self.wl, self.axis)
        self.columns = list(dict.fromkeys([self.options.time_col, self.options.type_col]))
        self.columns += [c for c in used_columns(self.wl) if c not in self.columns]
        # Nullable whatever the schema declares: Arrow holds a null in a column declared not
        # nullable, which `aggregate` reads as a null, and every chunk must plan for one (a
        # chunk's plan trusts its schema, `prepare_events`: the stream refused what `aggregate`
        # answered).
        self.read_schema = pa.schema(
            [
                schema.field(c).with_type(stored(schema.field(c).type)).with_nullable(True)
                for c in self.columns
            ]
        )
        self.used_types = pa.array(sorted({t for q in self.wl for t in q.event_types}), pa.string())

    def _chunk(self, final: bool) -> None:
        """Answer the buffer; keep its final windows and the events later windows need."""
        events = pa.concat_tables(self.buffer)
        ticks = column_ticks(events.column(self.options.time_col))
        # (Python numbers: an unsigned tick minus the horizon wrapped below zero)
        cut = ticks.max().item() if ticks.size else self.cut
        done = low = cut
        assert self.axis is not None, "the schema is known before a chunk"
        if cut is not None:
            # A float window end may round onto the cut: leave such windows to the next chunk.
            # Its bounds and panes are a few float64 roundings off; 2^-40 of the magnitude is
            # thousands of them (1e-9 held 1.7 s of events past each cut at epoch seconds).
            done = cut - 2.0**-40 * (abs(cut) + self.horizon) if self.axis.is_float else cut
            low = done - self.horizon
            if pa.types.is_float32(self.axis.arrow_type):
                # float32 results round a window's bounds by up to 2^-24 of them: a window
                # whose end rounds above `done` may start that much before `done - horizon`.
                low -= 2.0**-22 * (abs(cut) + self.horizon)
        one = None if self.stats is None else RunStats()
        axis, answered, until = self.axis, self.done, None if final else done

        def asked(w: Windowing, start: np.ndarray, end: np.ndarray) -> np.ndarray:
            """The windows the chunks before did not answer (the buffer holds only their last
            events) and, but in the last chunk, final here (a window the cut splits has only
            some of its events): a SUM over part of a window's values of both signs may
            overflow where the whole does not. By their ends as the tables show them."""
            shown = column_ticks(axis.to_arrow(end))
            keep = np.ones(shown.shape[0], bool)
            if answered is not None:
                keep &= shown > answered
            if until is not None:
                keep &= shown <= until
            return keep

        res = evaluate(
            events, self.wl, self.options, stats=one, part=True, seen_types=self.types, asked=asked
        )
        if self.stats is not None and one is not None:
            self.stats.add(one)
        for name, table in res.items():  # (an empty table kept per chunk and query grew the
            parts = self.results[name]  # memory by 5 KB each: 5,000 chunks of no result, 55 MB)
            if table.num_rows or not parts:
                parts.append(table)
        if final or done is None:
            return
        self.buffer = [events.filter(pa.array(ticks >= low))]
        self.cut, self.done, self.new_rows = cut, done, 0

    def _show(self, ticks: Any) -> str:
        assert self.axis is not None, "the schema is known before a cut"
        return str(self.axis.to_arrow(np.asarray([ticks]))[0])


@functools.lru_cache(maxsize=64)
def _horizon(wl: Workload, axis: TimeAxis) -> int | float:
    """The longest WITHIN in ticks. Cached: a stream of one small chunk computed it per query
    (exact fractions, about 1 us each) at every call."""
    return max((axis.ticks(q.within_ms, q, "WITHIN") for q in wl), default=0)


def _difference(schema: pa.Schema, first: pa.Schema) -> str:
    """What sets a batch's schema apart from the first's, in one line (two whole schemas hid a
    nullability flag among their lines)."""
    names, first_names = schema.names, first.names
    for name in first_names:
        if name not in names:
            return f"it lacks column '{name}'"
    for name in names:
        if name not in first_names:
            return f"it adds column '{name}'"
    if names != first_names:
        return f"its columns are {names}, not {first_names}"
    for f, g in zip(schema, first):
        if not f.type.equals(g.type):
            return f"column '{f.name}' is {f.type}, not {g.type}"
        if f.nullable != g.nullable:
            shown = "nullable" if f.nullable else "not nullable"
            return f"column '{f.name}' is {shown}, unlike the first batch's"
    return f"{schema}, not {first}"  # (field metadata)


def _is_data_frame(x: Any) -> bool:
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is optional
        return False
    return isinstance(x, pd.DataFrame)

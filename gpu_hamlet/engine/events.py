"""Turning user input (Arrow, pandas) into validated arrays the engine can sort and scan.

Everything that can be wrong with the data is found here, before any kernel runs, and reported
with the column (and query) at fault.
"""

from __future__ import annotations

import difflib
import functools
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from gpu_hamlet.errors import AbsentTypeWarning, EventDataError, WorkloadError
from gpu_hamlet.host_threads import cpu_threads, host_map
from gpu_hamlet.names import shown
from gpu_hamlet.query.schema import as_stored, decoded, stored, unencoded, values_type
from gpu_hamlet.query.time_axis import TimeAxis, time_axis
from gpu_hamlet.query.workload import Query, Workload

#: Type columns shorter than twice this are encoded in one thread.
ENCODE_SLICE = 500_000


@dataclass
class EventFrame:
    """The events a workload needs, validated: only used columns, only used types' rows."""

    table: pa.Table
    time: np.ndarray
    axis: TimeAxis
    type_codes: np.ndarray  # int32 index into type_names
    type_names: list[str]
    type_counts: np.ndarray | None = None  # events per type code, where they were counted
    part: bool = False  # one part of a larger dataset (a Spark task's, a stream chunk's)

    @property
    def n(self) -> int:
        return self.table.num_rows

    def code_of(self, type_name: str) -> int:
        try:
            return self.type_names.index(type_name)
        except ValueError:
            return -1

    def count_of(self, type_name: str) -> int:
        """The events of a type (0 when it is absent)."""
        code = self.code_of(type_name)
        if code < 0:
            return 0
        if self.type_counts is not None:
            return int(self.type_counts[code])
        return int(np.count_nonzero(self.type_codes == code))


def to_arrow_table(events: Any) -> pa.Table:
    """Accept a pyarrow Table, RecordBatch, RecordBatchReader or dataset, Parquet (a path to a
    file or folder, or a `pyarrow.parquet.ParquetFile`), or a pandas DataFrame (its NaN read as
    null, as pandas means it and as Spark's createDataFrame reads it: docs/semantics.md
    section 1). A Spark DataFrame is refused with the way to run it on Spark: collecting it to
    this process is what `trend_aggregate` avoids."""
    if isinstance(events, pa.Table):
        return events
    if isinstance(events, pa.RecordBatch):
        return pa.Table.from_batches([events])
    if isinstance(events, pa.RecordBatchReader):
        return events.read_all()
    if isinstance(events, (str, os.PathLike)):
        return _parquet(events)
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    if isinstance(events, ds.Dataset):
        return events.to_table()
    if isinstance(events, pq.ParquetFile):
        return events.read()
    if type(events).__name__ == "DataFrame" and type(events).__module__.startswith("pyspark."):
        raise EventDataError(
            "events is a Spark DataFrame: run the workload on Spark with "
            "gpu_hamlet.spark.trend_aggregate(df, workload, ...), or collect it to this process "
            "first with df.toArrow()"
        )
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is optional
        pd = None
    if pd is not None and isinstance(events, pd.DataFrame):
        try:
            table = pa.Table.from_pandas(events, preserve_index=False)
        except (ValueError, TypeError, pa.ArrowNotImplementedError) as exc:  # (duplicate names
            # and sparse columns raise plain ValueError and TypeError; Arrow's derive from them)
            raise EventDataError(  # (Arrow names the column in its message)
                f"the pandas events do not convert to Arrow: {exc}; give each column its own "
                f"name and one type, in dense data"
            ) from exc
        # pandas < 3 keeps strings in object columns, and an object column without a value
        # reaches Arrow with no type: strings are its only sensible reading.
        for i, field in enumerate(table.schema):
            if pa.types.is_null(field.type) and events[field.name].dtype == object:
                table = table.set_column(i, field.name, table.column(i).cast(pa.string()))
        return table
    raise EventDataError(
        "events must be a pyarrow Table, RecordBatch, RecordBatchReader or dataset, a Parquet "
        f"file or folder (its path), or a pandas DataFrame, not {type(events).__name__}"
    )


def _parquet(path: str | os.PathLike) -> pa.Table:
    """The Parquet file or folder at `path` (or a URI Arrow's filesystems read, such as s3://),
    read as written (no glob), a folder's `key=value` subfolders as columns of the types their
    values show (as Spark reads them: `pq.read_table` made them dictionaries, which SUM and AVG
    refuse); files whose names start with `_` or `.` (Spark's `_SUCCESS`, checksums) are not
    read. An error names the path."""
    import pyarrow.dataset as ds

    where = os.fspath(path)
    if "://" not in str(where) and not os.path.exists(where):
        raise EventDataError(f"events path '{where}' does not exist")
    try:
        data = ds.dataset(where, format="parquet", partitioning="hive")
        if not data.files:
            raise EventDataError(f"events path '{where}' holds no Parquet files")
        for part in data.get_fragments():  # (Arrow would take the folder's value)
            keys = ds.get_partition_keys(part.partition_expression)
            both = sorted(set(keys) & set(part.physical_schema.names)) if keys else []
            if both:
                raise EventDataError(
                    f"events path '{where}': column {', '.join(map(repr, both))} is both in the "
                    f"file {part.path} and in its folder's name (key=value); Spark refuses such "
                    "a dataset too: drop the column from the files or rename the folders"
                )
        return data.to_table()
    except FileNotFoundError:  # (a URI's)
        raise EventDataError(f"events path '{where}' does not exist") from None
    except (pa.ArrowException, OSError) as exc:  # (ArrowTypeError: files of clashing types)
        raise EventDataError(
            f"events path '{where}' is not Parquet that Arrow can read ({exc}); read CSV or JSON "
            "with pyarrow.csv or pyarrow.json and pass the table"
        ) from None


def require_column(names: list[str], name: str, what: str, query: Query | None = None) -> None:
    """The column is among the events' column `names`, once: of two columns of one name (a
    join's output, say) neither is the one meant. The Spark driver checks a DataFrame's columns
    with it too, so `run` names the query at fault as `aggregate` does."""
    count = names.count(name)
    if count != 1:
        who = f"query {shown(query.name)}: " if query is not None else ""
        raise EventDataError(
            f"{who}{what} column '{name}' is "
            + (f"in the events {count} times" if count else "missing from the events")
            + f" (columns: {', '.join(names)})"
        )


def used_columns(workload: Workload) -> dict[str, Query]:
    """Every attribute column the workload reads, with the first query that reads it."""
    cols: dict[str, Query] = {}
    for q in workload:
        names = list(q.partition_attrs) + [f.attr for f in q.filters]
        names += [a.attr for a in q.aggregates if a.attr is not None]
        names += [a for c in q.next_conditions for a in (c.attr, c.next_attr)]
        for name in names:
            cols.setdefault(name, q)
    return cols


def check_columns(schema: pa.Schema, workload: Workload, time_col: str, type_col: str) -> TimeAxis:
    """The checks of the events that need no rows: every column the workload reads is there,
    is no time or type column and of no extension type, the time column has a type times can
    have (its TimeAxis is returned), and the type column holds strings. Cached (a failed check
    raises each time): small calls repeat it with the same schema and workload. A schema with
    an extension type Python cannot hash (as pyarrow's docs define one) is checked uncached: a
    column nothing reads made every call a TypeError."""
    try:
        return _checked_columns(schema, workload, time_col, type_col)
    except TypeError:
        try:
            hash(schema)
        except TypeError:
            return _checked_columns.__wrapped__(schema, workload, time_col, type_col)
        raise


@functools.lru_cache(maxsize=256)
def _checked_columns(
    schema: pa.Schema, workload: Workload, time_col: str, type_col: str
) -> TimeAxis:
    require_column(schema.names, time_col, "time")
    require_column(schema.names, type_col, "type")
    for name, q in used_columns(workload).items():
        if name in (time_col, type_col):
            raise WorkloadError(
                f"'{name}' is the {'time' if name == time_col else 'type'} column and cannot be "
                f"used as an attribute",
                query=q.name,
            )
        require_column(schema.names, name, "attribute", q)
        t = schema.field(name).type
        if isinstance(t, pa.BaseExtensionType):  # (Arrow's kernels have none for most)
            raise WorkloadError(
                f"column '{name}' is of the extension type {t.extension_name}, which the engine "
                f"does not read: cast it to its storage type {t.storage_type} first",
                query=q.name,
            )
    for q in workload:
        for name in q.partition_attrs:
            t = schema.field(name).type
            if pa.types.is_nested(values_type(t)):
                raise WorkloadError(
                    f"GROUPBY and [equivalence] need columns of single values, but '{name}' is {t}",
                    query=q.name,
                )
    axis = time_axis(unencoded(schema.field(time_col).type), time_col)
    type_type = schema.field(type_col).type
    names_type = stored(values_type(type_type))
    if not (pa.types.is_string(names_type) or pa.types.is_large_string(names_type)):
        raise EventDataError(
            f"type column '{type_col}' must hold strings, not {type_type} "
            f"(cast it, e.g. to names like 'T2' for integer types)"
        )
    return axis


def prepare_events(
    events: Any, workload: Workload, time_col: str, type_col: str, part: bool = False
) -> EventFrame:
    """Validate the events against the workload and keep only what it needs.

    A pattern type absent from non-empty events is no error: its query has no trends, and a
    warning names the type (a typo, perhaps). `part`: the events are one part of a larger dataset
    (a Spark task's), which is checked and warned about whole; the columns' nullability then
    stays the schema's, so every part gets the same plan (gpu_hamlet/query/plan.py), where a whole
    dataset's columns without nulls are marked so."""
    table = to_arrow_table(events)
    axis = check_columns(table.schema, workload, time_col, type_col)
    attrs = used_columns(workload)
    # (string_view: as large_string; a null in a dictionary: as a null index, which it means)
    type_arr = _without_null_entries(as_stored(table.column(type_col)))
    if type_arr.null_count:
        raise EventDataError(
            f"type column '{type_col}' has {type_arr.null_count} null value(s), the first at row "
            f"{first_null(type_arr)}"
        )

    # One dictionary encoding gives the types present, the rows to keep (types some query
    # uses) and the type codes: lookups per distinct name, not per row.
    enc = _encoded(type_arr)
    names = enc.dictionary.to_pylist()
    idx = enc.indices.to_numpy(zero_copy_only=False)
    used_types = {t for q in workload for t in q.event_types}
    count, rows, codes = _kept(idx, np.asarray([n in used_types for n in names], np.bool_))
    present = {n for n, c in zip(names, count) if c}
    if table.num_rows and not part:
        warn_absent_types(workload, present, type_col, stacklevel=5)  # (the user: aggregate, 5 up)
    # The type column is not filtered as strings: it comes back as the kept rows' codes over
    # the same names (a dictionary array), which is what every later step reads.
    # Taking the rows is about 3x faster than filtering by a mask that alternates at random.
    taken = None if rows.shape[0] == len(table) else pa.array(rows)

    def kept(col: pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        col = _without_null_entries(as_stored(col))
        col = col if taken is None else col.take(taken)
        # (Arrow cannot combine zero chunks of a dictionary of dates or decimals.)
        return col.combine_chunks() if col.num_chunks else col

    names_used = [time_col, *attrs]
    cols = dict(
        zip(names_used, host_map(kept, [table.column(c) for c in names_used], rows=len(table)))
    )
    same = taken is None and enc.type.index_type == pa.int32()  # (the codes' type)
    types = enc if same else pa.DictionaryArray.from_arrays(pa.array(codes), enc.dictionary)
    fields = [
        table.schema.field(time_col).with_type(cols[time_col].type),  # (a decoded run-end one)
        table.schema.field(type_col).with_type(types.type),
    ]
    for a in attrs:  # a whole dataset's columns without nulls are marked so (see above)
        f = table.schema.field(a).with_type(cols[a].type)  # (its `stored` type)
        if part and not f.nullable and cols[a].null_count:  # (the plan would trust the schema)
            raise EventDataError(
                f"column '{a}' is declared not nullable, but {cols[a].null_count} of its values "
                f"are null, the first at row {int(rows[first_null(cols[a])])}"
            )
        fields.append(f if part else f.with_nullable(cols[a].null_count > 0))
    sub = pa.Table.from_arrays(
        [cols[time_col], types, *(cols[a] for a in attrs)], schema=pa.schema(fields)
    )
    time = sub.column(time_col)
    if time.null_count:
        at = int(rows[first_null(time)])  # (a row of the events as given)
        raise EventDataError(
            f"time column '{time_col}' has {time.null_count} null value(s), the first at row {at}"
        )
    if axis.is_float:
        tnp = time.to_numpy().astype(np.float64, copy=False)
        if not np.all(np.isfinite(tnp)):
            raise EventDataError(f"time column '{time_col}' has NaN or infinite values")
    else:
        tnp = (time if time.type == pa.int64() else time.cast(pa.int64())).to_numpy()
    return EventFrame(sub, np.ascontiguousarray(tnp), axis, codes, names, count, part)


def first_null(col: pa.ChunkedArray) -> int:
    """The row of a column's first null (it has one)."""
    return int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])


def _without_null_entries(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary column whose dictionaries hold nulls, with those nulls as null indices
    (the same values): Arrow cannot combine such chunks, nor take from them."""
    if not pa.types.is_dictionary(col.type):
        return col
    if pa.types.is_null(col.type.value_type):  # (Arrow unifies no dictionaries of null values)
        indices = pa.nulls(len(col), col.type.index_type)
        return pa.chunked_array([pa.DictionaryArray.from_arrays(indices, pa.nulls(0))], col.type)
    if not any(c.dictionary.null_count for c in col.chunks):
        return col
    index_type = col.type.index_type
    chunks = []
    for c in col.chunks:
        enc = pc.dictionary_encode(decoded(c))
        chunks.append(pa.DictionaryArray.from_arrays(enc.indices.cast(index_type), enc.dictionary))
    return pa.chunked_array(chunks, col.type)


@njit(cache=True, nogil=True)
def _kept(idx: np.ndarray, used: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From each row's type code: the rows per code, and the rows of `used` codes with their
    codes, in one pass. Every row writes, and only a used one moves on: types alternate at
    random, and a branch per row cost more than the pass."""
    count = np.zeros(used.shape[0], np.int64)
    rows = np.empty(idx.shape[0] + 1, np.int64)
    codes = np.empty(idx.shape[0] + 1, np.int32)
    m = 0
    for i in range(idx.shape[0]):
        c = idx[i]
        count[c] += 1
        rows[m] = i
        codes[m] = c
        m += used[c]
    return count, rows[:m], codes[:m]


#: The absent types a warning names (`warn_absent_types`), the others counted: a pattern of
#: 3,000 types over other events named every one of them in one warning.
ABSENT_NAMED = 10


def warn_absent_types(
    workload: Workload, present: Iterable[str], type_col: str, stacklevel: int = 2
) -> None:
    """One warning per query whose pattern has types the data lacks (the query has no trends
    there), naming them and, where a present type is close in case or spelling, that one.
    `stacklevel` counts the calls between the user's and this one, as for warnings.warn."""
    present = sorted(present)
    known = set(present)
    for q in workload:
        absent = [t for t in q.types if t not in known]
        if not absent:
            continue
        hints = []
        for t in absent[:ABSENT_NAMED]:
            close = [p for p in present if p.lower() == t.lower()] or difflib.get_close_matches(
                t, present, n=1, cutoff=0.6
            )
            hints.append(f"'{t}' (did you mean '{close[0]}'?)" if close else f"'{t}'")
        if len(absent) > ABSENT_NAMED:
            hints[-1] += f" and {len(absent) - ABSENT_NAMED} more"
        listed = ", ".join(present[:20]) + (", ..." if len(present) > 20 else "")
        warnings.warn(
            AbsentTypeWarning(
                f"query {shown(q.name)}: event type{'s' if len(absent) > 1 else ''} "
                f"{', '.join(hints)} of its pattern never occur{'' if len(absent) > 1 else 's'} "
                f"in column '{type_col}', so the query has no trends there (types present: "
                f"{listed})"
            ),
            stacklevel=stacklevel + 1,
        )


def _encoded(col: pa.ChunkedArray) -> pa.DictionaryArray:
    """The type column dictionary-encoded with distinct names; an encoded column (the Spark job
    ships type codes) is used as it is."""
    if pa.types.is_dictionary(col.type):
        enc = pa.table({"t": col}).unify_dictionaries().column(0).combine_chunks()
        if len(pc.unique(enc.dictionary)) == len(enc.dictionary):
            return enc
        col = col.cast(col.type.value_type)
    # Hashing strings is the longest step of preparing large inputs: slices of the column are
    # encoded on the host's threads, and their dictionaries unified in order, which keeps
    # Arrow's first-appearance codes.
    n = len(col)
    threads = cpu_threads() if n >= 2 * ENCODE_SLICE else 1
    if threads < 2:
        return pc.dictionary_encode(col).combine_chunks()
    step = -(-n // threads)
    slices = [col.slice(i, step) for i in range(0, n, step)]
    chunks = [c for part in host_map(pc.dictionary_encode, slices) for c in part.chunks]
    return pa.table({"t": pa.chunked_array(chunks)}).unify_dictionaries().column(0).combine_chunks()

"""Result schemas: each query's output table type, from the query, the events' schema and the
numeric mode alone (docs/semantics.md sections 5 and 7).

No rows are needed, so the Spark driver can declare the results before any task runs, and the
engine builds its tables to these types: one definition for both.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_hamlet.errors import WorkloadError
from gpu_hamlet.query.time_axis import TimeAxis
from gpu_hamlet.query.workload import Aggregate, Query


def attr_kind(arrow_type: pa.DataType) -> str:
    """'int', 'decimal' or 'float' for summable types; 'other' for the rest."""
    if pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type):
        return "int"
    if pa.types.is_decimal(arrow_type):
        return "decimal"
    if pa.types.is_floating(arrow_type):
        return "float"
    return "other"


def values_type(t: pa.DataType) -> pa.DataType:
    """The type of a column's values: a dictionary's or a run-end encoding's value type (a
    run-end encoding of a dictionary: the dictionary's), any other type itself."""
    t = unencoded(t)
    return unencoded(t.value_type) if pa.types.is_dictionary(t) else t


def unencoded(t: pa.DataType) -> pa.DataType:
    """A run-end encoded type's values type (the engine decodes such columns, `as_stored`), any
    other type itself."""
    return t.value_type if pa.types.is_run_end_encoded(t) else t


def has_order(t: pa.DataType) -> bool:
    """Whether values of type `t` (a dictionary's: its values) have an order Arrow sorts and
    ranks by, as MIN, MAX and NEXT conditions need: lists, structs, maps, unions and intervals
    have none."""
    t = values_type(t)
    return not (pa.types.is_nested(t) or pa.types.is_interval(t))


def value_type(agg: Aggregate, events: pa.Schema, numeric: str, query: str) -> pa.DataType:
    """The type of an aggregate's column. Exact counts and sums of integers or decimals are
    decimal128(38, scale) (`exact`), decimal strings (`bigint`) or float64 (`float`); AVG and
    sums of floats are float64; MIN and MAX keep the column's type. SUM and AVG of a column that
    is not a number have none: a WorkloadError naming `query`."""
    if agg.attr is None:  # COUNT(*), COUNT(E)
        t, kind = None, "int"
    else:
        t = stored(events.field(agg.attr).type)
        if agg.func in ("MIN", "MAX"):
            if not has_order(t):
                raise WorkloadError(
                    f"{agg} needs a column with an order, but '{agg.attr}' is {t}", query=query
                )
            return t
        kind = attr_kind(t)
        if kind == "other":
            hint = ""
            if attr_kind(values_type(t)) != "other":  # (sums read no dictionary)
                hint = f"; decode it first (cast the column to {values_type(t)})"
            raise WorkloadError(
                f"{agg} needs a numeric column, but '{agg.attr}' is {t}{hint}", query=query
            )
    if agg.func == "AVG" or kind == "float" or numeric == "float":
        return pa.float64()
    if numeric == "bigint":
        return pa.string()
    scale = t.scale if t is not None and kind == "decimal" else 0
    if scale > 38:  # (Arrow neither formats nor converts such a decimal128; Spark has none)
        raise WorkloadError(
            f"{agg} over '{agg.attr}' ({t}) would be decimal(38, {scale}), a scale beyond "
            "decimal(38)'s digits; use numeric='bigint' for exact digits, or numeric='float'",
            query=query,
        )
    return pa.decimal128(38, scale)


def result_schema(query: Query, axis: TimeAxis, events: pa.Schema, numeric: str) -> pa.Schema:
    """The schema of `query`'s result table over events of schema `events` whose time column has
    `axis`: the GROUPBY columns of their input types, window_start and window_end of the time
    column's type, then one column per RETURN aggregate (`value_type`); a column of a type the
    engine reads as another (`stored`) gives that type. Every column is
    nullable, as Arrow makes the columns of a table built from arrays."""
    fields = [pa.field(g, stored(events.field(g).type)) for g in query.groupby]
    fields += [pa.field(b, axis.arrow_type) for b in ("window_start", "window_end")]
    fields += [
        pa.field(a.name, value_type(a, events, numeric, query.name)) for a in query.aggregates
    ]
    return pa.schema(fields)


def decoded(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A dictionary column as its values, which filters, groups and sorting read (not the places
    of its dictionary); any other column as it is."""
    return col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col


#: The types a column of events is read as, where Arrow's kernels take no columns of its own
#: type: string_view and binary_view (no take, filter or sort) and float16 (no comparison, sum
#: or sort). Each holds every value of the other exactly.
_STORED = {
    pa.string_view(): pa.large_string(),
    pa.binary_view(): pa.large_binary(),
    pa.float16(): pa.float32(),
}


def stored(t: pa.DataType) -> pa.DataType:
    """The type the engine reads a column of type `t` as (`_STORED`, a dictionary's values too;
    any other type as it is): its GROUPBY and MIN/MAX results have that type too
    (docs/semantics.md section 5)."""
    if pa.types.is_dictionary(t):
        return pa.dictionary(t.index_type, stored(t.value_type), t.ordered)
    if pa.types.is_run_end_encoded(t):  # (Arrow takes, filters and sorts none)
        return stored(unencoded(t))
    return _STORED.get(t, t)


def as_stored(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """The column as its `stored` type (itself when it is that already: a cast costs a call). A
    dictionary's values are cast where they lie (Arrow casts no dictionary of float16 or
    string_view values)."""
    t = stored(col.type)
    if t == col.type:
        return col
    if pa.types.is_run_end_encoded(col.type):
        vt = col.type.value_type
        if not (pa.types.is_dictionary(vt) or vt in (pa.string_view(), pa.binary_view())):
            return as_stored(pc.run_end_decode(col))
        return pa.chunked_array([_run_end_decoded(c) for c in col.chunks], t)
    if pa.types.is_dictionary(t):
        chunks = [
            pa.DictionaryArray.from_arrays(c.indices, c.dictionary.cast(t.value_type))
            for c in col.chunks
        ]
        return pa.chunked_array(chunks, t)
    return col.cast(t)


def _run_end_decoded(c: pa.RunEndEncodedArray) -> pa.Array:
    """A run-end encoded chunk's values per row, as their `stored` type: Arrow decodes no
    run-end encoding of dictionaries or string_view values, so each row takes its run's value."""
    ends = c.run_ends.to_numpy(zero_copy_only=False)
    runs = np.searchsorted(ends, np.arange(c.offset, c.offset + len(c)), side="right")
    return as_stored(pa.chunked_array([c.values])).combine_chunks().take(pa.array(runs))


def empty_array(t: pa.DataType) -> pa.Array:
    """No values of type `t` (Arrow builds no empty dictionary of timestamps or decimals from a
    list)."""
    if pa.types.is_dictionary(t):
        return pa.DictionaryArray.from_arrays(
            pa.array([], t.index_type), pa.array([], t.value_type)
        )
    return pa.array([], t)


_DECIMALS = {32: pa.decimal32, 64: pa.decimal64, 128: pa.decimal128, 256: pa.decimal256}


def unscaled(col: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A decimal column's integers m (its values are m * 10^-scale): the same buffers read as
    a decimal of scale 0. Arrow's kernels refuse negative scales, and a scale above 38 puts
    10^38 below one ulp of the column's type."""
    t = _DECIMALS[col.type.bit_width](col.type.precision, 0)

    def one(c: pa.Array) -> pa.Array:
        return pa.Array.from_buffers(t, len(c), c.buffers(), c.null_count, c.offset)

    if isinstance(col, pa.ChunkedArray):
        return pa.chunked_array([one(c) for c in col.chunks], t)
    return one(col)


def widened(t: pa.DataType) -> pa.DataType:
    """decimal32 and decimal64 as decimal128 of the same precision and scale, which Arrow's
    hashing, ranking and sorting kernels take (they take no narrower decimal); any other type
    as it is."""
    if pa.types.is_decimal(t) and t.bit_width < 128:
        return pa.decimal128(t.precision, t.scale)
    return t


def in_result_order(
    table: pa.Table, groupby: tuple[str, ...], runs: np.ndarray | None = None
) -> pa.Table:
    """The rows of a result table by GROUPBY values, then window_start, ascending (Arrow's
    order: nulls last). Rows often come in that order already (integer groups are coded by
    rank, gpu_hamlet/engine/partitions.py): that is checked first, when the keys are integers
    or times without nulls, because sorting was half the cost of building a small result.
    `runs` (ascending, one per row): the rows of several tables one after another, each
    ordered within its run, in one check or sort (a fused run's queries, engine/fusion.py)."""
    if table.num_rows < 2:
        return table
    keys = [*groupby, "window_start"]
    cols = [table.column(k) for k in keys]
    if all(_plain_ordered(c) for c in cols):
        # adjacent rows equal on the keys so far (rows of two runs are decided already)
        undecided = np.ones(table.num_rows - 1, bool) if runs is None else runs[1:] == runs[:-1]
        for c in cols:
            v = c.to_numpy()
            step = v[1:] > v[:-1]
            if (undecided & (v[1:] < v[:-1])).any():
                break
            undecided &= ~step
        else:
            return table
    # (Arrow sorts no dictionary column: its values are sorted instead; the keys are named by
    # their place, so that the runs' column takes no user's name)
    by = ([] if runs is None else [pa.array(runs)]) + [decoded(c) for c in cols]
    names = [str(i) for i in range(len(by))]
    order = pc.sort_indices(pa.table(dict(zip(names, by))), [(n, "ascending") for n in names])
    return table.take(order)


def _plain_ordered(col: pa.ChunkedArray) -> bool:
    """Whether NumPy compares the column's values as Arrow orders them."""
    t = col.type
    return not col.null_count and (
        pa.types.is_integer(t) or pa.types.is_timestamp(t) or pa.types.is_date(t)
    )


__all__ = [
    "as_stored",
    "attr_kind",
    "decoded",
    "empty_array",
    "has_order",
    "in_result_order",
    "result_schema",
    "stored",
    "value_type",
    "values_type",
    "widened",
]

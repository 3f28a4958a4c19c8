"""The host half of predicates between adjacent events (`X.a op NEXT(Y).b`): the keys of each run
ranked, and every comparison turned into leaf ranges of a segment tree
(gpu_hamlet/core/adjacency.py runs the trees; docs/semantics.md section 2 the meaning).

Per class (the conditions of one pair of types X, Y) an event of type X *writes* its key (its X
attributes) and an event of type Y *reads* with its Y attributes. Within a run (a window), the
writers' and readers' keys are sorted together: '=' attributes first (a block of equal values),
then the ordering attribute. A writer's leaf is its key's place in that order; a reader's
comparison is one range of its block (two for '!='). Nulls compare false (the key is left out);
a NaN only satisfies '!=' (it sorts after every number, at the end of its block); -0.0 is 0.0.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_hamlet.core.adjacency import AdjacentRuns
from gpu_hamlet.core.recursions import EVENT
from gpu_hamlet.errors import WorkloadError
from gpu_hamlet.query.plan import Adjacency
from gpu_hamlet.query.schema import has_order, values_type, widened
from gpu_hamlet.query.workload import NextCondition, Query


def comparable_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type two columns are compared in, or None when they cannot be: equal types; integers
    as int64 (unsigned ones as uint64, uint64 with signed ones as a decimal); integers and
    decimals as a decimal wide enough for both types' digits; any number with a float as
    float64 (an integer that float64 cannot hold exactly is then an error); timestamps, times
    and durations in the finer unit (timestamps of two time zones as the UTC instants they
    hold; one with a zone and one without have no common clock); dates as date64; strings as
    large strings and binaries as large binaries (a value a finer unit cannot hold is then an
    error)."""
    a, b = values_type(a), values_type(b)
    if not (has_order(a) and has_order(b)):  # (lists, structs, ...: Arrow ranks none)
        return None
    if pa.types.is_null(a) or pa.types.is_null(b):  # all nulls: never adjacent
        return b if pa.types.is_null(a) else a
    if a == b:
        return a
    if pa.types.is_integer(a) and pa.types.is_integer(b):
        unsigned = [pa.types.is_unsigned_integer(t) for t in (a, b)]
        if all(unsigned):
            return pa.uint64()
        if pa.uint64() not in (a, b):
            return pa.int64()
    numbers = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal)
    if any(f(a) for f in numbers) and any(f(b) for f in numbers):
        if pa.types.is_floating(a) or pa.types.is_floating(b):
            return pa.float64()
        # (as decimal(38, s) an int64 column against a scale above 19 could not convert at all)
        digits = max(_integer_digits(t) for t in (a, b))
        scale = max(t.scale if pa.types.is_decimal(t) else 0 for t in (a, b))
        if digits + scale <= 38:
            return pa.decimal128(digits + scale, scale)
        return pa.decimal256(min(digits + scale, 76), scale)
    units = ("s", "ms", "us", "ns")
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        if a.tz != b.tz and not (a.tz and b.tz):
            return None
        return pa.timestamp(max(a.unit, b.unit, key=units.index), a.tz if a.tz == b.tz else "UTC")
    if pa.types.is_duration(a) and pa.types.is_duration(b):
        return pa.duration(max(a.unit, b.unit, key=units.index))
    if pa.types.is_time(a) and pa.types.is_time(b):
        return pa.time64("ns" if "ns" in (a.unit, b.unit) else "us")
    if pa.types.is_date(a) and pa.types.is_date(b):
        return pa.date64()
    for kind, common in ((_TEXT, pa.large_string()), (_BYTES, pa.large_binary())):
        if any(f(a) for f in kind) and any(f(b) for f in kind):
            return common
    return None


# (views are read as large strings and binaries: docs/semantics.md, "Input")
_TEXT = (pa.types.is_string, pa.types.is_large_string)
_BYTES = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_fixed_size_binary)


def _integer_digits(t: pa.DataType) -> int:
    """The decimal digits before the point that values of an integer or decimal type need."""
    if pa.types.is_decimal(t):
        return max(t.precision - t.scale, 1)
    return len(
        str(2**t.bit_width - 1 if pa.types.is_unsigned_integer(t) else 2 ** (t.bit_width - 1))
    )


def check_next(q: Query, cond: NextCondition, schema: pa.Schema) -> None:
    """A WorkloadError unless both columns of the condition exist and can be compared."""
    for attr in (cond.attr, cond.next_attr):
        if schema.get_field_index(attr) < 0:
            raise WorkloadError(
                f"{cond} reads column '{attr}', which the events do not have "
                f"(columns: {', '.join(schema.names)})",
                query=q.name,
            )
    ta, tb = schema.field(cond.attr).type, schema.field(cond.next_attr).type
    if comparable_type(ta, tb) is None:
        raise WorkloadError(
            f"{cond} compares column '{cond.attr}' of type {ta} with column '{cond.next_attr}' "
            f"of type {tb}, which cannot be compared",
            query=q.name,
        )


def check_next_values(
    q: Query, cond: NextCondition, table: pa.Table, kept: Callable[[Query, str], np.ndarray]
) -> None:
    """A WorkloadError where the condition compares an integer column with a float one as
    float64 and a value of an event q matches (of the condition's type, which q's filters keep:
    `kept(q, type)`, a row mask) does not convert exactly. Checked on every such event before
    anything runs, so that it does not depend on which rows pruning or sharing reach (it did:
    `static` ranked the whole set's rows, and raised where the other modes answered)."""
    a, b = table.schema.field(cond.attr).type, table.schema.field(cond.next_attr).type
    if comparable_type(a, b) != pa.float64():
        return
    for attr, t in ((cond.attr, cond.type), (cond.next_attr, cond.next_type)):
        col = table.column(attr)
        if pa.types.is_floating(values_type(col.type)):
            continue
        _converted(
            q, cond, [col.filter(pa.array(kept(q, t)))], (a, b), pa.float64(), f" of a {t} event"
        )


def _converted(
    q: Query,
    cond: NextCondition,
    values: list,
    types: tuple[pa.DataType, pa.DataType],
    typ: pa.DataType,
    of: str = "",
) -> list:
    """`values` cast to `typ`, the type the condition's columns (of `types`) compare in; a
    WorkloadError naming the query and condition where a value does not convert exactly."""
    try:
        return [pc.cast(x, typ) for x in values]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise WorkloadError(
            f"{cond} compares column '{cond.attr}' ({types[0]}) with column '{cond.next_attr}' "
            f"({types[1]}) as {typ}, and a value{of} does not convert exactly: {exc}",
            query=q.name,
        ) from None


def _joint_ranks(
    q: Query, cond: NextCondition, a: pa.Array, b: pa.Array
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dense ranks, null, NaN) of the writers' values `a` followed by the readers' `b`, in one
    order; NaN ranks after every number."""
    typ = comparable_type(a.type, b.type)
    assert typ is not None, "conditions are checked against the schema first (check_next)"
    typ = widened(typ)  # (Arrow ranks no decimal32 or decimal64)
    both = pa.concat_arrays(_converted(q, cond, [a, b], (a.type, b.type), typ))
    null = both.is_null().to_numpy(zero_copy_only=False)
    if pa.types.is_null(typ):
        return np.zeros(len(both), np.int64), null, np.zeros(len(both), bool)
    if pa.types.is_floating(typ):
        nan = pc.is_nan(both).fill_null(False).to_numpy(zero_copy_only=False)
    else:
        nan = np.zeros(len(both), bool)
    ranks = pc.rank(both, sort_keys="ascending", tiebreaker="dense")
    return ranks.to_numpy().astype(np.int64), null, nan


class KeyRanks:
    """The joint ranks of a condition's values on a fixed set of event rows, computed once and
    read for any writers and readers among them (with repeats). A basis pass of shared windows
    (engine/window_sharing.py) reads each E event in many runs: ranking the set's E events once
    replaces ranking every run's copies (dense ranks of a superset keep the order)."""

    def __init__(self, q: Query, table: pa.Table, rows: np.ndarray) -> None:
        self.q, self.table, self.rows = q, table, rows
        self._order = np.argsort(rows, kind="stable")
        self._sorted = rows[self._order]
        self._done: dict[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def __call__(
        self, cond: NextCondition, writers: np.ndarray, readers: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        columns = (cond.attr, cond.next_attr)  # the ranks read nothing else of the condition
        if columns not in self._done:
            self._done[columns] = _ranks_of_rows(self.q, cond, self.table, self.rows, self.rows)
        ranks, null, nan = self._done[columns]
        m = self.rows.shape[0]
        at = np.r_[self._index(writers), m + self._index(readers)]
        return ranks[at], null[at], nan[at]

    def _index(self, rows: np.ndarray) -> np.ndarray:
        return self._order[np.searchsorted(self._sorted, rows)]


def _ranks_of_rows(
    q: Query, cond: NextCondition, table: pa.Table, writers: np.ndarray, readers: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_joint_ranks` of the writers' `cond.attr` and the readers' `cond.next_attr` (event rows
    of `table`)."""
    a = table.column(cond.attr).take(pa.array(writers)).combine_chunks()
    b = table.column(cond.next_attr).take(pa.array(readers)).combine_chunks()
    return _joint_ranks(q, cond, a, b)


def sorted_by(first: np.ndarray, then: list[np.ndarray]) -> np.ndarray:
    """The stable order by `first`, then each of `then` (non-negative ints): the order of
    np.lexsort, from one argsort of the keys packed into one int64 where they fit (a radix sort,
    several times faster than lexsort on a basis pass's millions of entries)."""
    width = [float(first.max(initial=0)) + 1] + [float(k.max(initial=0)) + 1 for k in then]
    if math.prod(width) >= 2.0**62:
        return np.lexsort(tuple(reversed(then)) + (first,))
    packed = first.astype(np.int64)
    for k, w in zip(then, width[1:]):
        packed = packed * int(w) + k
    return np.argsort(packed, kind="stable")


def _ranges(op: str, lo, hi, nan_lo, at, reader_nan):
    """A reader's leaf ranges (lo1, hi1, lo2, hi2) for `writer op reader` in its block
    [lo, hi) (NaN keys from nan_lo on), its own key at leaf `at`."""
    empty = np.zeros_like(at)
    r: tuple[np.ndarray, ...]
    if op == "=":
        r = (at, at + 1, empty, empty)
    elif op == "<":
        r = (lo, at, empty, empty)
    elif op == "<=":
        r = (lo, at + 1, empty, empty)
    elif op == ">":
        r = (at + 1, nan_lo, empty, empty)
    elif op == ">=":
        r = (at, nan_lo, empty, empty)
    else:  # '!=': everything else in the block; a NaN reader differs from every key
        r = (lo, np.where(reader_nan, hi, at), np.where(reader_nan, hi, at + 1), hi)
    if op != "!=":  # a NaN reader satisfies nothing but '!='
        r = tuple(np.where(reader_nan, 0, x) for x in r)
    return np.stack(r, axis=1)


def adjacent_runs(
    q: Query,
    adj: Adjacency,
    table: pa.Table,
    rows: np.ndarray,
    labels: dict[str, int],
    label: np.ndarray,
    kind: np.ndarray,
    run: np.ndarray,
    time: np.ndarray,
    pos: np.ndarray,
    ranked: KeyRanks | None = None,
) -> AdjacentRuns:
    """The trees' layout for one query's rows (rows of `table`, their `label`, `kind` and `run`,
    sorted by run and time); `ranked`: the keys ranked once for all these rows."""
    n = rows.shape[0]
    nruns = int(run[-1]) + 1 if n else 0
    ncls = len(adj.classes)
    slot = np.full((n, ncls), -1, np.int64)
    rng = np.zeros((n, ncls, 4), np.int64)
    tsize = np.zeros((nruns, ncls), np.int64)
    for c, conds in enumerate(adj.classes):
        x, y = conds[0].type, conds[0].next_type
        writers = np.flatnonzero((kind == EVENT) & (label == labels[x]))
        readers = np.flatnonzero((kind == EVENT) & (label == labels[y]))
        nw = writers.shape[0]
        keys, bad = [], np.zeros(nw + readers.shape[0], bool)
        nan_key = np.zeros_like(bad)
        for cond in conds:
            if ranked is not None:
                ranks, null, nan = ranked(cond, rows[writers], rows[readers])
            else:
                ranks, null, nan = _ranks_of_rows(q, cond, table, rows[writers], rows[readers])
            bad |= null
            if cond.op == "=":
                bad |= nan
            else:
                nan_key = nan
            keys.append(ranks)
        ordering = conds[-1].op if conds[-1].op != "=" else None
        entry_run = np.concatenate([run[writers], run[readers]])
        is_reader = np.arange(bad.shape[0]) >= nw
        reader_nan = nan_key & is_reader
        # A NaN reader of '!=' reads its whole block, so it needs the block: it stays, with its
        # key (NaN sorts after every number, so no writer shares its leaf by mistake).
        ok = np.flatnonzero(~bad & (~reader_nan | (ordering == "!=")))
        order = ok[sorted_by(entry_run[ok], [k[ok] for k in keys])]
        srun = entry_run[order]
        skeys = [k[order] for k in keys]
        m = order.shape[0]
        new_run = np.ones(m, bool)
        new_run[1:] = srun[1:] != srun[:-1]
        new_block = new_run.copy()
        for k in skeys[: len(skeys) - (ordering is not None)]:
            new_block[1:] |= k[1:] != k[:-1]
        new_key = new_block.copy()
        if ordering is not None:
            new_key[1:] |= skeys[-1][1:] != skeys[-1][:-1]
        keyid = np.cumsum(new_key) - 1
        run_first = np.maximum.accumulate(np.where(new_run, keyid, 0))
        local = keyid - run_first
        if m:
            np.maximum.at(tsize[:, c], srun, local + 1)
        block_start = np.maximum.accumulate(np.where(new_block, np.arange(m), 0))
        block_end = np.r_[np.flatnonzero(new_block)[1:], m]  # per block
        block_no = np.cumsum(new_block) - 1
        lo = local[block_start]
        hi = local[block_end[block_no] - 1] + 1
        nan_sorted = nan_key[order]
        # The first NaN key of each block (NaN keys sort last in it), else the block's end.
        first_nan = np.where(nan_sorted, local, np.iinfo(np.int64).max)
        nan_lo = np.minimum.reduceat(first_nan, np.flatnonzero(new_block)) if m else first_nan
        nan_lo = np.minimum(nan_lo[block_no] if m else nan_lo, hi)
        reads = is_reader[order]
        at = np.flatnonzero(reads)
        row_of = np.concatenate([writers, readers])[order]
        rng[row_of[at], c] = _ranges(
            ordering or "=", lo[at], hi[at], nan_lo[at], local[at], reader_nan[order][at]
        )
        wr = np.flatnonzero(~reads)
        slot[row_of[wr], c] = local[wr]
    sizes = 2 * tsize * adj.ntree[None, :]
    toff = (np.cumsum(sizes.ravel()) - sizes.ravel()).reshape(sizes.shape)
    starts = np.r_[0, np.flatnonzero(run[1:] != run[:-1]) + 1, n].astype(np.int64)
    return AdjacentRuns(
        starts,
        time,
        pos,
        adj.pred_cls,
        adj.tree,
        toff.astype(np.int64),
        tsize,
        slot,
        rng,
        int(sizes.sum()),
        np.full(n, -1, np.int64),  # no window macro rows (QueryRows adds them)
        np.full(n, -1, np.int64),
        np.zeros(0, np.int64),
        np.full(n, -1, np.int64),
        np.zeros(1, np.int64),
        np.zeros(0, np.int64),
        0,
    )

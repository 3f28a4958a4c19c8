"""Events sorted by partition (GROUPBY and equivalence values) and time, once per attribute set.

Queries that partition alike share one sort; the group code of each row lets the equivalence
partitions of one GROUPBY group be added up afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from gpu_hamlet.engine.events import EventFrame
from gpu_hamlet.engine.pruning import rows_by_code
from gpu_hamlet.host_threads import Once, cpu_threads, host_map
from gpu_hamlet.query.schema import decoded, widened


@dataclass(frozen=True)
class SortedKeys:
    """Event rows sorted by (partition, time), with each row's partition and group codes, time
    and type code, in that order."""

    order: np.ndarray
    pid: np.ndarray
    gid: np.ndarray
    time: np.ndarray
    codes: np.ndarray
    _made: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    _once_locks: Once = field(default_factory=Once, init=False, repr=False, compare=False)

    def _once(self, key: Any, make: Callable[[], Any]) -> Any:
        """What `make()` makes, one object per call's keys, whichever of the threads building
        query rows asks first. functools.cached_property takes no lock from Python 3.12 on: two
        threads made two `gid_of_pid` arrays, and a fused run's check that its queries share
        one failed on a 16-core GPU machine (bench_sharing.py, 25 queries over bursts of 50)."""
        return self._once_locks.get(self._made, key, make)

    def window_runs(
        self,
        width: int | float,
        segments: Callable[[np.ndarray, np.ndarray, int | float], tuple[np.ndarray, np.ndarray]],
    ) -> np.ndarray:
        """Per sorted row, the number of its run of equal partition and tumbling window of
        `width`, from 0. A flat query over tumbling windows is pruned by these runs in its one
        compiled pass (`typed_may_complete`), where pruning by partition and then per window
        took a second pass and a gather of the rows kept (bench_gpu.py's 50 queries: 8 ms a
        query at 10^6 events). `segments` is the backend's step, so the windows are those the
        query's rows are given after. Made once per width in a call, for every query of it."""
        return self._once(
            ("window_runs", width), lambda: window_run_ids(self.pid, self.time, width, segments)
        )

    @property
    def by_code(self) -> tuple[np.ndarray, np.ndarray]:
        """The sorted rows of each type code (`pruning.rows_by_code`): a flat query's starts
        and ends are read from these lists rather than found in a pass over every row of the
        call per query."""
        return self._once("by_code", lambda: rows_by_code(self.codes))

    @property
    def gid_of_pid(self) -> np.ndarray:
        """Each partition id's GROUPBY group (a partition lies in one group). The results group
        windows by it for a few rows each; gathering the group of every row a query keeps cost
        a sixth of building its rows (bench_sharing.py, 100 queries: a cache miss per row)."""

        def make() -> np.ndarray:
            out = np.zeros(int(self.pid[-1]) + 1 if self.pid.shape[0] else 0, np.int64)
            out[self.pid] = self.gid
            return out

        return self._once("gid_of_pid", make)

    def select(self, mask: np.ndarray) -> SortedRows:
        """The sorted rows where `mask` (in sorted order) holds, with their keys read in sorted
        order: sequential reads, where reading by event row would be random ones. Where it
        holds for every row (a set whose queries match every event), the keys' own arrays,
        which no caller writes: four gathers of every row cost a fifth of such a set's
        analysis (`SharedBursts`)."""
        if mask.all():
            return SortedRows(np.arange(mask.shape[0]), self.order, self.pid, self.time, self.codes)
        idx = np.flatnonzero(mask)
        return SortedRows(idx, self.order[idx], self.pid[idx], self.time[idx], self.codes[idx])


def window_run_ids(
    pid: np.ndarray,
    time: np.ndarray,
    width: int | float,
    segments: Callable[[np.ndarray, np.ndarray, int | float], tuple[np.ndarray, np.ndarray]],
) -> np.ndarray:
    """An id per row (sorted by partition and time), equal for the rows of one partition and
    tumbling window of `width`, ascending: from the backend's `segments`, so the windows are
    those the rows are given later."""
    change = np.zeros(pid.shape[0], np.int64)
    change[segments(pid, time, width)[1]] = 1
    return np.cumsum(change)


class SortedRows(NamedTuple):
    """Some of `SortedKeys`' rows: indices into the sorted order, event rows, partition codes,
    times and type codes."""

    idx: np.ndarray
    rows: np.ndarray
    pid: np.ndarray
    time: np.ndarray
    codes: np.ndarray


_NAN = float("nan")


def pair_keys(*pairs: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """One int64 key per (group, index) pair, for each array pair given, equal exactly where the
    pairs are: indices count from the smallest of them all (windows and panes before time 0
    have negative ones, which a plain group * span + index let collide across groups)."""
    idx = [i for _, i in pairs]
    lo = min((int(i.min()) for i in idx if i.size), default=0)
    span = max((int(i.max()) for i in idx if i.size), default=0) - lo + 1
    return [g.astype(np.int64) * span + (i - lo) for g, i in pairs]


def group_key(values: tuple) -> tuple:
    """Group values (Python objects, as `grouping_values` gives them) as a dict key: Python's
    NaN equals only itself, so every NaN becomes one NaN object and NaN keys one key."""
    return tuple(_NAN if v != v else v for v in values)


def key_values(col: pa.ChunkedArray | pa.Array) -> list:
    """A GROUPBY or equivalence column's `grouping_values` (or window bounds) as Python values
    that tell them apart; `key_array` gives them their column's type back. Dates, times,
    timestamps and durations come as their integers (ticks, days): Python's datetime holds no
    year past 9999, nor pandas' a zoned time near 2262 (an AND over such times raised
    OverflowError), and aware datetimes differing in `fold` alone compare and hash equal, so
    keys of 01:30 EDT and 01:30 EST were one (a cut group's summaries, an AND's counts)."""
    col = grouping_values(col)
    ints = _temporal_ints(col.type.value_type if pa.types.is_dictionary(col.type) else col.type)
    if ints is not None:
        col = decoded(col).cast(ints)
    return col.to_pylist()


def key_array(values: list, t: pa.DataType) -> pa.Array:
    """Values as `key_values` gave them, as an array of type `t` (of a dictionary type too:
    Arrow builds none of dates or timestamps from a list)."""
    if pa.types.is_dictionary(t):
        enc = pc.dictionary_encode(key_array(values, t.value_type))
        return pa.DictionaryArray.from_arrays(
            enc.indices.cast(t.index_type), enc.dictionary, ordered=t.ordered
        )
    ints = _temporal_ints(t)
    return pa.array(values, t) if ints is None else pa.array(values, ints).view(t)


def key_text(value: Any, t: pa.DataType) -> str:
    """A value as `key_values` gave it, for a message: as its column's type shows it (a date
    or time after the year 9999 as its integer)."""
    if _temporal_ints(t.value_type if pa.types.is_dictionary(t) else t) is None:
        return repr(value)
    try:
        return str(key_array([value], t)[0])
    except (OverflowError, ValueError):
        return f"{value} (since the epoch)"


def _temporal_ints(t: pa.DataType) -> pa.DataType | None:
    """The integers a date, time, timestamp or duration type counts in; None for other types."""
    temporal = pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t)
    if temporal or pa.types.is_duration(t):
        return pa.int64() if t.bit_width == 64 else pa.int32()
    return None


def grouping_values(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A GROUPBY or equivalence column with the values Spark's grouping normalises made one:
    -0.0 is 0.0 (the value shown for the group) and every NaN is the same NaN. Arrow hashes
    the bits, which would make them separate groups. A null stays a value of its own. A
    dictionary column's dictionary is made so."""
    if pa.types.is_dictionary(col.type):
        if not pa.types.is_floating(col.type.value_type):
            return col
        chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
        fixed = [
            pa.DictionaryArray.from_arrays(c.indices, grouping_values(c.dictionary)) for c in chunks
        ]
        return pa.chunked_array(fixed, col.type) if isinstance(col, pa.ChunkedArray) else fixed[0]
    if not pa.types.is_floating(col.type):
        return col
    col = pc.add(col, pa.scalar(0.0, col.type))  # -0.0 + 0.0 = 0.0; NaN payloads stay
    return pc.if_else(pc.is_nan(col), pa.scalar(float("nan"), col.type), col)


def _codes(col: pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """A code per row (equal values, equal codes; a null is a value) and the number of codes."""
    if len(col) == 0:  # (Arrow cannot combine zero chunks of a dictionary of dates or decimals)
        return np.zeros(0, np.int64), 0
    # A dictionary's indices are no codes: one value may sit at several, and a null has none.
    col = decoded(col)
    col = col.cast(widened(col.type))  # (Arrow hashes no decimal32 or decimal64)
    if pa.types.is_integer(col.type) and not col.null_count:
        chunks = [c.to_numpy() for c in col.chunks]
        values = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
        lo, hi = _int_range(values)
        if int(hi) - int(lo) <= len(values) // 2 + 1024:
            return _ranks(values, values.dtype.type(lo), int(hi) - int(lo) + 1)
    enc = pc.dictionary_encode(grouping_values(col), null_encoding="encode").combine_chunks()
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), len(enc.dictionary)


# Integer keys over a range not much wider than their rows (driver or district ids) are coded
# by rank within the range: two passes and an array of the range, where hashing them cost 3.5
# ns a row (37 ms at 10^7 rows of the ridesharing stream, `python benchmarks/bench_stream.py`).


@njit(cache=True, nogil=True)
def _int_range(v: np.ndarray) -> tuple:
    lo, hi = v[0], v[0]
    for x in v:
        lo = min(lo, x)
        hi = max(hi, x)
    return lo, hi


@njit(cache=True, nogil=True)
def _ranks(v: np.ndarray, lo, span: int) -> tuple[np.ndarray, int]:
    """Each value's rank among the distinct values, in [lo, lo + span), and their number."""
    rank = np.zeros(span, np.int64)
    base = np.int64(lo)  # (differences in int64: a narrow type would wrap; they are < span)
    for x in v:
        rank[np.int64(x) - base] = 1
    n = 0
    for r in range(span):
        seen = rank[r]
        rank[r] = n
        n += seen
    out = np.empty(v.shape[0], np.int64)
    for i in range(v.shape[0]):
        out[i] = rank[np.int64(v[i]) - base]
    return out, n


def _combine(codes: list[tuple[np.ndarray, int]], n: int) -> tuple[np.ndarray, int]:
    """One int64 code per row for several attribute codes (mixed radix, else densified). Codes
    of one value are all 0 and change nothing; one code left is its own combination."""
    codes = [(c, s) for c, s in codes if s > 1]
    if len(codes) == 1:
        return codes[0]
    out = np.zeros(n, np.int64)
    size = 1
    for c, s in codes:
        if size * max(s, 1) >= 2**62:
            _, out = np.unique(np.stack([out, c]), axis=1, return_inverse=True)
            out = out.astype(np.int64)
            size = int(out.max()) + 1 if n else 1
        out = out * max(s, 1) + c
        size *= max(s, 1)
    return out, size


class Partitioner:
    """Sort orders per set of partition attributes, shared by the queries that use the same set."""

    def __init__(self, ev: EventFrame) -> None:
        self.ev = ev
        self._cache: dict[tuple[tuple[str, ...], int], SortedKeys] = {}

    def keys(self, attrs: tuple[str, ...], n_group: int) -> SortedKeys:
        hit = self._cache.get((attrs, n_group))
        if hit is None:
            hit = self._cache[(attrs, n_group)] = self._sort(attrs, n_group)
        return hit

    def _sort(self, attrs: tuple[str, ...], n_group: int) -> SortedKeys:
        ev = self.ev
        n, t, codes_of_type = ev.n, ev.time, ev.type_codes
        codes = host_map(_codes, [ev.table.column(a) for a in attrs], rows=n)
        gid, _ = _combine(codes[:n_group], n)
        eid, esize = _combine(codes[n_group:], n)
        pid, _ = _combine([(gid, int(gid.max()) + 1 if n else 1), (eid, esize)], n)
        size = int(pid.max()) + 1 if n else 0
        order = None
        if not attrs:
            order = np.arange(n) if _is_sorted(t) else np.argsort(t, kind="stable")
        elif n and size <= 4 * n + 1024:
            # Times often come in order within each partition already (a Spark shard sorted by
            # label and time, a time-ordered file): then a stable counting sort by partition is
            # the whole sort, in linear time.
            counted = _counting_sort(pid, gid, t, codes_of_type, size)
            if counted is not None:
                return SortedKeys(*counted)
        if order is None and t.dtype.kind == "i" and n:
            span = int(t.max()) - int(t.min()) + 1
            if size * span < 2**62:
                key = pid * span + (t - t.min())
                order = np.arange(n) if _is_sorted(key) else np.argsort(key, kind="stable")
        if order is None:
            order = np.lexsort((t, pid))
        return SortedKeys(order, pid[order], gid[order], t[order], codes_of_type[order])


#: Inputs shorter than twice this are sorted in one thread. At 10^6 rows of the ridesharing
#: stream two slices took the sort from 17 to 12.5 ms (`python benchmarks/bench_stream.py`);
#: it was 1,000,000.
SORT_SLICE = 250_000


def _counting_sort(
    pid: np.ndarray, gid: np.ndarray, t: np.ndarray, codes: np.ndarray, size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """`SortedKeys`' arrays: rows by partition (pid < size), keeping their order within a
    partition, when that order has non-decreasing times; None when it does not. Each of the
    host's threads counts, then places, one slice of the rows; the sorted codes and times are
    written as the rows are placed (gathering them afterwards would read four arrays of every
    row at random: at 10^7 rows, 0.1 s more)."""
    n = pid.shape[0]
    # Each slice keeps a count and a first and last time per partition: slices only where the
    # partitions are few next to the rows.
    slices = max(1, min(cpu_threads(), n // SORT_SLICE)) if 4 * size <= n else 1
    bounds = [n * i // slices for i in range(slices + 1)]
    counted = host_map(
        lambda i: _count(pid, t, bounds[i], bounds[i + 1], size, slices > 1), range(slices), slices
    )
    ok, *per_slice = zip(*counted)  # per slice: counts, first times, last times
    if not all(ok):
        return None
    start = _starts(*(np.stack(a) if slices > 1 else a[0][None] for a in per_slice))
    if start is None:
        return None
    out = (
        np.empty(n, np.int64),
        np.empty(n, np.int64),
        np.empty(n, np.int64),
        np.empty(n, t.dtype),
        np.empty(n, codes.dtype),
    )
    host_map(
        lambda i: _place(pid, gid, t, codes, bounds[i], bounds[i + 1], start[i], *out),
        range(slices),
        slices,
    )
    return out


@njit(cache=True, nogil=True)
def _count(
    pid: np.ndarray, t: np.ndarray, lo: int, hi: int, size: int, firsts: bool
) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
    """Of rows [lo, hi): whether each partition's times are non-decreasing, and per partition
    its rows, first time (when `firsts`: for a check against the slice before) and last time."""
    count = np.zeros(size, np.int64)
    first = np.empty(size if firsts else 0, t.dtype)
    last = np.empty(size, t.dtype)
    for i in range(lo, hi):
        p = pid[i]
        if count[p] == 0:
            if firsts:
                first[p] = t[i]
        elif not t[i] >= last[p]:
            return False, count, first, last
        last[p] = t[i]
        count[p] += 1
    return True, count, first, last


@njit(cache=True, nogil=True)
def _starts(count: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray | None:
    """Where each slice's rows of each partition start in the sorted order (slices stacked in
    order), or None when a partition's times decrease from one slice to the next."""
    slices, size = count.shape
    start = np.empty((slices, size), np.int64)
    at = 0
    for p in range(size):
        seen, prev = False, last[0, p]  # the last time of the latest slice with rows of p
        for s in range(slices):
            start[s, p] = at
            at += count[s, p]
            if count[s, p]:
                if seen and not first[s, p] >= prev:
                    return None
                seen, prev = True, last[s, p]
    return start


@njit(cache=True, nogil=True)
def _place(
    pid: np.ndarray,
    gid: np.ndarray,
    t: np.ndarray,
    codes: np.ndarray,
    lo: int,
    hi: int,
    start: np.ndarray,
    order: np.ndarray,
    pid_s: np.ndarray,
    gid_s: np.ndarray,
    t_s: np.ndarray,
    codes_s: np.ndarray,
) -> None:
    """Rows [lo, hi) written to their places, from their partitions' `start`."""
    at = start.copy()
    for i in range(lo, hi):
        p = pid[i]
        j = at[p]
        order[j] = i
        pid_s[j] = p
        gid_s[j] = gid[i]
        t_s[j] = t[i]
        codes_s[j] = codes[i]
        at[p] += 1


def _is_sorted(a: np.ndarray) -> bool:
    return bool(a.shape[0] < 2 or np.all(a[1:] >= a[:-1]))

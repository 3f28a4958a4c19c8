"""Which events a query matches: its pattern position per event, from cached filter masks.

Many queries of a workload filter the same type the same way (or not at all), and shared
execution needs matches only at a few rows, so filter masks are evaluated once per filter over all
events and then gathered wherever they are needed.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_hamlet.engine.events import EventFrame
from gpu_hamlet.engine.partitions import SortedKeys
from gpu_hamlet.errors import WorkloadError
from gpu_hamlet.query.plan import Template
from gpu_hamlet.query.schema import decoded, stored, unscaled, values_type
from gpu_hamlet.query.time_axis import value_range
from gpu_hamlet.query.workload import Filter, Literal, Query

_OPS = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _integer_range(t: pa.DataType) -> tuple[int, int, int]:
    """(smallest, largest, scale) of the integers m of a column whose values are m * 10^-scale:
    an integer column, or a decimal one."""
    if pa.types.is_decimal(t):
        most = 10**t.precision - 1
        return -most, most, t.scale
    return (*value_range(t), 0)


def _integer_test(t: pa.DataType, op: str, value: Decimal) -> bool | tuple[str, int]:
    """`m op value` over the integers m of a column of type `t` (values m * 10^-scale) as one
    comparison with a whole number k inside the column's range, (op, k), or as a constant where
    it holds for every value or none (Arrow would compare an int64 column with 2.5 in float64,
    or fail on 2^53 + 1, or on a literal beyond the column's type).

    With c = value * 10^scale, m < c is m <= ceil(c) - 1, m > c is m >= floor(c) + 1, and m = c
    is false when c is not whole. Beyond the column's range the test is constant."""
    lo, hi, scale = _integer_range(t)
    c = _scaled(value, scale, len(str(hi)))
    if op in ("=", "!="):
        if not (c.denominator == 1 and lo <= c <= hi):  # never equal
            return op == "!="
        return op, int(c)
    op, k = {
        "<": ("<=", math.ceil(c) - 1),
        "<=": ("<=", math.floor(c)),
        ">": (">=", math.floor(c) + 1),
        ">=": (">=", math.ceil(c)),
    }[op]
    if (op == "<=" and k >= hi) or (op == ">=" and k <= lo):
        return True
    if (op == "<=" and k < lo) or (op == ">=" and k > hi):
        return False
    return op, k


def _exact_compare(col: Any, op: str, value: Decimal) -> Any:
    """`col op value` for an integer or decimal column, exactly (`_integer_test`)."""
    test = _integer_test(col.type, op, value)
    if isinstance(test, bool):
        return _constant(col, test)
    op, k = test
    if pa.types.is_decimal(col.type):  # its integers m (Arrow compares no negative scale)
        col = unscaled(col)
        return _OPS[op](col, pa.scalar(Decimal(k), col.type))  # (k lies in the column's range)
    return _OPS[op](col, pa.scalar(k, col.type))


def _constant(col: pa.ChunkedArray, truth: bool) -> pa.ChunkedArray:
    """`truth` for every non-null value (a null fails every comparison)."""
    return pc.and_(pc.is_valid(col), pa.scalar(truth))


def _exact_value(value: int | float | Decimal) -> Decimal:
    """The number a literal stands for: a float stands for its shortest decimal form (what was
    written: 0.1 is one tenth), not for its binary value."""
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def _scaled(value: Decimal, scale: int, digits: int) -> Fraction:
    """c = value * 10^scale, exactly, for comparisons with integers of at most `digits` digits;
    a c far beyond them stands in as 10^(digits + 1) of its sign, and a c of magnitude below
    1/100 as 1/2 of its sign: every such comparison comes out the same (`_integer_test`), and
    the literal 1e999999999 is not turned into an integer of a billion digits."""
    if value.is_zero():
        return Fraction(0)
    sign = -1 if value.is_signed() else 1
    magnitude = value.adjusted() + scale  # 10^magnitude <= |c| < 10^(magnitude + 1)
    if magnitude > digits:
        return Fraction(sign * 10 ** (digits + 1))
    if magnitude < -2:
        return Fraction(sign, 2)
    return Fraction(value) * Fraction(10) ** scale  # (a negative scale: a fraction, no float)


def compare(col: pa.ChunkedArray, op: str, value: Literal) -> pa.ChunkedArray:
    """`col op value` per row, null where the value is null. Integer and decimal columns are
    compared exactly with any number; float columns with the literal as the nearest float64
    (Spark's cast of a literal to double); strings as strings."""
    if pa.types.is_integer(col.type) or pa.types.is_decimal(col.type):
        assert not isinstance(value, str), "check_filter rejects strings for numeric columns"
        return _exact_compare(col, op, _exact_value(value))
    if pa.types.is_floating(col.type):
        return _OPS[op](col, pa.scalar(float(Decimal(value))))  # 10^400: inf, no error
    return _OPS[op](col, pa.scalar(value))


#: NumPy's operator per comparison of the query language.
_NP_OPS = {
    "=": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


def passes(col: pa.ChunkedArray, op: str, value: Literal) -> np.ndarray:
    """Per row, whether `col op value` holds (`compare`; a null fails, as in SQL's WHERE).
    An integer or float64 column without nulls is compared in NumPy, with the same exact test:
    Arrow's comparison, its null filling and its bitmap's unpacking took 50-60 us a filter on
    small calls (bench_small.py's queries filter seven ways)."""
    arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    t = arr.type
    if not arr.null_count and (pa.types.is_integer(t) or pa.types.is_float64(t)):
        vals = arr.to_numpy()
        assert not isinstance(value, str), "check_filter rejects strings for numeric columns"
        if pa.types.is_float64(t):
            return _NP_OPS[op](vals, float(Decimal(value)))
        test = _integer_test(t, op, _exact_value(value))
        if isinstance(test, bool):
            return np.full(len(vals), test)
        # (k lies inside the column's range, so NumPy compares it in the column's type)
        return _NP_OPS[test[0]](vals, test[1])
    ok = compare(arr, op, value).fill_null(False)
    return ok.to_numpy(zero_copy_only=False)


def check_filter(q: Query, f: Filter, t: pa.DataType) -> None:
    """A WorkloadError unless the filter's literal can be compared with its column, of type `t`:
    a number with an integer, decimal or float column, a string with a string column (a
    dictionary column: of such values)."""
    v = stored(values_type(t))
    numeric_col = pa.types.is_integer(v) or pa.types.is_floating(v) or pa.types.is_decimal(v)
    string_col = pa.types.is_string(v) or pa.types.is_large_string(v)
    if isinstance(f.value, str) == numeric_col or not (numeric_col or string_col):
        raise WorkloadError(
            f"filter {f} compares column '{f.attr}' of type {t} with "
            f"{type(f.value).__name__} literal {f.value!r}",
            query=q.name,
        )


class Matcher:
    """Pattern positions of events for queries, over all rows or a subset of them."""

    def __init__(self, ev: EventFrame) -> None:
        self.ev = ev
        self._dropped: dict[Filter, np.ndarray] = {}
        self._type_masks: dict[tuple, np.ndarray] = {}
        self._drop_masks: dict[frozenset[Filter], np.ndarray] = {}

    def dropped(self, q: Query, f: Filter) -> np.ndarray:
        """Rows of the filter's type that fail it (nulls fail, as in SQL). The filter was
        checked against its column first (`check_filter`)."""
        if f not in self._dropped:
            ev = self.ev
            col = decoded(ev.table.column(f.attr))
            ok = passes(col, f.op, f.value) if col.num_chunks else np.zeros(0, bool)
            self._dropped[f] = (ev.type_codes == ev.code_of(f.type)) & ~ok
        return self._dropped[f]

    def drop_mask(self, q: Query) -> np.ndarray | None:
        """Rows some filter of q drops (None: q has none), one mask per set of filters."""
        if not q.filters:
            return None
        key = frozenset(q.filters)
        if key not in self._drop_masks:
            masks = [self.dropped(q, f) for f in key]
            self._drop_masks[key] = masks[0] if len(masks) == 1 else np.logical_or.reduce(masks)
        return self._drop_masks[key]

    def positions(self, q: Query, tpl: Template, rows: np.ndarray | None = None) -> np.ndarray:
        """Pattern position of each row (all rows, or `rows`), -1 where q does not match it."""
        codes = self.ev.type_codes if rows is None else self.ev.type_codes[rows]
        return self.filtered(q, self.position_of_code(tpl)[codes], rows)

    def sorted_positions(self, q: Query, tpl: Template, keys: SortedKeys) -> np.ndarray:
        """`positions` of every row in `keys`' sorted order, from the type codes in that order:
        a sequential read, where taking `positions` by the order would read every row at random
        (only filters' masks are read so)."""
        return self.filtered(q, self.position_of_code(tpl)[keys.codes], keys.order)

    def position_of_code(self, tpl: Template, extra: int = 0) -> np.ndarray:
        """The template's label per type code (-1 for other types), plus `extra` slots."""
        ev = self.ev
        pos_of_code = np.full(max(len(ev.type_names), 1) + extra, -1, np.int32)
        for t, p in tpl.labels.items():
            code = ev.code_of(t)
            if code >= 0:
                pos_of_code[code] = p
        return pos_of_code

    def filtered(self, q: Query, pos: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """`pos` (of all rows, or of `rows`) with -1 at rows q's filters drop."""
        drop = self.drop_mask(q)
        if drop is not None:
            pos[drop if rows is None else drop[rows]] = -1
        return pos

    def type_mask(self, q: Query, t: str) -> np.ndarray:
        """Rows of type t that q's filters on t keep: one mask per distinct (type, filters on it),
        kept for the call."""
        key = (t, frozenset(q.filters_of(t)))
        if key not in self._type_masks:
            m = self.ev.type_codes == self.ev.code_of(t)
            for f in key[1]:
                m &= ~self.dropped(q, f)
            self._type_masks[key] = m
        return self._type_masks[key]

    def matched_whole(self, queries: tuple[Query, ...]) -> np.ndarray:
        """Per type code, whether some query has the type and no filters on it: then every
        event of the type is matched by one of them."""
        ev = self.ev
        whole = np.zeros(max(len(ev.type_names), 1), bool)
        for q in queries:
            for t in q.types:
                if ev.code_of(t) >= 0 and not q.filters_of(t):
                    whole[ev.code_of(t)] = True
        return whole

    def matched_by_any(self, queries: tuple[Query, ...], keys: SortedKeys) -> np.ndarray:
        """Rows some query matches, in `keys`' sorted order. A type some query has no filters
        on is matched whole, from the sorted type codes (a sequential read); the masks of
        the other (type, filters on it) are read through the order."""
        ev = self.ev
        whole = self.matched_whole(queries)
        distinct = {  # (a type the data lacks matches no row)
            (t, frozenset(q.filters_of(t))): (q, t, ev.code_of(t))
            for q in queries
            for t in q.types
            if ev.code_of(t) >= 0
        }
        out = whole[keys.codes]
        masks = [self.type_mask(q, t) for q, t, code in distinct.values() if not whole[code]]
        if masks:
            out |= np.logical_or.reduce(masks)[keys.order]
        return out

"""The output half of a query's evaluation: segment maps into windows, equivalence partitions
into groups, each number system into its columns, and the result table of the plan's schema
(docs/architecture.md section 4).

The maps come from a `MapSource`: a query's rows over the events (engine/query_rows.py), or the
pane summaries of a Spark job's slices (engine/summaries.py), which thus share this code.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from gpu_hamlet.core.numeric import (
    FLOAT_EXACT_BITS,
    SMALL_BITS,
    bigint_strings,
    crt,
    decimal38_overflow,
    decimal_array,
    float_nulls,
    xfloat_log2,
    xfloat_ratio,
    xfloat_to_float,
)
from gpu_hamlet.core.rings import pass_moduli, residue_passes
from gpu_hamlet.engine.backend import Backend, Steps, drive
from gpu_hamlet.engine.events import EventFrame
from gpu_hamlet.engine.options import Options
from gpu_hamlet.engine.partitions import grouping_values, pair_keys
from gpu_hamlet.errors import NumericOverflowError
from gpu_hamlet.query.plan import Asked, Channel, QueryPlan
from gpu_hamlet.query.schema import attr_kind, empty_array, in_result_order
from gpu_hamlet.query.workload import Query


class MapSource(Protocol):
    """Where a query's segment maps come from. `pid` and `rows` are per entry in partition
    order (an event row, or a summarised run): its partition and the row of `ev.table` holding
    its group values; `gid_of_pid` is each partition's GROUPBY group."""

    ev: EventFrame
    pid: np.ndarray
    gid_of_pid: np.ndarray
    rows: np.ndarray
    full: bool  # maps are D x D (windows compose them), not results from the zero state
    asked: Asked | None  # which windows are asked for (None: all)

    def prepare(self) -> Steps: ...

    def empty(self) -> bool: ...

    def segment_steps(self, ring: str, channels: tuple[Channel, ...], p: int = 0) -> Steps: ...

    def order_keys(self, attr: str) -> tuple[Any, Callable[[np.ndarray], pa.Array]]: ...


#: `_residue_ints` runs its passes over the runs of the rows that need them when those rows are
#: at most this share of a query's output rows (below, cutting the rows costs little beside the
#: passes it saves). On bench_engine.py's 50 queries over 300,000 events, one thread, best of 4
#: in turn, two runs: 0.93-0.95 s never cutting, 0.85-0.87 s at 0.5, 0.83-0.94 s cutting always.
RESTRICT_SHARE = 0.5


@dataclass
class ExactBounds:
    """The exact channels' magnitudes from the float pass (`QueryResults._exact_bounds`)."""

    bits: float  # of the largest value the residues must hold
    over: dict[Channel, np.ndarray]  # exact mode: certainly beyond decimal(38), so null
    small: dict[Channel, np.ndarray]  # below 2^SMALL_BITS: rebuilt in int64
    #: Per output row, every value below 2^FLOAT_EXACT_BITS or null (`over`): the float pass's
    #: values are the exact ints, as integer arithmetic below 2^53 is exact in float64
    #: (docs/architecture.md section 3), and a null needs no digits.
    row_in_float: np.ndarray

    @property
    def in_float(self) -> bool:
        """Every row's values exact in the float pass: no residue pass is needed."""
        return bool(self.row_in_float.all())


@dataclass
class Windows:
    """Per output row (group, window): where its values sit in the window arrays."""

    order: np.ndarray  # permutation of the kernel's windows into (group, window) order
    starts: np.ndarray  # first window of each output row in that order
    k: np.ndarray  # window index per output row
    rep: np.ndarray  # an event row of the group, for the GROUPBY values
    grouped: bool  # whether several partitions add up into one row
    gid: np.ndarray  # GROUPBY group per output row


def _unscaled(values: np.ndarray, scale: int, exponents: np.ndarray | None = None) -> np.ndarray:
    """Float results of a decimal column's unscaled sums divided by 10^scale, as a fresh array
    (`_float_column` zeroes its null rows in place); with `exponents`, the sums are XFloats
    (values * 2^exponents) and are scaled before they become float64: the unscaled sum of a
    decimal(38, 30) column whose SUM is 5e303 is 5e333, which float64 made infinite. 10^|scale|
    is f * 2^k with f rounded once (exact to 10^22) and 2^k exact, so a negative scale
    multiplies by f (0.01 is no double) and a positive one divides, as by 10.0^scale, bit for
    bit; past 10^700 any nonzero result is 0 or infinite alike (Arrow allows
    decimal128(38, 320); 10.0 ** 309 overflows)."""
    power = 10 ** min(abs(scale), 700)
    k = power.bit_length() - 1
    f = float(Fraction(power, 2**k))
    with np.errstate(over="ignore", under="ignore"):  # (a NumPy warning leaked here)
        m = values * f if scale < 0 else values / f
        k = k if scale < 0 else -k
        return np.ldexp(m, k) if exponents is None else xfloat_to_float(m, exponents + k)


def _quotient(total: int, divisor: int | Fraction, scale: int) -> float:
    """total / (divisor * 10^scale), the exact quotient rounded once (int / int is, in
    Python; a Fraction divisor through `float(Fraction)`); beyond float64 an infinity of its
    sign (the divisor, a count, is positive), which `_float_column` nulls or reports."""
    try:
        if isinstance(divisor, int):
            return total / (divisor * 10**scale) if scale >= 0 else total * 10**-scale / divisor
        return float(Fraction(total) / (divisor * Fraction(10) ** scale))
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def _null_where(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`values` as an object array, None where `mask`."""
    return np.where(mask, np.array(None, dtype=object), values)


class QueryResults:
    """One query's result table from its map source."""

    def __init__(self, src: MapSource, plan: QueryPlan, options: Options, be: Backend) -> None:
        self.src, self.plan, self.options, self.be = src, plan, options, be

    def _run(self, ring: str, channels: tuple[Channel, ...], p: int = 0) -> Steps:
        """Window values [windows, channels, lanes] (kernel order) for one ring."""
        w, tpl = self.plan.windowing, self.plan.template
        maps, run_pid, run_seg = yield from self.src.segment_steps(ring, channels, p)
        finals = np.asarray([c * (tpl.k + 1) + tpl.k for c in range(len(channels))], np.int64)
        if self.src.full:
            return (yield ("compose_windows", (ring, maps, run_pid, run_seg, w.a, w.n, finals, p)))
        return maps[:, :, 0, :].take(finals, axis=1), run_pid, run_seg

    def _grouped(self, ring: str, vals: np.ndarray, win: Windows, param: int) -> Steps:
        if not win.grouped:
            return vals
        return (
            yield (
                "reduce_sorted",
                (ring, vals.take(win.order, axis=0), win.starts, param),
            )
        )

    def _windows(self, win_pid: np.ndarray, win_k: np.ndarray) -> Windows:
        # Each window's partition's first row. With many windows a partition (a fused run of
        # a few partitions and 15,000 windows: 0.3 ms), each partition's is found once.
        pid, npid = self.src.pid, self.src.gid_of_pid.shape[0]
        if win_pid.shape[0] > npid:
            first = np.searchsorted(pid, np.arange(npid))[win_pid]
        else:
            first = np.searchsorted(pid, win_pid)
        rep = self.src.rows[first]
        q = self.plan.query
        gid = self.src.gid_of_pid[win_pid]
        if len(q.partition_attrs) == len(q.groupby):
            idx = np.arange(len(win_k))
            return Windows(idx, idx, win_k, rep, False, gid)
        order = np.lexsort((win_k, gid))
        g, k = gid[order], win_k[order]
        change = np.ones(len(order), bool)
        change[1:] = (g[1:] != g[:-1]) | (k[1:] != k[:-1])
        starts = np.flatnonzero(change)
        return Windows(order, starts, k[starts], rep[order][starts], True, g[starts])

    def table(self) -> pa.Table:
        return drive({"": self.table_steps()}, self.be)[""]

    def table_steps(self) -> Steps:
        """The result table, computed as a generator of backend steps (gpu_hamlet/engine/backend.py
        `drive` runs many queries' steps together)."""
        plan, q = self.plan, self.plan.query
        yield from self.src.prepare()
        if self.src.empty():
            none = np.zeros(0, np.int64)
            return self._tables(none, none, none, {})
        vals, win_pid, win_k = yield from self._run("xfloat", plan.linear)
        win = self._windows(win_pid, win_k)
        fl = yield from self._grouped("xfloat", vals, win, 0)
        keep = fl[:, 0, 0] > 0  # rows with at least one trend (counts are exact in zero-ness)
        if self.src.asked is not None:  # (a window with only some of its events here)
            keep &= self.src.asked(self.plan.windowing, *self._bounds(win.k))
        fl = fl.compress(keep, axis=0)
        lin = {ch: (fl[:, i, 0], fl[:, i, 1]) for i, ch in enumerate(plan.linear)}
        exact = (yield from self._exact(win, keep, lin)) if plan.exact else {}
        mm = (yield from self._minmax(win, keep)) if plan.minmax else {}
        cols: dict[str, pa.Array] = {}
        for agg in q.aggregates:
            cols[agg.name] = self._column(agg, lin, exact, mm, win, keep)
        return self._tables(win.k[keep], win.rep[keep], win.gid[keep], cols)

    def _bounds(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The starts and ends of windows `k`, in ticks."""
        w, q = self.plan.windowing, self.plan.query
        return self.src.ev.axis.bounds(k, q.within_ms, q.slide_ms, w.within, w.slide)

    def _tables(self, k: np.ndarray, rep: np.ndarray, gid: np.ndarray, cols) -> Any:
        """The result of output rows at windows `k` of the groups `gid` (`rep`: an event row
        of each): here one table; `FusedResults` (engine/fusion.py) splits it by query."""
        return self._build(k, rep, cols)

    def _exact(self, win: Windows, keep: np.ndarray, lin) -> Steps:
        """Exact Python ints per exact channel (None where certainly beyond decimal(38)): the
        float pass's own values where they are exact (`in_float`), else from residue passes."""
        bounds = self._exact_bounds(lin)
        if bounds.in_float:
            return self._float_ints(lin, bounds)
        return (yield from self._residue_ints(win, keep, bounds, lin))

    def _exact_bounds(self, lin) -> ExactBounds:
        """What the float pass tells of the exact channels: their magnitudes, in bits."""
        bits = 1.0
        over: dict[Channel, np.ndarray] = {}
        small: dict[Channel, np.ndarray] = {}
        in_float = np.ones(next(iter(lin.values()))[0].shape[0], bool)
        for ch in self.plan.exact:
            if ch.kind == "sum":
                m, e = lin[Channel("abs", ch.type, ch.attr)]
                sm, se = lin[ch]
                bound = xfloat_log2(m, e)
                # Certainly beyond 10^38 when the float sum is, and cancellation is too mild for
                # its error (~1e-12 of the absolute bound) to matter.
                rel = xfloat_ratio(np.abs(sm), se, m, e)
                certain = (xfloat_log2(sm, se) > math.log2(1e38) + 1e-6) & (rel > 1e-6)
            else:
                m, e = lin[ch]
                bound = xfloat_log2(m, e)
                certain = bound > math.log2(1e38) + 1e-6
            # (A sum's bound is its abs channel's: the same terms, none smaller in magnitude.)
            exact_here = bound < FLOAT_EXACT_BITS
            small[ch] = bound < SMALL_BITS
            if self.options.numeric == "exact":  # a null needs no residues
                over[ch] = certain
                exact_here |= certain
                bound = np.where(certain, 0.0, bound)
            in_float &= exact_here
            if bound.size:
                bits = max(bits, float(np.max(bound)))
        return ExactBounds(bits, over, small, in_float)

    def _float_ints(
        self, lin, bounds: ExactBounds, rows: Any = slice(None)
    ) -> dict[Channel, np.ndarray]:
        """The exact channels' float values at `rows` as Python ints, None where `bounds.over`
        (`ExactBounds`)."""
        out = {}
        for ch in self.plan.exact:
            vals = xfloat_to_float(lin[ch][0][rows], lin[ch][1][rows])
            null = bounds.over[ch][rows] if ch in bounds.over else None
            if null is None or not null.any():
                out[ch] = vals.astype(np.int64).astype(object)
                continue
            vals[null] = 0.0  # (beyond int64: no cast)
            out[ch] = _null_where(null, vals.astype(np.int64).astype(object))
        return out

    def _residue_ints(self, win: Windows, keep: np.ndarray, bounds: ExactBounds, lin) -> Steps:
        """The exact channels from residue passes of enough primes for `bounds.bits`, by CRT.
        Where at most RESTRICT_SHARE of the rows need them, the passes read only the runs of
        those rows' windows (`QueryRows.restricted`); the other rows keep the float values."""
        plan = self.plan
        need = ~bounds.row_in_float
        part = None
        restricted = getattr(self.src, "restricted", None)
        if restricted is not None and need.any() and need.mean() <= RESTRICT_SHARE:
            gid, k = win.gid[keep][need], win.k[keep][need]
            part = restricted(gid, k)
        src = self if part is None else QueryResults(part, plan, self.options, self.be)
        lanes = []  # [rows, channels, primes] per pass
        sub: Windows | None = None
        passes = residue_passes(bounds.bits + 2.0)
        for ring, param in passes:
            vals, win_pid, win_k = yield from src._run(ring, plan.exact, param)
            if part is None:
                lanes.append((yield from self._grouped(ring, vals, win, param)).compress(keep, 0))
                continue
            sub = src._windows(win_pid, win_k) if sub is None else sub
            lanes.append((yield from src._grouped(ring, vals, sub, param)))
        res = np.concatenate(lanes, axis=2)
        if sub is not None:  # the needed rows' places among the restricted windows
            have, wanted = pair_keys((sub.gid, sub.k), (win.gid[keep][need], win.k[keep][need]))
            order = np.argsort(have, kind="stable")
            at = order[np.searchsorted(have, wanted, sorter=order)]
            assert np.array_equal(have[at], wanted), "a window needing residues was cut away"
            res = res[at]
        out = {}
        floats = self._float_ints(lin, bounds, ~need) if sub is not None else {}
        for i, ch in enumerate(plan.exact):
            small = bounds.small[ch] if sub is None else bounds.small[ch][need]
            ints = crt(
                np.ascontiguousarray(res[:, i, :].T), ch.kind == "sum", small, pass_moduli(passes)
            )
            if sub is not None:  # the other rows' values are the float pass's
                ints, part_ints = np.empty(need.shape[0], object), ints
                ints[need] = part_ints
                ints[~need] = floats[ch]
            if ch in bounds.over:
                ints = _null_where(bounds.over[ch], ints)
            out[ch] = ints
        return out

    def _minmax(self, win: Windows, keep: np.ndarray) -> Steps:
        """MIN/MAX columns (Arrow, null where no trend reaches the type)."""
        plan = self.plan
        vals, _, _ = yield from self._run("minreach", plan.minmax)
        vals = (yield from self._grouped("minreach", vals, win, 0)).compress(keep, axis=0)
        out = {}
        for i, ch in enumerate(plan.minmax):
            if ch.kind == "count":
                continue
            keys = vals[:, i, 1]
            if ch.kind == "max":
                keys = ~keys
            reach = vals[:, i, 0] > 0  # some trend holds an event of the type with a value
            assert ch.attr is not None, "MIN and MAX take TYPE.attr"
            typ = self.plan.attr_types[ch.attr]
            if not reach.any():
                out[ch] = pa.nulls(len(reach), typ)
                continue
            col = self.src.order_keys(ch.attr)[1](np.where(reach, keys, keys[reach][0]))
            # Null where none reaches, by a null index: if_else widened decimals of 32 and 64
            # bits and of a negative scale, past decimal256's 76 digits at decimal256(76, -10).
            out[ch] = col.take(pa.array(np.arange(reach.shape[0]), mask=~reach))
        return out

    def _column(self, agg, lin, exact, mm, win: Windows, keep) -> pa.Array:
        """The aggregate's column, of its type in the plan's result schema."""
        out = self.plan.outputs[agg.name]
        typ, scale, ch, d = out.type, out.scale, out.channel, out.divisor
        if agg.func in ("MIN", "MAX"):
            return mm[ch]
        # SUM and AVG over events whose values are all null are null (SQL).
        empty = lin[d][0] == 0 if d in lin else np.zeros(int(keep.sum()), bool)
        if agg.func == "AVG":
            vals = _unscaled(xfloat_ratio(*lin[ch], *lin[d]), scale)
            if ch in exact and d in exact:  # each row's exact quotient, rounded once, where
                # its sum is exact (not beyond decimal(38)): a row's own decision, not the
                # table's (queries fused into one table, engine/fusion.py, got their
                # neighbours' float quotients). A count beyond decimal(38) is the float
                # pass's, within 1e-15: it adds no terms of both signs, where a sum's float
                # value may have cancelled to nothing.
                dm, de = lin[d]
                for i, (a, b) in enumerate(zip(exact[ch], exact[d])):
                    if a is None:
                        continue
                    if b is None:
                        b = Fraction(float(dm[i])) * Fraction(2) ** int(de[i])
                    if b:
                        vals[i] = _quotient(a, b, scale)
            return self._float_column(agg, vals, win, keep, empty)
        if not pa.types.is_floating(typ):  # exact digits: the exact runs computed them
            ints = exact[ch]
            if pa.types.is_string(typ):
                return bigint_strings(_null_where(empty, ints), scale)
            bad = decimal38_overflow(ints) & ~empty
            if bad.any():
                if self.options.on_overflow == "error":
                    i = int(np.flatnonzero(bad)[0])
                    fits = f"does not fit decimal(38, {scale}) (10^{38 - scale} or more)"
                    raise self._overflow(agg, fits, win, keep, i)
            return decimal_array(_null_where(bad | empty, ints), typ.scale)
        vals = _unscaled(lin[ch][0], scale, lin[ch][1])
        return self._float_column(agg, vals, win, keep, empty)

    def _float_column(
        self, agg, vals: np.ndarray, win: Windows, keep, null: np.ndarray
    ) -> pa.Array:
        """float64 results `vals` (a fresh array: null rows are zeroed in it), null where `null`
        (no value to aggregate) or, with on_overflow='null', beyond the float64 range."""
        mask, bad, masked = float_nulls(vals, null)
        if bad >= 0 and self.options.on_overflow == "error":
            raise self._overflow(agg, "is beyond the float64 range", win, keep, bad)
        typ = self.plan.outputs[agg.name].type
        return pa.array(vals, typ, mask=mask) if masked else pa.array(vals, typ)

    def _overflow(self, agg, what: str, win: Windows, keep, i: int) -> NumericOverflowError:
        """The error of output row i: its query, aggregate, group, window and ways out."""
        q = self.plan.query
        rep = int(win.rep[keep][i])
        group = [
            (g, repr(grouping_values(self.src.ev.table.column(g).slice(rep, 1))[0].as_py()))
            for g in q.groupby
        ]
        ticks = np.concatenate(self._bounds(win.k[keep][i : i + 1]))
        start, end = self.src.ev.axis.to_arrow(ticks)
        kind = attr_kind(self.plan.attr_types[agg.attr]) if agg.attr else "int"
        ways = []
        if agg.func != "AVG" and kind != "float":  # exact in bigint mode
            ways.append("numeric='bigint' for exact digits of any size")
            if self.options.numeric == "exact":
                ways.append("numeric='float' for float64")
        ways.append("on_overflow='null'")
        name = dict(self.plan.asked_by).get(agg.name, q.name)
        window = (str(start.as_py()), str(end.as_py()))
        return NumericOverflowError.of(name, str(agg), group, window, what, ways, ticks[1].item())

    def _build(self, k: np.ndarray, rep: np.ndarray, cols: dict[str, pa.Array]) -> pa.Table:
        """The result table: its schema is the plan's result schema, which the Spark driver
        declares without running anything (gpu_hamlet/query/schema.py)."""
        return self._in_order(self.plan.query, self._unordered(k, rep, cols), k)

    def _unordered(self, k: np.ndarray, rep: np.ndarray, cols: dict[str, pa.Array]) -> pa.Table:
        """`_build`'s table with its rows in the order of `k` and `rep`."""
        q, ev = self.plan.query, self.src.ev
        schema = self.plan.result_schema
        out: dict[str, pa.Array] = {}
        for g in q.groupby:
            out[g] = grouping_values(
                ev.table.column(g).take(pa.array(rep, pa.int64()))
            ).combine_chunks()
        start, end = self._bounds(k)
        out["window_start"] = ev.axis.to_arrow(start)
        out["window_end"] = ev.axis.to_arrow(end)
        for agg in q.aggregates:
            out[agg.name] = (
                cols[agg.name] if agg.name in cols else empty_array(schema.field(agg.name).type)
            )
        table = pa.table(out)
        assert table.schema.equals(schema), f"query {q.name}: {table.schema} is not {schema}"
        return table

    @staticmethod
    def _in_order(q: Query, table: pa.Table, k: np.ndarray) -> pa.Table:
        """q's result table in result order (the rows' windows `k`)."""
        if not q.groupby and not (k[1:] < k[:-1]).any():  # in window order already
            return table
        return in_result_order(table, q.groupby)

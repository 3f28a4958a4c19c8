"""Pane summaries: how a group cut into time slices on several tasks still gets exact windows.

A skewed group (gpu_hamlet/spark/job.py) is cut at boundary times into slices handled by different
tasks. A window inside one slice is answered by that slice's task. A window that crosses a boundary
is the product of the segment maps of its panes (docs/architecture.md section 2), whichever slice
they lie in, so each slice also hands over the maps of its segments near its boundaries
(`summarize`); a pane cut by a boundary arrives as two partial maps, which compose like any two
segments. The second stage (`compose`) multiplies a group's summaries into exactly the crossing
windows. Every trend is counted once: a window is answered either by one slice or, whole, by the
second stage.

Maps travel in every number system the results need: XFLOAT (float results and magnitudes), exact
integers (residue maps joined by the Chinese remainder theorem, so the second stage can reduce them
modulo as many primes as the composed windows need), and MINREACH with attribute values in place of
the slice's own ranks, which mean nothing elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from gpu_hamlet.core.numeric import SMALL_BITS, crt, xfloat_log2
from gpu_hamlet.core.rings import NO_RANK, is_residue, pass_moduli, residue_passes, ring_primes
from gpu_hamlet.engine.attributes import order_keys
from gpu_hamlet.engine.backend import select_backend
from gpu_hamlet.engine.conjunction import combine, runs_of
from gpu_hamlet.engine.evaluate import Context, evaluate_in
from gpu_hamlet.engine.events import EventFrame
from gpu_hamlet.engine.options import Options
from gpu_hamlet.engine.partitions import group_key, key_array, key_values
from gpu_hamlet.engine.query_rows import QueryRows
from gpu_hamlet.engine.results import QueryResults
from gpu_hamlet.engine.sharing import RunStats, start_stats
from gpu_hamlet.query.pattern import And
from gpu_hamlet.query.plan import Asked, QueryPlan, Windowing, plan_query
from gpu_hamlet.query.schema import result_schema
from gpu_hamlet.query.workload import Query, Workload


@dataclass(frozen=True)
class Cut:
    """Where a group is cut: slice r holds the ticks [t0 + r*R, t0 + (r+1)*R); the first slice
    extends to minus infinity and the last (`rmax`) to plus infinity."""

    t0: int | float
    R: int | float
    rmax: int

    def slice_of(self, ticks: np.ndarray) -> np.ndarray:
        """The slice of each tick; the formula the Spark driver uses too (integer division for
        integer ticks), so both sides agree at boundaries."""
        if ticks.dtype.kind in "iu":
            r = (ticks.astype(np.int64) - np.int64(self.t0)) // np.int64(self.R)
        else:
            r = np.floor((ticks - self.t0) / self.R)
        return np.clip(r, 0, self.rmax).astype(np.int64)

    def crossing(self, starts: np.ndarray, within: int | float) -> np.ndarray:
        """Whether each window [start, start + within) may hold ticks of two slices. Float ticks
        get a relative slack, so no window whose panes round across a boundary counts as inside."""
        if starts.dtype.kind == "f":
            slack = 1e-9 * (np.abs(starts) + within)
            return self.slice_of(starts - slack) != self.slice_of(starts + within + slack)
        return self.slice_of(starts) != self.slice_of(starts + (within - 1))

    def near(self, ticks: np.ndarray, reach: int | float) -> np.ndarray:
        """Ticks within `reach` (plus the float slack) of a boundary of their own slice: every
        event of a crossing window of at most `reach` is among them."""
        r = self.slice_of(ticks)
        lo = self.t0 + r * self.R
        to_lo = ticks - lo
        to_hi = self.R - to_lo  # not lo + R - ticks: lo + R may lie beyond the last tick
        if ticks.dtype.kind == "f":
            reach = reach + 2e-9 * (np.abs(ticks) + reach)
        return ((r > 0) & (to_lo < reach)) | ((r < self.rmax) & (to_hi <= reach))


def summarize(
    events: pa.Table,
    workload: Workload,
    cut: Cut,
    options: Options,
    stats: RunStats | None = None,
) -> tuple[dict[str, pa.Table], dict[str, dict | None]]:
    """One slice's share of a cut group: each query's windows inside the slice, and the
    summaries of its segments near the slice's boundaries (None for a query with none)."""
    start_stats(stats)
    ctx = Context.of(events, workload, options, True)

    def asked(w: Windowing, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The windows inside the slice: a crossing one holds only some of its events here,
        where a SUM of values of both signs may overflow that does not whole."""
        return ~cut.crossing(start, w.within)

    inside = evaluate_in(ctx, stats=stats, asked=asked)
    reach = max(p.windowing.within for p in ctx.plans.values())
    near = cut.near(ctx.ev.time, reach)
    out: dict[str, dict | None] = {}
    if near.any():
        ctx = Context.of(ctx.ev.table.filter(pa.array(near)), workload, options, True)
    for q in workload:
        if not near.any():
            out[q.name] = None
        elif isinstance(q.pattern, And):  # the summaries of its three counts
            out[q.name] = {
                "parts": {
                    run.name: _query_summary(ctx, ctx.plans[run.name], ctx.options[run.name])
                    for run, _ in runs_of(q, options)
                }
            }
        else:
            out[q.name] = _query_summary(ctx, ctx.plans[q.name], options)
    return inside, out


def _query_summary(ctx: Context, plan: QueryPlan, options: Options) -> dict | None:
    """The segment maps of one query over the events near the boundaries, in every ring."""
    q = plan.query
    run = QueryRows(
        ctx.ev,
        ctx.parts,
        ctx.attrs,
        plan,
        ctx.matcher,
        [],
        options,
        ctx.be,
        maps=True,
    )
    if run.pos.shape[0] == 0:
        return None
    xf, run_pid, run_seg = run.segment_maps("xfloat", plan.linear)
    # Partition values of each run (GROUPBY then equivalence attributes).
    rep = run.rows[np.searchsorted(run.pid, run_pid)]
    keys = [key_values(ctx.ev.table.column(a).take(pa.array(rep))) for a in q.partition_attrs]
    summary: dict[str, Any] = {
        "key": list(zip(*keys)) if keys else [()] * len(run_pid),
        "seg": run_seg,
        "xfloat": xf,
        "exact": None,
        "minreach": None,
    }
    if plan.exact:
        # Every exact entry is at most the float run's largest (sums have |value| channels).
        bits = float(np.max(xfloat_log2(xf[..., 0].ravel(), xf[..., 1].ravel()), initial=0.0))
        passes = residue_passes(bits + 3.0)
        res = np.concatenate([run.segment_maps(r, plan.exact, p)[0] for r, p in passes], axis=-1)
        res = np.moveaxis(res, -1, 0)  # [primes, runs, D, D]
        flat = res.reshape(res.shape[0], -1)
        small = np.full(flat.shape[1], bits < SMALL_BITS)
        ints = crt(flat, True, small, pass_moduli(passes)).reshape(res.shape[1:])
        summary["exact"] = ints.astype(np.int64) if bits < SMALL_BITS else ints  # compact
    if plan.minmax:
        mm = run.segment_maps("minreach", plan.minmax)[0]
        summary["minreach"], summary["values"] = _ranks_to_values(mm, plan, ctx.attrs.order_keys)
    return summary


def _rank_rows(plan: QueryPlan):
    """(channel, attribute, rows of its block, whether bit-inverted) per MIN/MAX channel."""
    stride = plan.template.k + 1
    for c, ch in enumerate(plan.minmax):
        if ch.kind in ("min", "max"):
            yield c, ch.attr, slice(c * stride, (c + 1) * stride), ch.kind == "max"


def _ranks_to_values(
    mm: np.ndarray, plan: QueryPlan, keys_of: Callable
) -> tuple[np.ndarray, dict[int, pa.Array]]:
    """MINREACH maps with each rank replaced by its index into the values shipped with them."""
    mm = mm.copy()
    values = {}
    for c, attr, rows, inverted in _rank_rows(plan):
        lane = mm[:, rows, :, 1]
        has = lane != NO_RANK
        ranks = np.where(has, ~lane if inverted else lane, 0)
        uniq, idx = np.unique(ranks[has], return_inverse=True)
        values[c] = keys_of(attr)[1](uniq)
        new = np.zeros_like(lane)
        new[has] = ~idx if inverted else idx
        mm[:, rows, :, 1] = np.where(has, new, NO_RANK)
    return mm, values


def compose_query(
    parts: list[dict], q: Query, ev_schema: pa.Schema, axis, cut: Cut, options: Options
) -> pa.Table:
    """`compose` for query q, an AND from its three counts' summaries
    (gpu_hamlet/engine/conjunction.py)."""
    if not isinstance(q.pattern, And):
        return compose(
            parts, plan_query(q, axis, ev_schema, options.numeric), ev_schema, axis, cut, options
        )
    tables = {}
    for run, opts in runs_of(q, options):
        mine = [p["parts"][run.name] for p in parts if p is not None]
        plan = plan_query(run, axis, ev_schema, opts.numeric)
        tables[run.name] = compose(mine, plan, ev_schema, axis, cut, opts)
    return combine(q, tables, result_schema(q, axis, ev_schema, options.numeric), options)


def compose(
    parts: list[dict], plan: QueryPlan, ev_schema: pa.Schema, axis, cut: Cut, options: Options
) -> pa.Table:
    """The crossing windows of one group from the summaries of its slices, in slice order. The
    others are left out unchecked (`asked`): the summaries hold only the events near the
    slices' bounds, some of an inside window's, over which a sum may overflow alone."""
    parts = [p for p in parts if p is not None]
    maps = SummaryMaps(parts, plan, ev_schema, axis)
    maps.asked = lambda w, start, end: cut.crossing(start, w.within)
    return QueryResults(maps, plan, options, select_backend(options.backend)).table()


class SummaryMaps:
    """The segment maps of one group's slices, from their summaries instead of events: a
    MapSource (gpu_hamlet/engine/results.py), so window composition, group sums, exact
    reconstruction and output conversion are the in-process engine's own."""

    full = True  # summaries are whole maps
    asked: Asked | None = None  # which windows (`compose` asks for the crossing ones)

    def __init__(self, parts: list[dict], plan: QueryPlan, ev_schema: pa.Schema, axis) -> None:
        q = plan.query
        keys = [group_key(k) for p in parts for k in p["key"]]
        codes: dict[tuple, int] = {}
        pid = np.asarray([codes.setdefault(tuple(k), len(codes)) for k in keys], np.int64)
        seg = np.concatenate([p["seg"] for p in parts]) if parts else np.zeros(0, np.int64)
        order = np.lexsort((np.arange(len(pid)), seg, pid))  # slices in order within a pane
        self._order = order
        self._parts = parts
        uniq = list(codes)
        table = pa.table(
            {
                a: key_array([k[i] for k in uniq], ev_schema.field(a).type)
                for i, a in enumerate(q.partition_attrs)
            }
        )
        group: dict[tuple, int] = {}
        gid_of = np.asarray(
            [group.setdefault(k[: len(q.groupby)], len(group)) for k in uniq], np.int64
        )
        # One row per partition: its group values (the only event data the results read).
        self.ev = EventFrame(table, np.zeros(len(uniq)), axis, np.zeros(len(uniq), np.int32), [])
        self.pid, self.seg = pid[order], seg[order]
        self.gid_of_pid, self.rows = gid_of, self.pid
        self._values = _MergedValues(parts, plan)

    def prepare(self):  # the segments are given
        return
        yield

    def empty(self) -> bool:
        return self.pid.shape[0] == 0

    def order_keys(self, attr: str):
        return self._values.order_keys(attr)

    def segment_steps(self, ring, channels, p=0):  # the maps are given: no kernel step
        if ring == "xfloat":
            maps = np.concatenate([x["xfloat"] for x in self._parts])
        elif is_residue(ring):
            ints = np.concatenate([x["exact"] for x in self._parts])[..., None]
            maps = (ints % np.asarray(ring_primes(ring, p), ints.dtype)).astype(np.int64)
        else:
            maps = self._values.maps
        return np.ascontiguousarray(maps[self._order]), self.pid, self.seg
        yield  # a generator, like QueryRows.segment_steps


class _MergedValues:
    """MIN/MAX values of all slices ranked together: the MINREACH maps re-ranked, and the way
    back from ranks to values that QueryResults._minmax asks `order_keys` for."""

    def __init__(self, parts: list[dict], plan: QueryPlan) -> None:
        self._back: dict[str, Callable] = {}
        if not plan.minmax or not parts:
            return
        channels = list(_rank_rows(plan))
        maps = [x["minreach"].copy() for x in parts]
        for attr in {a for _, a, _, _ in channels}:
            mine = [ch for ch in channels if ch[1] == attr]
            # One ranking per attribute over every slice's and channel's values.
            vals = [x["values"][c] for x in parts for c, _, _, _ in mine]
            keys, self._back[attr] = order_keys(pa.concat_arrays(vals))
            offset = 0
            for m, x in zip(maps, parts):
                for c, _, rows, inverted in mine:
                    lane = m[:, rows, :, 1]
                    has = lane != NO_RANK
                    idx = np.where(has, (~lane if inverted else lane) + offset, 0)
                    new = keys[idx] if keys.size else idx
                    m[:, rows, :, 1] = np.where(has, ~new if inverted else new, NO_RANK)
                    offset += len(x["values"][c])
        self.maps = np.concatenate(maps)

    def order_keys(self, attr: str) -> tuple[None, Callable[[np.ndarray], pa.Array]]:
        return None, self._back[attr]

"""The in-process engine: `aggregate(events, workload)` -> one Arrow table per query.

Per query the engine
1. keeps the events the query matches (type in the pattern, filters passed) and that may be in
   one of its trends (gpu_hamlet/engine/pruning.py), sorted by partition (GROUPBY + equivalence
   values)
   and time, cut into segments (panes, or whole tumbling windows); bursts it shares with other
   queries collapse into macro events (gpu_hamlet/engine/sharing.py);
2. runs the backend's segment kernel in each number system it needs: the XFLOAT run gives float
   results, which rows exist, and magnitude bounds; residue runs modulo as many primes as those
   bounds require give exact integers; a MINREACH run gives MIN/MAX;
3. composes segment maps into windows, adds up the equivalence partitions of each group, and
   converts to the output types of docs/semantics.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_hamlet.core.numeric import (
    DECIMAL38_LIMIT,
    bigint_strings,
    crt,
    decimal_array,
    primes,
    primes_for_bits,
    xfloat_log2,
    xfloat_ratio,
    xfloat_to_float,
)
from gpu_hamlet.core.recursions import EVENT
from gpu_hamlet.core.rings import layout
from gpu_hamlet.engine.attributes import Attributes
from gpu_hamlet.engine.backend import Backend, Steps, batches, drive, select_backend
from gpu_hamlet.engine.events import EventFrame, check_columns, prepare_events
from gpu_hamlet.engine.matching import Matcher, check_filter
from gpu_hamlet.engine.optimizer import COST_MODELS
from gpu_hamlet.engine.options import DEFAULTS, Options
from gpu_hamlet.engine.partitions import Partitioner, grouping_values
from gpu_hamlet.engine.pruning import may_complete
from gpu_hamlet.engine.sharing import RunStats, SharedBursts, analyze
from gpu_hamlet.engine.window_copies import window_copies
from gpu_hamlet.errors import EventDataError, NumericOverflowError
from gpu_hamlet.query.parser import parse_workload
from gpu_hamlet.query.plan import COUNT, Channel, QueryPlan, divisor, plan_query
from gpu_hamlet.query.schema import attr_kind
from gpu_hamlet.query.time_axis import TimeAxis
from gpu_hamlet.query.workload import Workload

#: Events (summed over queries, after pruning) of the queries a batching backend runs together:
#: bounds the host memory their arrays take at once.
BATCH_EVENTS = 50_000_000


def aggregate(
    events: Any,
    workload: Workload | str,
    *,
    backend: str | Backend = "auto",
    sharing: str = "dynamic",
    numeric: str = "exact",
    on_overflow: str = "error",
    time_col: str = "time",
    type_col: str = "type",
    stats: RunStats | None = None,
    part: bool = False,
) -> dict[str, pa.Table]:
    """Answer every query of `workload` over `events`, in-process (no Spark).

    Returns one table per query name: GROUPBY columns, window_start, window_end, then the RETURN
    aggregates, one row per (group, window) with at least one trend. `sharing` picks HAMLET's
    dynamic burst-level sharing, static sharing of every burst, or none; results are identical.
    Pass a `RunStats()` as `stats` to receive the sharing decisions and burst snapshots.
    A pattern type that never occurs in non-empty events gives its query no trends and an
    `AbsentTypeWarning`. `part=True` says the events are one part of a larger dataset (a Spark
    task's share): no such warnings, and the plans follow the schema's nullability rather than
    these rows' nulls, so every part computes the same channels (gpu_hamlet/engine/events.py).
    """
    options = Options(backend, sharing, numeric, on_overflow, time_col, type_col)
    return evaluate(events, workload, options, stats=stats, part=part)


def evaluate(
    events: Any,
    workload: Workload | str,
    options: Options,
    *,
    stats: RunStats | None = None,
    part: bool = False,
) -> dict[str, pa.Table]:
    """`aggregate` with its options checked already: what the Spark tasks, pane summaries and
    the command line call."""
    ctx = Context.of(events, workload, options, part)
    wl, be, ev, parts, attrs, plans, matcher = (
        ctx.workload,
        ctx.be,
        ctx.ev,
        ctx.parts,
        ctx.attrs,
        ctx.plans,
        ctx.matcher,
    )
    shared: dict[str, list[SharedBursts]] = {}
    if options.sharing != "none" and ev.n:
        for sset in analyze(wl).sets:
            q0 = sset.queries[0]
            keys = parts.keys(q0.partition_attrs, len(q0.groupby))
            sb = SharedBursts(
                ev,
                attrs,
                be,
                sset,
                keys.order,
                keys.pid,
                plans,
                matcher,
                options.sharing,
                COST_MODELS[be.name],
            )
            if stats is not None:
                stats.sets.append(sb.stats)
            for name in sset.names:
                shared.setdefault(name, []).append(sb)

    def query_run(q) -> QueryRun:
        return QueryRun(
            ev,
            parts,
            attrs,
            plans[q.name],
            matcher,
            shared.get(q.name, []),
            options,
            be,
            record_snapshots=stats is not None,
        )

    out, snapshots = {}, {}
    if batches(be):  # queries together, each kernel step of all of them in one batch
        group: dict[str, QueryRun] = {}

        def run_group() -> None:
            out.update(drive({name: run.table_steps() for name, run in group.items()}, be))
            snapshots.update({name: run.snapshots for name, run in group.items()})
            group.clear()

        for q in wl:  # a batch takes no more queries once they hold BATCH_EVENTS events
            group[q.name] = query_run(q)
            if sum(run.pos.shape[0] for run in group.values()) >= BATCH_EVENTS:
                run_group()
        run_group()
    else:  # one query at a time: only its arrays are alive
        for q in wl:
            run = query_run(q)
            out[q.name], snapshots[q.name] = run.table(), run.snapshots
    if stats is not None:
        stats.snapshots.update({n: s for n, s in snapshots.items() if s is not None})
    return {q.name: out[q.name] for q in wl}


def result_schemas(
    schema: pa.Schema, workload: Workload | str, options: Options = DEFAULTS
) -> dict[str, pa.Schema]:
    """Each query's result schema over events of `schema`, with every check of the events that
    needs no rows (columns, types, aggregated columns, durations, filter literals): the tables
    `evaluate` returns have these schemas, whatever the rows."""
    wl = parse_workload(workload) if isinstance(workload, str) else workload
    axis = check_columns(schema, wl, options.time_col, options.type_col)
    plans = compile_workload(schema, wl, axis, options.numeric)
    return {name: plan.result_schema for name, plan in plans.items()}


def compile_workload(
    schema: pa.Schema, wl: Workload, axis: TimeAxis, numeric: str
) -> dict[str, QueryPlan]:
    """Every query's plan for events of `schema` (its columns checked by `check_columns`), and
    every filter checked against its column, before any kernel runs."""
    plans = {q.name: plan_query(q, axis, schema, numeric) for q in wl}
    for q in wl:
        for f in q.filters:
            check_filter(q, f, schema.field(f.attr).type)
    return plans


@dataclass
class Context:
    """What every query of one call shares: parsed workload, backend, events, sort orders,
    attribute conversions, plans and filter masks."""

    workload: Workload
    be: Backend
    ev: EventFrame
    parts: Partitioner
    attrs: Attributes
    plans: dict[str, QueryPlan]
    matcher: Matcher

    @classmethod
    def of(
        cls, events: Any, workload: Workload | str, options: Options, part: bool = False
    ) -> Context:
        wl = parse_workload(workload) if isinstance(workload, str) else workload
        be = select_backend(options.backend)
        ev = prepare_events(events, wl, options.time_col, options.type_col, part)
        plans = compile_workload(ev.table.schema, wl, ev.axis, options.numeric)
        matcher = Matcher(ev)
        _check_window_bounds(ev, wl, plans, matcher)
        return cls(wl, be, ev, Partitioner(ev), Attributes(ev), plans, matcher)


def _check_window_bounds(
    ev: EventFrame, wl: Workload, plans: dict[str, QueryPlan], matcher: Matcher
) -> None:
    """Every window holding an event a query matches has bounds the time column's type holds
    (times near its ends would wrap window_end, and the window arithmetic, around). Checked on
    all events first: only a query failing that looks at its own events."""
    if not ev.n or ev.axis.is_float:
        return
    span = int(ev.time.min()), int(ev.time.max())
    for q in wl:
        plan = plans[q.name]
        within, slide = int(plan.windowing.within), int(plan.windowing.slide)  # integer ticks
        if ev.axis.window_overflow(*span, within, slide) is None:
            continue
        t = ev.time[matcher.positions(q, plan.template) >= 0]
        fault = ev.axis.window_overflow(t.min(), t.max(), within, slide) if t.size else None
        if fault:
            raise EventDataError(f"query {q.name}: {fault}")


# --- one query ---------------------------------------------------------------------------------


@dataclass
class Windows:
    """Per output row (group, window): where its values sit in the window arrays."""

    order: np.ndarray  # permutation of the kernel's windows into (group, window) order
    starts: np.ndarray  # first window of each output row in that order
    k: np.ndarray  # window index per output row
    rep: np.ndarray  # an event row of the group, for the GROUPBY values
    grouped: bool  # whether several partitions add up into one row


def _null_where(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`values` as an object array, None where `mask`."""
    return np.where(mask, np.array(None, dtype=object), values)


class QueryRun:
    """Runs one query plan over the events and builds its result table."""

    def __init__(
        self,
        ev: EventFrame,
        parts: Partitioner,
        attrs: Attributes,
        plan: QueryPlan,
        matcher: Matcher,
        shared: list[SharedBursts],
        options: Options,
        be: Backend,
        record_snapshots: bool = False,
        maps: bool = False,
    ) -> None:
        self.ev, self.attrs, self.plan, self.options, self.be = ev, attrs, plan, options, be
        self.tpl = plan.template
        q = plan.query
        keys = parts.keys(q.partition_attrs, len(q.groupby))
        self.sources = shared
        tpl = self.tpl
        w = plan.windowing
        # The query's events; without `maps` only those that may be in a trend (a slice's maps
        # must keep events whose partners lie in other slices).
        fast = (
            shared[0].compressed(q, tpl, matcher, w.within, prune=not maps)
            if len(shared) == 1
            else None
        )
        macro_src: np.ndarray | None  # per row: the shared burst source, or -1
        macro_seg: np.ndarray | None  # per row: the source's coefficient segment, or -1
        if fast is not None:  # the set stream's slots q matches, already pruned
            qidx, self.rows, self.time, self.pid, macro_seg, self.pos = fast
            macro_src = None  # one source: derived from macro_seg
        elif not shared:  # every event in partition order; pos is -1 where q matches none
            qidx = None  # the identity
            self.rows, self.time, self.pid = keys.order, keys.time, keys.pid
            self.pos = matcher.positions(q, tpl)[keys.order]
            macro_src = macro_seg = None
        else:
            pos_all = matcher.positions(q, tpl)
            qidx = np.flatnonzero(pos_all[keys.order] >= 0)
            # Shared bursts collapse into macro events: (source, coefficient segment) per row.
            macro_src = np.full(qidx.shape[0], -1, np.int64)
            macro_seg = np.full(qidx.shape[0], -1, np.int64)
            for s_i, sb in enumerate(shared):
                inj = sb.inject(q.name, qidx)
                if inj is None:
                    continue
                qidx = qidx[inj.keep]
                macro_src = macro_src[inj.keep]
                macro_seg = macro_seg[inj.keep]
                macro_src[inj.macro] = s_i
                macro_seg[inj.macro] = inj.segment
            self.rows = keys.order[qidx]
            self.time = ev.time[self.rows]
            self.pos = matcher.positions(q, tpl, self.rows)
            for s_i, sb in enumerate(shared):  # a macro row stands at its burst's Kleene position
                self.pos[macro_src == s_i] = tpl.position[sb.sset.kleene_type]
            # pid: the partition (GROUPBY + equivalence values); gid: the GROUPBY group.
            self.pid = keys.pid[qidx]
        self._check_values(matcher)
        if fast is None:
            sel = (
                np.flatnonzero(self.pos >= 0)
                if maps
                else may_complete(self.pid, self.time, self.pos, tpl.k, w.within)
            )
            qidx = sel if qidx is None else qidx[sel]
            self._keep(sel, ("rows", "pid", "pos", "time"))
            macro_seg = macro_seg[sel] if macro_seg is not None else None
            macro_src = macro_src[sel] if macro_src is not None else None
        if macro_seg is None:  # no shared bursts: no macro rows
            macro_seg = np.full(self.pos.shape[0], -1, np.int64)
        if macro_src is None:  # at most one source: rows with a segment are its macro rows
            macro_src = np.where(macro_seg >= 0, 0, -1)
        self.macro_seg: np.ndarray = macro_seg
        self.macro_src: np.ndarray = macro_src
        self.macro = self.macro_src >= 0
        self.snapshots: list[float] | None = [] if record_snapshots and self.macro.any() else None
        self.gid = keys.gid[qidx]
        self.maps = maps
        self.full = w.full or maps  # `maps`: every segment as its map (pane summaries)
        self.seg: np.ndarray | None = None  # each event's segment, from the segmenting step

    def _segments(self) -> Steps:
        """Segment the events (their panes: a backend step), then choose how windows are
        formed: from pane maps, or, when cheaper, each window's own events from zero."""
        if self.seg is not None:
            return
        w = self.plan.windowing
        self.seg, starts = yield ("segments", (self.pid, self.time, w.seg))
        if self.maps:
            return
        if w.full and self._windows_cheaper(starts.shape[0]):
            self._into_windows()
        if not self.full:  # segments are whole windows: prune again, window by window
            change = np.ones(self.seg.shape[0], bool)
            change[1:] = (self.pid[1:] != self.pid[:-1]) | (self.seg[1:] != self.seg[:-1])
            self._keep(may_complete(np.cumsum(change), self.time, self.pos, self.tpl.k, None))

    _PER_EVENT = ("rows", "pid", "pos", "time", "macro_src", "macro_seg", "macro", "gid", "seg")

    def _keep(self, rows: np.ndarray, names: tuple[str, ...] = _PER_EVENT) -> None:
        """Keep the per-event arrays `names` at `rows` (a mask, or indices that may repeat)."""
        for name in names:
            setattr(self, name, getattr(self, name)[rows])

    def _windows_cheaper(self, nseg: int) -> bool:
        """Whether running each window's events from zero beats composing pane maps, for the
        events in `nseg` non-empty (partition, pane) runs.

        Pane maps cost (1 + carried positions) columns per event, plus a D x D map and about two
        sparse D^3 products per non-empty (partition, pane); copying each event into its
        r = ceil(n/a) windows costs r vector updates. With many tiny panes (equivalence
        partitions with a few events per pane) the copies win; with dense panes the maps do."""
        w, tpl = self.plan.windowing, self.tpl
        n = self.pos.shape[0]
        if n == 0:
            return False
        nch = len(self.plan.linear)
        D = nch * (tpl.k + 1) + 1
        per_pane_maps = n * (1 + tpl.carry.shape[0]) * nch + nseg * (D * D + 0.5 * D**3)
        copies = n * math.ceil(w.n / w.a) * nch * 1.5
        return copies < per_pane_maps

    def _into_windows(self) -> None:
        """Copy every event into each window holding its pane; windows become the segments."""
        a, n = self.plan.windowing.a, self.plan.windowing.n
        seg = self.seg
        assert seg is not None, "events are segmented first"
        first = -((n - 1 - seg) // a)  # ceil((pane - n + 1) / a)
        total = int((seg // a - first + 1).sum())
        rep, k = window_copies(self.pid, seg, a, n, total)
        self._keep(rep)
        self.seg = k
        self.full = False

    # -- inputs --

    def _check_values(self, matcher: Matcher) -> None:
        """Values SUM and AVG cannot add: NaN or infinite floats, and decimals beyond 38 digits
        outside bigint mode. Checked on every event the query matches, whether or not it is in a
        trend (so the check does not depend on pruning or sharing)."""
        q = self.plan.query
        pos = None
        for agg in q.aggregates:
            if agg.func not in ("SUM", "AVG"):
                continue
            assert agg.type is not None and agg.attr is not None, "SUM and AVG take TYPE.attr"
            t = self.ev.table.schema.field(agg.attr).type
            if pa.types.is_floating(t):
                what = "NaN or infinite values"
                advice = (
                    f"SUM and AVG need finite numbers; filter them out, e.g. WHERE "
                    f"{agg.type}.{agg.attr} > -1e308 AND {agg.type}.{agg.attr} < 1e308"
                )
            elif pa.types.is_decimal(t) and t.bit_width > 128 and self.options.numeric != "bigint":
                what = "values of more than 38 digits"
                advice = "use numeric='bigint' to add them exactly"
            else:
                continue
            bad = self.attrs.unaddable(agg.attr)
            if bad is None:
                continue
            pos = matcher.positions(q, self.tpl) if pos is None else pos
            of_type = np.flatnonzero(pos == self.tpl.position[agg.type])
            n = pc.sum(bad.take(pa.array(of_type))).as_py() or 0
            if n:
                raise EventDataError(
                    f"query {q.name}: {agg} reads column '{agg.attr}', which holds {what} on "
                    f"{n} matched {agg.type} event(s); {advice}"
                )

    def _weights(self, ring: str, channels: tuple[Channel, ...], p: int = 0):
        """Event weights [channels, rows, lanes], and the macro rows' coefficients: (MU, K, and
        the row's index into them or -1), one entry per macro row."""
        labels = np.where(self.macro, -1, self.pos) if self.sources else self.pos
        W = self.attrs.weights(ring, channels, self.rows, labels, self.tpl.position, p)
        dtype, lanes = layout(ring)
        mus: list[np.ndarray] = [np.zeros((0, 1, lanes), dtype)]
        ks: list[np.ndarray] = [np.zeros((0, len(channels), lanes), dtype)]
        mseg = np.full(self.pos.shape[0], EVENT, np.int64)
        offset = 0
        for s_i, sb in enumerate(self.sources):
            at = np.flatnonzero(self.macro_src == s_i)
            if at.size:
                mu, K = sb.coefficients(ring, p, channels, self.macro_seg[at])
                mseg[at] = offset + np.arange(at.size)
                mus.append(mu)
                ks.append(K)
                offset += at.size
        return W, np.concatenate(mus), np.concatenate(ks), mseg

    # -- kernels --

    def segment_maps(self, ring: str, channels: tuple[Channel, ...], p: int = 0):
        """Per (partition, segment) run: its map (with `full`) or its result from zero, as
        (maps [runs, D, D or 1, lanes], run_pid, run_seg)."""

        def steps() -> Steps:
            yield from self._segments()
            return (yield from self._segment_steps(ring, channels, p))

        return drive({"": steps()}, self.be)[""]

    def _segment_steps(self, ring: str, channels: tuple[Channel, ...], p: int = 0) -> Steps:
        tpl = self.tpl
        W, MU, K, mseg = self._weights(ring, channels, p)
        dtype, lanes = layout(ring)
        snap: np.ndarray = np.zeros((self.pos.shape[0], 1, lanes), dtype)
        maps, run_pid, run_seg = yield (
            "segment_maps",
            (
                ring,
                self.pid,
                self.seg,
                self.time,
                self.pos,
                W,
                MU,
                K,
                mseg,
                tpl,
                self.full,
                snap,
                p,
            ),
        )
        if ring == "xfloat" and self.snapshots is not None:
            at = np.flatnonzero(self.macro)
            self.snapshots = xfloat_to_float(snap[at, 0, 0], snap[at, 0, 1]).tolist()
        return maps, run_pid, run_seg

    def _run(self, ring: str, channels: tuple[Channel, ...], p: int = 0) -> Steps:
        """Window values [windows, channels, lanes] (kernel order) for one ring."""
        w, tpl = self.plan.windowing, self.tpl
        maps, run_pid, run_seg = yield from self._segment_steps(ring, channels, p)
        finals = np.asarray([c * (tpl.k + 1) + tpl.k for c in range(len(channels))], np.int64)
        if self.full:
            return (yield ("compose_windows", (ring, maps, run_pid, run_seg, w.a, w.n, finals, p)))
        return np.ascontiguousarray(maps[:, finals, 0, :]), run_pid, run_seg

    def _grouped(self, ring: str, vals: np.ndarray, win: Windows, param: int) -> Steps:
        if not win.grouped:
            return vals
        return (
            yield (
                "reduce_sorted",
                (ring, np.ascontiguousarray(vals[win.order]), win.starts, param),
            )
        )

    def _windows(self, win_pid: np.ndarray, win_k: np.ndarray) -> Windows:
        first = np.searchsorted(self.pid, win_pid)
        gid = self.gid[first]
        rep = self.rows[first]
        q = self.plan.query
        if len(q.partition_attrs) == len(q.groupby):
            idx = np.arange(len(win_k))
            return Windows(idx, idx, win_k, rep, False)
        order = np.lexsort((win_k, gid))
        g, k = gid[order], win_k[order]
        change = np.ones(len(order), bool)
        change[1:] = (g[1:] != g[:-1]) | (k[1:] != k[:-1])
        starts = np.flatnonzero(change)
        return Windows(order, starts, k[starts], rep[order][starts], True)

    # -- results --

    def table(self) -> pa.Table:
        return drive({"": self.table_steps()}, self.be)[""]

    def table_steps(self) -> Steps:
        """The result table, computed as a generator of backend steps (gpu_hamlet/engine/backend.py
        `drive` runs many queries' steps together)."""
        plan, q = self.plan, self.plan.query
        yield from self._segments()
        if self.pos.shape[0] == 0:
            return self._build(np.zeros(0, np.int64), np.zeros(0, np.int64), {})
        vals, win_pid, win_k = yield from self._run("xfloat", plan.linear)
        win = self._windows(win_pid, win_k)
        fl = yield from self._grouped("xfloat", vals, win, 0)
        keep = fl[:, 0, 0] > 0  # rows with at least one trend (counts are exact in zero-ness)
        fl = fl[keep]
        lin = {ch: (fl[:, i, 0], fl[:, i, 1]) for i, ch in enumerate(plan.linear)}
        exact = (yield from self._exact(win, keep, lin)) if plan.exact else {}
        mm = (yield from self._minmax(win, keep)) if plan.minmax else {}
        cols: dict[str, pa.Array] = {}
        for agg in q.aggregates:
            cols[agg.name] = self._column(agg, lin, exact, mm, win, keep)
        return self._build(win.k[keep], win.rep[keep], cols)

    def _exact(self, win: Windows, keep: np.ndarray, lin) -> Steps:
        """Exact Python ints per exact channel (None where certainly beyond decimal(38))."""
        plan = self.plan
        bits = 1.0
        over: dict[Channel, np.ndarray] = {}
        for ch in plan.exact:
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
            if self.options.numeric == "exact":
                over[ch] = certain
                bound = np.where(certain, 0.0, bound)
            if bound.size:
                bits = max(bits, float(np.max(bound)))
        n_primes = primes_for_bits(bits + 2.0)
        res = np.empty((n_primes, int(keep.sum()), len(plan.exact)), np.int64)
        for j, p in enumerate(primes(n_primes)):
            vals, _, _ = yield from self._run("modp", plan.exact, p)
            res[j] = (yield from self._grouped("modp", vals, win, p))[keep][:, :, 0]
        out = {}
        for i, ch in enumerate(plan.exact):
            ints = crt(np.ascontiguousarray(res[:, :, i]), signed=ch.kind == "sum")
            if ch in over:
                ints = _null_where(over[ch], ints)
            out[ch] = ints
        return out

    def _minmax(self, win: Windows, keep: np.ndarray) -> Steps:
        """MIN/MAX columns (Arrow, null where no trend reaches the type)."""
        plan = self.plan
        vals, _, _ = yield from self._run("minreach", plan.minmax)
        vals = (yield from self._grouped("minreach", vals, win, 0))[keep]
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
            col = self.attrs.order_keys(ch.attr)[1](np.where(reach, keys, keys[reach][0]))
            out[ch] = pc.if_else(pa.array(reach), col, pa.nulls(len(col), col.type))
        return out

    def _column(self, agg, lin, exact, mm, win: Windows, keep) -> pa.Array:
        """The aggregate's column, of its type in the plan's result schema."""
        if agg.func in ("MIN", "MAX"):
            return mm[Channel(agg.func.lower(), agg.type, agg.attr)]
        typ = self.plan.result_schema.field(agg.name).type
        kind = attr_kind(self.plan.attr_types[agg.attr]) if agg.attr else "int"
        scale = self.plan.attr_types[agg.attr].scale if kind == "decimal" else 0
        if agg.type is None:
            ch = COUNT
        elif agg.attr is None:
            ch = Channel("count_e", agg.type)
        else:
            ch = Channel("sum", agg.type, agg.attr)
        # SUM and AVG over events whose values are all null are null (SQL).
        d = divisor(agg, agg.attr in self.plan.nullable) if agg.attr else None
        empty = lin[d][0] == 0 if d in lin else np.zeros(int(keep.sum()), bool)
        if agg.func == "AVG":
            if ch in exact and d in exact:
                s, c = exact[ch], exact[d]
                ok = np.array([a is not None and b is not None for a, b in zip(s, c)], bool)
                if ok.all():
                    return pa.array([a / (b * 10**scale) if b else None for a, b in zip(s, c)], typ)
            with np.errstate(divide="ignore", invalid="ignore"):
                vals = xfloat_ratio(*lin[ch], *lin[d]) / 10.0**scale
            return self._float_column(agg, vals, win, keep, empty)
        if not pa.types.is_floating(typ):  # exact digits: the exact runs computed them
            ints = exact[ch]
            if pa.types.is_string(typ):
                return bigint_strings(_null_where(empty, ints), scale)
            bad = np.array([v is None or abs(v) >= DECIMAL38_LIMIT for v in ints], bool) & ~empty
            if bad.any():
                if self.options.on_overflow == "error":
                    i = int(np.flatnonzero(bad)[0])
                    raise NumericOverflowError(
                        self._overflow_message(
                            agg, f"does not fit decimal(38, {scale}) (10^38 or more)", win, keep, i
                        )
                    )
            return decimal_array(_null_where(bad | empty, ints), typ.scale)
        vals = xfloat_to_float(*lin[ch]) / 10.0**scale
        return self._float_column(agg, vals, win, keep, empty)

    def _float_column(
        self, agg, vals: np.ndarray, win: Windows, keep, null: np.ndarray
    ) -> pa.Array:
        """float64 results, null where `null` (no value to aggregate) or, with
        on_overflow='null', beyond the float64 range."""
        bad = ~np.isfinite(vals) & ~null
        if bad.any() and self.options.on_overflow == "error":
            i = int(np.flatnonzero(bad)[0])
            raise NumericOverflowError(
                self._overflow_message(agg, "is beyond the float64 range", win, keep, i)
            )
        mask = bad | null
        typ = self.plan.result_schema.field(agg.name).type
        return pa.array(np.where(mask, 0.0, vals), typ, mask=mask if mask.any() else None)

    def _overflow_message(self, agg, what: str, win: Windows, keep, i: int) -> str:
        q = self.plan.query
        rep = int(win.rep[keep][i])
        group = ", ".join(
            f"{g}={grouping_values(self.ev.table.column(g).slice(rep, 1))[0].as_py()!r}"
            for g in q.groupby
        )
        k = int(win.k[keep][i])
        w = self.plan.windowing
        start, end = self.ev.axis.to_arrow(np.asarray([k * w.slide, k * w.slide + w.within]))
        kind = attr_kind(self.plan.attr_types[agg.attr]) if agg.attr else "int"
        ways = []
        if agg.func != "AVG" and kind != "float":  # exact in bigint mode
            ways.append("numeric='bigint' for exact digits of any size")
            if self.options.numeric == "exact":
                ways.append("numeric='float' for float64")
        ways.append("on_overflow='null'")
        return (
            f"query {q.name}: {agg} for group ({group or 'all events'}) in window "
            f"[{start.as_py()}, {end.as_py()}) {what}; use " + ", or ".join(ways)
        )

    def _build(self, k: np.ndarray, rep: np.ndarray, cols: dict[str, pa.Array]) -> pa.Table:
        """The result table: its schema is the plan's result schema, which the Spark driver
        declares without running anything (gpu_hamlet/query/schema.py)."""
        q, ev, w, schema = self.plan.query, self.ev, self.plan.windowing, self.plan.result_schema
        out: dict[str, pa.Array] = {}
        for g in q.groupby:
            out[g] = grouping_values(
                ev.table.column(g).take(pa.array(rep, pa.int64()))
            ).combine_chunks()
        start = k * w.slide if not ev.axis.is_float else k.astype(np.float64) * w.slide
        out["window_start"] = ev.axis.to_arrow(np.asarray(start))
        out["window_end"] = ev.axis.to_arrow(np.asarray(start + w.within))
        for agg in q.aggregates:
            out[agg.name] = cols.get(agg.name, pa.array([], schema.field(agg.name).type))
        table = pa.table(out)
        assert table.schema.equals(schema), f"query {q.name}: {table.schema} is not {schema}"
        keys = [(g, "ascending") for g in q.groupby] + [("window_start", "ascending")]
        return table.sort_by(keys) if table.num_rows > 1 else table

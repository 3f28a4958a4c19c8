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

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from gpu_hamlet.core.panes import first_window, float_panes
from gpu_hamlet.core.panes import panes as host_panes
from gpu_hamlet.engine import fusion
from gpu_hamlet.engine.adjacent import check_next, check_next_values
from gpu_hamlet.engine.attributes import Attributes
from gpu_hamlet.engine.backend import Backend, batches, select_backend
from gpu_hamlet.engine.conjunction import combine, run_as, runs_of
from gpu_hamlet.engine.events import EventFrame, check_columns, prepare_events
from gpu_hamlet.engine.host_memory import keep_freed_memory
from gpu_hamlet.engine.matching import Matcher, check_filter
from gpu_hamlet.engine.optimizer import COST_MODELS, WINDOW_COSTS, EngineCostModel
from gpu_hamlet.engine.options import DEFAULTS, Options
from gpu_hamlet.engine.partitions import Partitioner, SortedKeys
from gpu_hamlet.engine.query_rows import QueryRows
from gpu_hamlet.engine.results import QueryResults
from gpu_hamlet.engine.row_sample import KeptShares, PaneRuns
from gpu_hamlet.engine.sharing import (
    RunStats,
    SharedBursts,
    SharingStats,
    analyze,
    may_pay,
    start_stats,
)
from gpu_hamlet.engine.stage_sharing import SharedStages, sample_of, shareable_stages, stage_plan
from gpu_hamlet.engine.transitions import Pool
from gpu_hamlet.engine.window_sharing import SharedWindows, windows_may_pay
from gpu_hamlet.errors import EventDataError, NumericOverflowError
from gpu_hamlet.host_threads import cpu_threads, host_map
from gpu_hamlet.names import shown
from gpu_hamlet.query.parser import as_workload
from gpu_hamlet.query.pattern import And
from gpu_hamlet.query.plan import Asked, QueryPlan, Windowing, plan_query
from gpu_hamlet.query.schema import result_schema
from gpu_hamlet.query.time_axis import TimeAxis
from gpu_hamlet.query.workload import Query, Workload

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
    aggregates, one row per (group, window) with at least one trend. `sharing` picks the dynamic
    plan (GLORIA's shared transitions and cycles, HAMLET's per-burst decisions), HAMLET's
    bursts alone (`hamlet`), static sharing of every burst, or none: results are identical (floats
    to their last bits where the modes add in other orders, docs/semantics.md section 12).
    Pass a `RunStats()` as `stats` to receive the sharing decisions and burst snapshots.
    A pattern type that never occurs in non-empty events gives its query no trends and an
    `AbsentTypeWarning`. `part=True` says the events are one part of a larger dataset (a Spark
    task's share): no such warnings, and the plans follow the schema's nullability rather than
    these rows' nulls, so every part computes the same channels (gpu_hamlet/engine/events.py).
    """
    options = Options(backend, sharing, numeric, on_overflow, time_col, type_col)
    if not isinstance(part, bool):  # (any truthy value turned part mode on)
        raise TypeError(f"part must be True or False, not {part!r}")
    return evaluate(events, workload, options, stats=stats, part=part)


def evaluate(
    events: Any,
    workload: Workload | str,
    options: Options,
    *,
    stats: RunStats | None = None,
    part: bool = False,
    seen_types: set[str] | None = None,
    asked: Asked | None = None,
) -> dict[str, pa.Table]:
    """`aggregate` with its options checked already: what the Spark tasks, pane summaries and
    the command line call. `seen_types` receives the event types present (a stream, of parts,
    warns of absent ones at its end). `asked`: which windows the caller asks for (`Asked`); the
    others are left out of the tables, unchecked: a stream's chunk and a cut group's slice hold
    only some of the events of some windows (gpu_hamlet/engine/streaming.py, summaries.py),
    where a sum of values of both signs may overflow that does not over all of them."""
    start_stats(stats)
    ctx = Context.of(events, workload, options, part)
    return evaluate_in(ctx, stats=stats, seen_types=seen_types, asked=asked)


def evaluate_in(
    ctx: Context,
    *,
    stats: RunStats | None = None,
    seen_types: set[str] | None = None,
    asked: Asked | None = None,
) -> dict[str, pa.Table]:
    """`evaluate` over a Context made already, `stats` started (`start_stats`): a cut group's
    slice (engine/summaries.py) reads the prepared events too, and preparing them (`Context.of`:
    30 ms against `evaluate`'s 113 ms, 50 ridesharing queries over 10^6 events) ran twice."""
    options = ctx.call_options
    if seen_types is not None:
        ev = ctx.ev
        counts = ev.type_counts if ev.type_counts is not None else np.ones(len(ev.type_names))
        seen_types.update(ev.type_names[c] for c in np.flatnonzero(counts))
    wl, be, ev, parts, attrs, plans, matcher = (
        ctx.workload,
        ctx.be,
        ctx.ev,
        ctx.parts,
        ctx.attrs,
        ctx.plans,
        ctx.matcher,
    )
    if stats is not None:
        stats.ran_on(be)
    shared: dict[str, list[SharedBursts | SharedWindows | SharedStages]] = {}
    if options.sharing != "none" and ev.n:
        for sset in analyze(ctx.runs, ev.axis.is_float).sets:
            q0 = sset.queries[0]
            keys = parts.keys(q0.partition_attrs, len(q0.groupby))  # (the queries' own sort)
            if options.sharing == "dynamic" and not (
                windows_may_pay(sset, ev, keys, plans, matcher, WINDOW_COSTS[be.name], be)
                if sset.conditions
                else may_pay(sset, ev, keys, plans, matcher, COST_MODELS[be.name], be)
            ):
                if stats is not None:  # its queries run alone, as with sharing="none"
                    windows = bool(sset.conditions)
                    stats.sets.append(
                        SharingStats(
                            sset.kleene_type,
                            sset.names,
                            below_fixed_costs=not windows,
                            loses_on_sample=windows,
                        )
                    )
                continue
            args = (ev, attrs, be, sset, keys, plans, matcher, options.sharing)
            sb: SharedBursts | SharedWindows = (
                SharedWindows(*args, WINDOW_COSTS[be.name])
                if sset.conditions
                else SharedBursts(*args, COST_MODELS[be.name])
            )
            if stats is not None:
                stats.sets.append(sb.stats)
            for name in sset.names:
                shared.setdefault(name, []).append(sb)
    if options.sharing == "dynamic" and ev.n:  # GLORIA's Q-sets of SEQ transitions and cycles
        by_name = {q.name: q for q in ctx.runs}
        model = COST_MODELS[be.name]
        for key, chain, names, share in planned_stages(ctx, model):
            qs = tuple(by_name[n] for n in names)
            keys = parts.keys(qs[0].partition_attrs, len(qs[0].groupby))
            sc = SharedStages(ev, attrs, be, key, chain, qs, keys, plans, matcher, model, share)
            if stats is not None:
                stats.sets.append(sc.stats)
            for name in sc.blocks:
                shared.setdefault(name, []).append(sc)

    def query_rows(q) -> QueryRows:
        return QueryRows(
            ev,
            parts,
            attrs,
            plans[q.name],
            matcher,
            shared.get(q.name, []),
            ctx.options[q.name],
            be,
            record_snapshots=stats is not None,
            asked=asked,
        )

    out, snapshots = {}, {}
    group: dict[str, QueryRows] = {}
    # A batching backend advances a batch of queries together, each kernel step of all of them
    # in one batch; another holds a few queries' rows at a time, as many as one fused run takes
    # (gpu_hamlet/engine/fusion.py), and a query of more rows alone.
    batched = batches(be)
    limit = getattr(be, "batch_events", BATCH_EVENTS) if batched else fusion.FUSED_ROWS

    def run_group() -> None:
        out.update(fusion.tables(group, plans, ctx.options, be))
        snapshots.update({n: rows.snapshots for n, rows in group.items()})
        group.clear()

    def reads(q: Query) -> int:
        """About the rows building q's rows reads: the collapsed stream of the one set it
        shares bursts of (a few rows per burst), else every event."""
        src = [sb for sb in shared.get(q.name, []) if sb.shares(q.name)]
        one = src[0] if len(src) == 1 and isinstance(src[0], SharedBursts) else None
        return ev.n if one is None or one.slots is None else one.slots.idx.shape[0]

    # Queries' rows are built on the host's threads, a few queries at a time (each sort is made
    # first, once), queries of one plan shape one after another (they may be fused); a group
    # takes no more queries once they hold `limit` rows.
    first_of: dict[int | str, int] = {}  # per shape (a query without one: its name)

    def shape_order(q: Query) -> int:
        shape = plans[q.name].shape
        return first_of.setdefault(q.name if shape is None else shape, len(first_of))

    runs = sorted(ctx.runs, key=shape_order) if len(ctx.runs) > 1 else list(ctx.runs)
    width = (be.threads if hasattr(be, "threads") else cpu_threads()) if batched else 1
    for q in runs:
        parts.keys(q.partition_attrs, len(q.groupby))
    held = 0  # the rows of the queries in `group`
    try:
        for i in range(0, len(runs), width):
            some = runs[i : i + width]
            for q, built in zip(some, host_map(query_rows, some, width, sum(map(reads, some)))):
                group[q.name] = built
                held += built.pos.shape[0]
                if held >= limit:
                    run_group()
                    held = 0
        run_group()
    except NumericOverflowError as exc:
        raise first_overflow(ctx, query_rows) or exc from None
    for name, run in ctx.take.items():  # (a query alike another: its columns of their run)
        out[name] = out[run].select(plans[name].result_schema.names)
        snapshots[name] = snapshots[run]
    if stats is not None:  # (the queries asked for: not the runs of an AND or of alike ones)
        named = {q.name for q in wl}
        stats.snapshots.update({n: s for n, s in snapshots.items() if s is not None and n in named})
    return {q.name: ctx.finish(q, out) for q in wl}


def first_overflow(
    ctx: Context, query_rows: Callable[[Query], QueryRows]
) -> NumericOverflowError | None:
    """The overflow of the first run, in the workload's order, whose table has one. Which
    query's error a call meets first depends on the backend's order of steps (the GPU's rounds
    against the CPU's threads) and on fusion (a fused run's message names its first query):
    here each runs alone, in order, on the error's path only."""
    for q in ctx.runs:
        plan = ctx.plans[q.name]
        try:
            QueryResults(query_rows(q), plan, ctx.options[q.name], ctx.be).table()
        except NumericOverflowError as exc:
            return exc
    return None


def planned_stages(
    ctx: Context, model: EngineCostModel
) -> list[tuple[str, tuple[Pool, ...], tuple[str, ...], float]]:
    """GLORIA's Q-sets that `dynamic` builds in this call (`stage_plan`, weighing each query's
    channels and pruning), each with the share of its runs' events that its queries keep alone
    (`KeptShares`), which is all that sharing a run can save them."""
    if not shareable_stages(ctx.runs).pools:  # (most workloads: a small call's every us counts)
        return []
    parts, plans = ctx.parts, ctx.plans

    def keys_of(q: Query) -> SortedKeys:
        return parts.keys(q.partition_attrs, len(q.groupby))

    widths = {n: len(plan.linear) for n, plan in plans.items()}
    copies = {n: plan.windowing.copies for n, plan in plans.items()}
    kept = KeptShares(ctx.runs, keys_of, plans, ctx.matcher, host_panes, ctx.ev.code_of)
    pane_runs = PaneRuns(sample_of(ctx.ev, ctx.ev.time), lambda n: plans[n].windowing)
    return [
        (key, chain, part, kept(part, tuple(t for p in chain for t in p.types)))
        for key, chain, names in stage_plan(
            ctx.runs, ctx.ev, model, widths, kept, pane_runs, copies
        )[1]
        for part in (_by_pane(names, plans) if ctx.ev.axis.is_float else [names])
    ]


def _by_pane(names: tuple[str, ...], plans: dict[str, QueryPlan]) -> list[tuple[str, ...]]:
    """A Q-set's queries of one pane each, those of two queries or more: over float times only
    queries of one pane share runs (`sharing.analyze`)."""
    panes: dict[int, list[str]] = {}
    for n in names:
        panes.setdefault(plans[n].query.pane_ms, []).append(n)
    return [tuple(part) for part in panes.values() if len(part) >= 2]


def result_schemas(
    schema: pa.Schema, workload: Workload | str, options: Options = DEFAULTS
) -> dict[str, pa.Schema]:
    """Each query's result schema over events of `schema`, with every check of the events that
    needs no rows (columns, types, aggregated columns, durations, filter literals): the tables
    `evaluate` returns have these schemas, whatever the rows."""
    if not isinstance(schema, pa.Schema):  # (a table's schema is `table.schema`)
        raise TypeError(f"result_schemas takes a pyarrow Schema, not {type(schema).__name__}")
    if not isinstance(options, Options):
        raise TypeError(f"options must be a gpu_hamlet Options, not {type(options).__name__}")
    wl = as_workload(workload)
    axis = check_columns(schema, wl, options.time_col, options.type_col)
    compile_workload(schema, wl, axis, options)
    return {q.name: result_schema(q, axis, schema, options.numeric) for q in wl}


def compile_workload(
    schema: pa.Schema, wl: Workload, axis: TimeAxis, options: Options
) -> tuple[Workload, dict[str, QueryPlan], dict[str, Options], dict[str, str]]:
    """The queries the engine runs for `wl` (an AND as its three counts,
    gpu_hamlet/engine/conjunction.py), their plans for events of `schema` (its columns checked
    by `check_columns`) and their options; every filter checked against its column, before any
    kernel runs. Queries alike but for their names and RETURN run once (`run_as`): the last
    value maps each query that is not run to the run whose table's columns it takes.

    Compiled once per (schema, workload, time axis, options): plans are immutable, and a caller
    with many small calls (tiny tables, many groups or Spark tasks) would otherwise pay the
    automaton construction per query and call (docs/architecture.md section 4)."""
    texts = tuple((q.text, q.window_text) for q in wl)  # equal queries may be spelled apart
    runs, plans, run_options, take = _compiled(schema, wl, texts, axis, options)
    return runs, dict(plans), dict(run_options), take


@functools.lru_cache(maxsize=64)
def _compiled(
    schema: pa.Schema, wl: Workload, texts: tuple, axis: TimeAxis, options: Options
) -> tuple[Workload, dict[str, QueryPlan], dict[str, Options], dict[str, str]]:
    """`compile_workload`'s work; `texts` is part of the cache key only."""
    for q in wl:  # (first as the workload's queries: an error names q, not a run of q's)
        Windowing.of(q, axis)
    runs = [run for q in wl for run in runs_of(q, options)]
    plans = {q.name: plan_query(q, axis, schema, o.numeric) for q, o in runs}
    for q in wl:
        for f in q.filters:
            check_filter(q, f, schema.field(f.attr).type)
        for cond in q.next_conditions:
            check_next(q, cond, schema)
    run, take = run_as(runs)
    queries = {q.name: q for q, _ in runs}
    for q, o in run:
        if q.name not in plans:  # queries alike but for RETURN: each error names its asker
            asked: dict[str, str] = {}
            for n in (n for n in take if take[n] == q.name):
                asked.update((a.name, n) for a in queries[n].aggregates if a.name not in asked)
            plan = plan_query(q, axis, schema, o.numeric)
            plans[q.name] = replace(plan, asked_by=tuple(sorted(asked.items())))
    return Workload(tuple(q for q, _ in run)), plans, {q.name: o for q, o in run + runs}, take


@dataclass
class Context:
    """What every query of one call shares: parsed workload, backend, events, sort orders,
    attribute conversions, plans and filter masks."""

    workload: Workload
    be: Backend
    ev: EventFrame
    parts: Partitioner
    attrs: Attributes
    runs: Workload  # the queries run: the workload's, an AND as its three counts (`run_as`)
    plans: dict[str, QueryPlan]  # per run, and per query of the workload's that is not one
    options: dict[str, Options]  # the same
    matcher: Matcher
    take: dict[str, str]  # a query that is not run: the run whose columns it takes (`run_as`)

    call_options: Options  # as given: an AND's counts run with their own

    def finish(self, q: Query, tables: dict[str, pa.Table]) -> pa.Table:
        """Query q's table from its runs' tables."""
        if not isinstance(q.pattern, And):
            return tables[q.name]
        opts = self.call_options
        schema = result_schema(q, self.ev.axis, self.ev.table.schema, opts.numeric)
        return combine(q, tables, schema, opts)

    @classmethod
    def of(
        cls, events: Any, workload: Workload | str, options: Options, part: bool = False
    ) -> Context:
        keep_freed_memory()
        wl = as_workload(workload)
        be = select_backend(options.backend)
        ev = prepare_events(events, wl, options.time_col, options.type_col, part)
        runs, plans, run_options, take = compile_workload(ev.table.schema, wl, ev.axis, options)
        matcher = Matcher(ev)
        _check_window_bounds(ev, runs, plans, matcher, lambda: _askers(wl, options, take))
        for q in wl:
            for cond in q.next_conditions:
                check_next_values(q, cond, ev.table, matcher.type_mask)
        return cls(
            wl,
            be,
            ev,
            Partitioner(ev),
            Attributes(ev),
            runs,
            plans,
            run_options,
            matcher,
            take,
            options,
        )


def _askers(wl: Workload, options: Options, take: dict[str, str]) -> dict[str, str]:
    """Per run, the first of the workload's queries it answers: an error found in a run names
    that query, not the run (an AND's count `q[left]`, queries alike `q[return]`)."""
    askers: dict[str, str] = {}
    for q in wl:
        for run, _ in runs_of(q, options):
            askers.setdefault(take.get(run.name, run.name), q.name)
    return askers


def _check_window_bounds(
    ev: EventFrame,
    wl: Workload,
    plans: dict[str, QueryPlan],
    matcher: Matcher,
    askers: Callable[[], dict[str, str]],
) -> None:
    """Every window holding an event a query matches has bounds the time column's type holds
    (times near its ends would wrap window_end, and the window arithmetic, around). Checked on
    all events first: only a query failing that looks at its own events. `wl` holds the runs,
    each named by its asker (`_askers`, made only for an error)."""
    if not ev.n:
        return
    if ev.axis.is_float:
        _check_float_panes(ev, wl, plans, matcher, askers)
        return
    span = int(ev.time.min()), int(ev.time.max())
    checked: dict[tuple[int, int], str | None] = {}  # per window shape: queries share a few
    for q in wl:
        plan = plans[q.name]
        within, slide = int(plan.windowing.within), int(plan.windowing.slide)  # integer ticks
        if (within, slide) not in checked:
            checked[within, slide] = ev.axis.window_overflow(*span, within, slide)
        if checked[within, slide] is None:
            continue
        t = ev.time[matcher.positions(q, plan.template) >= 0]
        fault = ev.axis.window_overflow(t.min(), t.max(), within, slide) if t.size else None
        if fault:
            raise EventDataError(f"query {shown(askers()[q.name])}: {fault}")


#: Float times are numbered by pane as int64, floor(t / pane), and windows by pane numbers plus
#: up to WITHIN's panes: a time this many panes from 0 or more is an error, not a wrapped number.
FLOAT_PANES = 2**62


def _check_float_panes(
    ev: EventFrame,
    wl: Workload,
    plans: dict[str, QueryPlan],
    matcher: Matcher,
    askers: Callable[[], dict[str, str]],
) -> None:
    """Every float time a query matches is fewer than FLOAT_PANES of its panes from time 0:
    further out its pane number would wrap, and merge windows far apart (or lose them). And
    the windows holding them have bounds the time column's type holds: nearer its largest
    value a window_end rounded to inf (the integer axes' `_check_window_bounds`)."""
    span = float(np.max(np.abs(ev.time)))
    ends = np.asarray([ev.time.min(), ev.time.max()])
    for q in wl:
        w = plans[q.name].windowing
        seg, wins = float(w.seg), (w.within, w.slide)
        t: np.ndarray | None = None
        if span / seg >= FLOAT_PANES:
            t = ev.time[matcher.positions(q, plans[q.name].template) >= 0]
            far = float(t[np.argmax(np.abs(t))]) if t.size else 0.0
            if abs(far) / seg >= FLOAT_PANES:
                raise EventDataError(
                    f"query {shown(askers()[q.name])}: the event at {far!r} lies "
                    f"{abs(far) / seg:.3g} panes of {seg:g} s from time 0, more than the 2^62 "
                    f"panes float times may lie from it (pane numbers are int64): shift the "
                    f"times nearer 0, or use a longer WITHIN"
                )
        # All events' ends first (only a query failing that looks at its own), unless some lie
        # too many of its panes from 0 to be numbered (they are not its events: checked above).
        for mine in (False, True) if t is None else (True,):
            times = ends
            if mine:
                t = ev.time[matcher.positions(q, plans[q.name].template) >= 0] if t is None else t
                times = np.asarray([t.min(), t.max()]) if t.size else t
            pane = float_panes(times, seg)
            start = ev.axis.bounds(first_window(pane, w.a, w.n), q.within_ms, q.slide_ms, *wins)[0]
            end = ev.axis.bounds(pane // w.a, q.within_ms, q.slide_ms, *wins)[1]
            fault = ev.axis.float_overflow(times, start, end)
            if fault is None:
                break
            if mine:
                raise EventDataError(f"query {shown(askers()[q.name])}: {fault}")

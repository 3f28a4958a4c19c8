"""HAMLET sharing: which queries can share a Kleene sub-pattern, and shared burst execution.

Workload analysis (HAMLET 3.1): a Kleene sub-pattern E+ is shareable when several queries contain
it (Def. 4); queries sharing it form a sharable set when they group and partition alike (Def. 5;
in a batch, windows always overlap). The merged template lists each type once, with transitions
labelled by the queries that take them, and the pane is the gcd of the set's windows and slides.

Execution. A *burst* is a run of events of type E, in one partition and pane, with no event of the
set's other types in between (Def. 10); it is cut at timestamp groups that mix types. On each
query's state a burst acts like one *macro event* whose coefficients (cpu_fallback/kernels.py,
`burst_coefficients`) depend only on which events of the burst the query matches. So queries that
match the same events of a burst form a *class* that computes the coefficients once (HAMLET's
shared graphlet; its snapshot is the query's c at the burst), each query then resolving the burst
in O(1). Classes other than the largest stand for the event-level snapshots of Def. 9. The
optimizer (gpu_hamlet/engine/optimizer.py) decides per burst and class whether sharing pays.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from math import gcd
from typing import Any

import numpy as np

from gpu_hamlet.core.panes import panes as host_panes
from gpu_hamlet.core.rings import layout
from gpu_hamlet.engine.attributes import Attributes
from gpu_hamlet.engine.backend import Backend
from gpu_hamlet.engine.burst_slots import (
    burst_extents,
    collapsed_stream,
    matched_slots,
)
from gpu_hamlet.engine.events import EventFrame
from gpu_hamlet.engine.matching import Matcher
from gpu_hamlet.engine.optimizer import EngineCostModel, choose_shared
from gpu_hamlet.engine.partitions import SortedKeys, window_run_ids
from gpu_hamlet.engine.pruning import bound, ranges, reach, spans
from gpu_hamlet.engine.row_sample import RowSample
from gpu_hamlet.host_threads import Once
from gpu_hamlet.names import quoted, quoted_list
from gpu_hamlet.query.plan import QueryPlan, Template
from gpu_hamlet.query.workload import NextCondition, Query, Workload, format_ms

# --- workload analysis ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SharableSet:
    """Queries that share the Kleene sub-pattern `kleene_type`+ and partition alike; with
    `conditions`, the E -> E NEXT conditions they all have (then they also filter E alike and
    share per window: gpu_hamlet/engine/window_sharing.py). The queries named in `ties` compare
    with '<=' or '>=' where `conditions` has '<' or '>': their extra edges, between events of
    equal keys, enter event-level snapshots (HAMLET Def. 9)."""

    kleene_type: str
    queries: tuple[Query, ...]
    conditions: tuple[NextCondition, ...] = ()
    ties: tuple[str, ...] = ()

    @property
    def tie_conditions(self) -> tuple[NextCondition, ...]:
        """The conditions of a tie edge: `conditions` with the ordering one as '='."""
        return tuple(replace(c, op="=") for c in self.conditions)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(q.name for q in self.queries)

    @property
    def pane_ms(self) -> int:
        """gcd of the set's windows and slides: bursts never cross a pane."""
        g = 0
        for q in self.queries:
            g = gcd(gcd(g, q.within_ms), q.slide_ms)
        return g

    def merged_template(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """Transitions (from type, to type) labelled by the queries that take them; 'START' and
        'END' mark where trends begin and finish."""
        edges: dict[tuple[str, str], list[str]] = {}
        for q in self.queries:
            types = q.types
            assert q.elements is not None, "only flat SEQ patterns share (analyze)"
            edges.setdefault(("START", types[0]), []).append(q.name)
            for p, e in enumerate(q.elements):
                if p > 0:
                    edges.setdefault((types[p - 1], e.type), []).append(q.name)
                if e.kleene:
                    edges.setdefault((e.type, e.type), []).append(q.name)
            edges.setdefault((types[-1], "END"), []).append(q.name)
        return {k: tuple(v) for k, v in edges.items()}


@dataclass(frozen=True)
class WorkloadAnalysis:
    sets: tuple[SharableSet, ...]
    pane_ms: int

    def describe(self) -> str:
        lines = [f"workload pane: {format_ms(self.pane_ms)} (gcd of all windows and slides)"]
        if not self.sets:
            lines.append("no shareable Kleene sub-pattern: every query runs alone")
        for s in self.sets:
            q0 = s.queries[0]
            per_window = " AND ".join(map(str, s.conditions))
            lines.append(
                f"sharable set {quoted(s.kleene_type)}+: {quoted_list(s.names)} "
                f"(partition {quoted_list(q0.partition_attrs) or '-'}, "
                f"pane {format_ms(s.pane_ms)})"
                + (f", per window with {per_window}" if per_window else "")
                + (f", ties of {quoted_list(s.ties)} as event-level snapshots" if s.ties else "")
            )
            for (a, b), names in sorted(s.merged_template().items()):
                lines.append(f"    {quoted(a):>12} -> {quoted(b):<12} {quoted_list(names)}")
        return "\n".join(lines)


def touches(q: Query, type_: str) -> bool:
    """Whether a NEXT condition of q compares events of `type_` with their neighbours."""
    return any(type_ in (c.type, c.next_type) for c in q.next_conditions)


def only_within(q: Query, type_: str) -> bool:
    """Whether every NEXT condition of q that touches `type_` compares two events of it."""
    return all(
        c.type == c.next_type == type_ for c in q.next_conditions if type_ in (c.type, c.next_type)
    )


_STRICT = {"<=": "<", ">=": ">"}


def strict(c: NextCondition) -> NextCondition:
    """The condition with '<=' as '<' and '>=' as '>': queries whose E -> E conditions differ
    only so share per window, the non-strict ones through event-level snapshots."""
    return replace(c, op=_STRICT.get(c.op, c.op))


def _window_set(e: str, qs: list[Query]) -> SharableSet:
    """The set of queries with the same E -> E conditions up to strictness: the strict form
    where one query has it (the others' ties become event-level snapshots), else the common."""
    conds = {q.name: frozenset(q.next_of(e, e)) for q in qs}
    base = next((q for q in qs if conds[q.name] == {strict(c) for c in conds[q.name]}), qs[0])
    ties = tuple(q.name for q in qs if conds[q.name] != conds[base.name])
    return SharableSet(e, tuple(qs), base.next_of(e, e), ties)


def analyze(workload: Workload, float_time: bool = False) -> WorkloadAnalysis:
    """Sharable sets of the workload (HAMLET Def. 4 and 5) and its pane size. Over a float time
    axis (`float_time`) only queries of one pane (gcd of WITHIN and SLIDE) share: a set's bursts
    are cut by the gcd of its queries' panes, and floor(t / p) over a divisor p of a query's pane
    does not nest into floor(t / pane) in floating point (8.52 / 0.01 is 851.99..., 8.52 / 0.12 is
    71.0): a burst spanning a query's pane bound moved its first events into the window before
    (docs/architecture.md section 9)."""
    by_key: dict[tuple, list[Query]] = {}
    for q in workload:
        own = (q.pane_ms,) if float_time else ()
        # Only flat SEQ patterns share a Kleene type's bursts today; the others run alone
        # (docs/architecture.md section 9). NEXT conditions touching the Kleene type E: queries
        # with the same E -> E conditions (up to '<' against '<=') and filters on E share per
        # window; a condition on an edge into or out of E keeps E's bursts to the query
        # (section 9: sharing cannot pay).
        for e in q.elements or ():
            if not e.kleene:
                continue
            key: tuple = (e.type, q.groupby, q.partition_attrs)
            if touches(q, e.type):
                if not only_within(q, e.type):
                    continue
                key += (
                    frozenset(map(strict, q.next_of(e.type, e.type))),
                    frozenset(q.filters_of(e.type)),
                )
            by_key.setdefault(key + own, []).append(q)
    sets = tuple(
        _window_set(key[0], qs) if len(key) > 3 + len(own) else SharableSet(key[0], tuple(qs))
        for key, qs in by_key.items()
        if len(qs) >= 2
    )
    pane = 0
    for q in workload:
        pane = gcd(gcd(pane, q.within_ms), q.slide_ms)
    return WorkloadAnalysis(sets, pane)


# --- execution ------------------------------------------------------------------------------------


@dataclass
class SharingStats:
    """What the optimizer did for one sharable set (see README: reading the sharing stats)."""

    kleene_type: str
    queries: tuple[str, ...]
    bursts: int = 0
    shared: int = 0
    unshared: int = 0
    splits: int = 0
    merges: int = 0
    graphlet_snapshots: int = 0
    event_snapshots: int = 0
    burst_events: int = 0
    #: dynamic shared nothing because sharing could not pay for its fixed costs in this call
    #: (`may_pay` before the analysis, or query_s after it)
    below_fixed_costs: bool = False
    #: dynamic did not analyse a window set (NEXT conditions): on a sample of the rows, sharing
    #: its bursts cost more than the queries' own trees (`window_sharing.windows_may_pay`)
    loses_on_sample: bool = False
    #: a stage of GLORIA's plan (`kleene_type` its name as written: `tran(A, B)`, `SEQ(P, T)+`),
    #: not a Kleene type E whose bursts HAMLET shares (`kleene_type` E itself)
    stage: bool = False

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Injection:
    """How one query's sorted events change under sharing: kept rows and macro rows."""

    keep: np.ndarray  # over the query's events: rows still processed individually or as macro
    macro: np.ndarray  # over the kept rows: which are macro events
    segment: np.ndarray  # coefficient segment of each macro row


@dataclass
class Slots:
    """The set stream with each analysed burst collapsed to a slot at its first event: per slot,
    its index into the sorted order, partition id, event row, time, burst (-1 for none) and
    type code."""

    idx: np.ndarray
    pid: np.ndarray
    rows: np.ndarray
    time: np.ndarray
    burst: np.ndarray
    codes: np.ndarray


def query_width(plan: QueryPlan) -> int:
    """A query's state channels in all its runs: what its events cost (EngineCostModel)."""
    return len(plan.linear) + len(plan.exact) + len(plan.minmax)


def query_runs(plan: QueryPlan) -> int:
    """The fewest kernel runs a query makes: the float run, one residue run or more (exact and
    bigint modes), and the MIN/MAX run: each reads a shared set's coefficients."""
    return 1 + bool(plan.exact) + bool(plan.minmax)


def kleene_roles(sset: SharableSet, ev: EventFrame, matcher: Matcher) -> np.ndarray | None:
    """Per type code, its role in the runs of the set's Kleene type (`run_lengths`): 1 for
    that type, -1 for a type some query of the set matches whole (it ends a run), 0 for one
    the set's stream may drop; None where the events hold no Kleene event."""
    code = ev.code_of(sset.kleene_type)
    if code < 0:
        return None
    role = np.where(matcher.matched_whole(sset.queries), -1, 0).astype(np.int8)
    role[code] = 1
    return role


def filter_groups(sset: SharableSet) -> np.ndarray:
    """Each query's filter group, numbered from 0 in order of first query. Which events of a
    burst a query matches depends only on its filters on the Kleene type: queries with the same
    ones form a filter group, and a burst's classes are unions of filter groups."""
    groups: dict[frozenset, int] = {}
    E = sset.kleene_type
    return np.asarray(
        [groups.setdefault(frozenset(q.filters_of(E)), len(groups)) for q in sset.queries],
        np.int64,
    )


def may_pay(
    sset: SharableSet,
    ev: EventFrame,
    keys: SortedKeys,
    plans: dict[str, QueryPlan],
    matcher: Matcher,
    model: EngineCostModel,
    be: Backend,
) -> bool:
    """Whether `dynamic` should analyse the set in this call at all: what sharing its Kleene
    type's runs could gain must beat the fixed costs of sharing (`EngineCostModel.fixed`, which
    grow with the sorted rows and the runs). Each run (`run_lengths`: each burst lies in one)
    gains what the optimizer's model gives each filter group as one class, as the analysis
    assumes when it chooses the bursts worth analysing (`SharedBursts`; one class of all the
    queries made the gate pass for bench_sharing.py's short bursts with nine filters at 100
    queries, whose analysis then shared none of 41,695 bursts and cost 19% on a GPU); but a
    query only runs the events its pruning keeps, so where that bound passes, it is scaled by
    the share of the Kleene events the queries keep. Runs and share come from a sample of the
    sorted rows (`RowSample`; every row up to 8,192). Small calls fail it (bench_small.py's
    50 queries over 2,100 events took 1.3x `none`'s time shared), and so do short bursts that
    only a few queries share (bench_sharing.py's filters at 5 queries, where the analysis took
    about 10 ms and shared nothing), and bursts that most queries prune away (its bursts of 50
    at 5 queries, where each query keeps 2% of them and sharing took 1.2-1.3x `none`'s time)."""
    width = sum(query_width(plans[n]) for n in sset.names)
    weighted = max(len(plans[n].linear) - 1 for n in sset.names)
    nf = int(filter_groups(sset).max()) + 1
    runs = sum(query_runs(plans[n]) for n in sset.names)
    # First a bound from the counts alone: a run's gain is affine in its length, so the Kleene
    # events all in one run would gain the most, and the fixed costs are at least those without
    # runs (the roles and the sample took a tenth of bench_small.py's 50 queries, whose sets
    # never pass).
    most = model.benefit(
        float(ev.count_of(sset.kleene_type)), len(sset.names) / nf, width / nf, weighted
    )
    if nf * max(float(most), 0.0) <= model.fixed(keys.codes.shape[0], 0, runs):
        return False
    role = kleene_roles(sset, ev, matcher)
    if role is None:
        return False
    code = ev.code_of(sset.kleene_type)
    sample = RowSample.of(keys)
    lengths = sample.run_lengths(role)
    b = np.arange(lengths.shape[0], dtype=np.float64)
    per_group = model.benefit(b, len(sset.names) / nf, width / nf, weighted)
    gain = nf * float(lengths @ np.maximum(per_group, 0.0)) * sample.scale
    fixed = model.fixed(keys.codes.shape[0], round(sample.scale * lengths.sum()), runs)
    if gain <= fixed:
        return False
    need = fixed / gain
    share = sample.kept_share(sset.queries, code, keys, plans, matcher, host_panes, need)
    return gain * share > fixed


class Ahead:
    """The segments of a source (bursts' coefficients, or stages' run maps) that the queries
    built so far stand for. Each query adds its macro rows' segments as its rows are built (on
    the host's threads, before any query of its batch runs), and the first query that needs
    segments computes all of these in one kernel call. After pruning, each of bench_sharing's
    100 queries keeps about a sixth of a set's bursts, and asking for them query by query took
    56 calls, each with its own gathers and weights (docs/architecture.md section 2, bursts)."""

    def __init__(self, n: int) -> None:
        self.mask = np.zeros(n, bool)
        self._lock = threading.Lock()

    def add(self, segs: np.ndarray) -> None:
        with self._lock:
            self.mask[segs] = True


class SharedBursts:
    """Bursts of one sharable set over one input, the optimizer's decisions, and coefficients."""

    def __init__(
        self,
        ev: EventFrame,
        attrs: Attributes,
        be: Backend,
        sset: SharableSet,
        keys: SortedKeys,
        plans: dict[str, QueryPlan],
        matcher: Matcher,
        mode: str,
        model: EngineCostModel,
    ) -> None:
        self.ev, self.attrs, self.be, self.sset = ev, attrs, be, sset
        self.stats = SharingStats(sset.kleene_type, sset.names)
        self._coef: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # MU, K, done
        self._slots: dict[int, tuple[np.ndarray, ...]] = {}
        self._once = Once()
        self._time_max = 0.0
        self._typed: dict[tuple, np.ndarray] = {}
        self._reach: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._windows: dict[tuple, np.ndarray] = {}  # `window_run_ids` per stream and window
        self._streams: dict[int, Slots] = {}  # `_group_stream` per filter group
        self._drops: dict[tuple, np.ndarray] = {}  # `_dropped` per stream and filters
        E = sset.kleene_type
        names = sset.names
        self.group = filter_groups(sset)
        self.index = {name: j for j, name in enumerate(names)}
        nf = int(self.group.max()) + 1
        rep_query = [int(np.flatnonzero(self.group == f)[0]) for f in range(nf)]
        self.set_idx, rows, set_pid, t, codes = keys.select(
            matcher.matched_by_any(sset.queries, keys)
        )
        pane = ev.axis.ticks(sset.pane_ms, sset.queries[0], "pane")
        panes, _ = be.segments(set_pid, t, pane)
        burst_id = be.burst_ids(set_pid, panes, t, codes == ev.code_of(E))
        width = np.asarray([query_width(plans[n]) for n in names], np.float64)
        weighted = np.asarray([len(plans[n].linear) - 1 for n in names], np.float64)
        width_f = np.bincount(self.group, weights=width, minlength=nf)
        weighted_f = np.zeros(nf)
        np.maximum.at(weighted_f, self.group, weighted)
        first, count = burst_extents(burst_id)
        nb = first.shape[0]
        self.stats.bursts, self.stats.burst_events = nb, int(count.sum())
        self.burst_of = np.full(keys.order.shape[0], -1, np.int64)  # by index into the sorted order
        self.segidx = np.zeros((nf, 0), np.int64)
        # Per filter group and analysed burst: whether the group matches some of its events
        # but runs it unshared (`_group_stream` expands it back into its events).
        self.unshared = np.zeros((nf, 0), bool)
        self.slots: Slots | None = None  # None when there is no burst
        self.nseg = 0
        self.ahead = Ahead(0)
        self.coef_events = np.zeros(0, np.int64)
        self.coef_lo = np.zeros(1, np.int64)
        self._set_rows = self._set_time = np.zeros(0, np.int64)
        if nb == 0:
            return
        # Burst b's events are the count[b] of the set stream from first[b]. Bursts where
        # sharing could not pay even with each filter group as one class are not analysed
        # further: they run unshared at no extra cost.
        all_pid = set_pid[first]
        analysed = np.arange(nb)
        if mode == "dynamic":
            worth = choose_shared(
                mode,
                count.astype(np.float64),
                np.full(nb, len(names) / nf),
                np.full(nb, width.sum() / nf),
                np.full(nb, weighted.max()),
                model,
            )
            analysed = np.flatnonzero(worth)
            first, count = first[analysed], count[analysed]
        kept_id = np.full(nb + 1, -1, np.int64)  # the analysed bursts numbered anew; no burst: -1
        kept_id[analysed] = np.arange(analysed.size)
        nsh = count.shape[0]
        # The set stream with each analysed burst collapsed to a slot at its first event.
        self.slots = Slots(
            *collapsed_stream(
                burst_id, kept_id, self.set_idx, set_pid, rows, t, codes, self.burst_of
            )
        )
        # The largest time's size, for the window bounds of pruning (`compressed`).
        self._time_max = float(np.max(np.abs(t))) if t.dtype.kind == "f" else 0.0
        self._stream = (burst_id, kept_id, set_pid, rows, t, codes)  # for `_group_stream`
        self.segidx = np.full((nf, nsh), -1, np.int64)
        if nsh == 0:
            self._stats(
                np.zeros((nf, 0), bool),
                np.zeros((nf, 0)),
                np.zeros((nf, 0), bool),
                analysed,
                all_pid,
            )
            return
        # Per filter group: matched events and a hash of which ones, per burst. A burst's events
        # are all E's, so a group matches those its filters on E keep (masks that
        # `matched_by_any` made above), and a group without filters on E all of them: its
        # counts are the bursts' lengths, with no event read (nor, with one group, listed).
        filtered = [bool(sset.queries[r].filters_of(E)) for r in rep_query]
        counts = np.stack([count] * nf)
        if any(filtered) or nf > 1:
            # The analysed bursts' events, burst by burst: burst b's are
            # be_idx[starts[b]:][:count[b]].
            be_idx = ranges(first, first + count)
            starts = np.cumsum(count) - count
            burst_rows = rows[be_idx] if any(filtered) else None
            mb = np.stack(
                [
                    matcher.type_mask(sset.queries[r], E)[burst_rows]
                    if f
                    else np.ones(be_idx.size, bool)
                    for r, f in zip(rep_query, filtered)
                ]
            )
            for r in np.flatnonzero(filtered):
                counts[r] = np.add.reduceat(mb[r], starts, dtype=np.int64)
        if nf > 1:
            salt = np.random.default_rng(12345).integers(1, 2**63, be_idx.size, dtype=np.uint64)
            hashes = np.add.reduceat(np.where(mb, salt, np.uint64(0)), starts, axis=1)
            hashes[counts == 0] = 0
            rep = _representatives(hashes)
        else:
            rep = np.zeros((1, nsh), np.int64)
        cols = np.arange(nsh)[None, :]
        flat = (rep * nsh + cols).ravel()
        cls_width = np.bincount(flat, weights=np.repeat(width_f, nsh), minlength=nf * nsh)
        cls_chan = np.zeros((nf, nsh))
        np.maximum.at(
            cls_chan, (rep.ravel(), np.tile(np.arange(nsh), nf)), np.repeat(weighted_f, nsh)
        )
        cls_size = np.bincount(
            flat, weights=np.repeat(np.bincount(self.group), nsh), minlength=nf * nsh
        ).reshape(nf, nsh)
        is_rep = (rep == np.arange(nf)[:, None]) & (counts > 0)
        decide = np.zeros((nf, nsh), bool)
        classes = (
            counts[is_rep].astype(np.float64),
            cls_size[is_rep],
            cls_width.reshape(nf, nsh)[is_rep],
            cls_chan[is_rep],
        )
        decide[is_rep] = choose_shared(mode, *classes, model)
        if mode == "dynamic" and decide.any():
            # The decisions per burst leave out what each query pays once per run for reading
            # the set (EngineCostModel.query_s), and the stream of its own that a filter group
            # reads where it runs some of its bursts unshared (`stream_row_s`): where all their
            # gains add up to less, share none.
            gain = model.benefit(*classes)[decide[is_rep]].sum()
            shared_g = decide[rep, cols] & (counts > 0)
            reads = shared_g.any(axis=1)  # groups with a shared burst
            own = reads & ((counts > 0) & ~shared_g).any(axis=1)  # ... and an unshared one
            runs = np.asarray([query_runs(plans[n]) for n in names], np.float64)
            cost = model.query_s * np.bincount(self.group, runs, nf)[reads].sum()
            if gain < cost + model.stream_row_s * self.set_idx.shape[0] * own.sum():
                decide[:] = False
                self.stats.below_fixed_costs = True
        seg_of_rep = np.full((nf, nsh), -1, np.int64)
        seg_of_rep[decide] = np.arange(int(decide.sum()))
        self.segidx = np.where(decide[rep, cols] & (counts > 0), seg_of_rep[rep, cols], -1)
        self.unshared = (counts > 0) & (self.segidx < 0)
        self._stats(decide, cls_size, is_rep, analysed, all_pid)
        self.nseg = int(decide.sum())
        self.ahead = Ahead(self.nseg)
        if not self.nseg:
            return
        # Events of each shared class, in segment order (reps in order, bursts in order), as
        # indices into the set stream: segment s's are coef_events[coef_lo[s]:coef_lo[s + 1]].
        # Their rows and times are gathered when a query first needs the segment (`coefficients`).
        parts = []
        for r in np.flatnonzero(decide.any(axis=1)):
            b = np.flatnonzero(decide[r])
            if filtered[r]:
                at = ranges(starts[b], starts[b] + count[b])  # the decided bursts' events
                parts.append(be_idx[at[mb[r, at]]])
            else:  # all of them: a burst's events are consecutive in the set stream
                parts.append(ranges(first[b], first[b] + count[b]))
        self.coef_events = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self.coef_lo = np.r_[0, np.cumsum(counts[decide])]
        self._set_rows, self._set_time = rows, t

    def _stats(
        self,
        decide: np.ndarray,
        size: np.ndarray,
        is_rep: np.ndarray,
        analysed: np.ndarray,
        burst_pid: np.ndarray,
    ) -> None:
        """Counts over all bursts; those not analysed (no gain possible) ran unshared."""
        st = self.stats
        nb = burst_pid.shape[0]
        st.shared = int(decide.any(axis=0).sum())
        st.unshared = nb - st.shared
        # The largest class of a burst introduces no snapshot of its own: a graphlet snapshot
        # when it is shared; every other shared class is an event-level snapshot.
        main = np.argmax(np.where(is_rep, size, -1), axis=0)
        main_shared = decide[main, np.arange(decide.shape[1])]
        st.graphlet_snapshots = int(main_shared.sum())
        st.event_snapshots = int(decide.sum() - main_shared.sum())
        shared_all = np.zeros(nb, bool)
        shared_all[analysed] = main_shared
        same = burst_pid[1:] == burst_pid[:-1]
        st.splits = int((same & shared_all[:-1] & ~shared_all[1:]).sum())
        st.merges = int((same & ~shared_all[:-1] & shared_all[1:]).sum())

    def compressed(
        self,
        q: Query,
        tpl: Template,
        matcher: Matcher,
        within: int | float | None,
        prune: bool = True,
        window: int | float | None = None,
    ) -> tuple[np.ndarray, ...] | None:
        """The query's events straight from the collapsed set stream, when every analysed burst
        it matches runs shared: per slot it matches (indices into the sorted order, event rows,
        times, partition ids, macro segment or -1, pattern position). With `prune`, only the
        slots that may be in a trend no longer than `within` (gpu_hamlet/engine/pruning.py), found
        from the query's start and end slots through the per-type index, so the query reads
        the covered ranges rather than the whole stream; queries with the same start slots
        and window length share the starts' reach. With `window` (tumbling windows of that many
        ticks, each one segment), trends lie in one window: the test runs per (partition,
        window), which also holds them within `within`, and the rows need no second pruning
        after segmenting. Bursts that run unshared for q's filter group come as their events
        (`_group_stream`), so a query of a set that mixes shared and unshared bursts reads the
        same cached slots as its group's other queries. None when there is no burst."""
        g = int(self.group[self.index[q.name]])
        if self.slots is None:
            return None
        sl = self._group_stream(g)
        stream = -1 if sl is self.slots else g  # the set's slots, or g's own: a cache key
        code, seg, by_code, code_start = self._group_slots(g, sl)
        ncodes = max(len(self.ev.type_names), 1)
        pos_of_code = matcher.position_of_code(tpl, extra=2)
        pos_of_code[ncodes] = tpl.labels[self.sset.kleene_type]  # flat: label = state

        drop = self._dropped(stream, sl, q, matcher)

        def matched(idx: np.ndarray) -> np.ndarray:
            pos = pos_of_code[code[idx]]
            pos[drop[idx]] = -1
            return pos

        def at_position(p: int) -> tuple[tuple, np.ndarray]:
            """The slots q matches at position p, and a key for them: they depend only on p's
            type and q's filters on it, so queries with the same ones share them (across the
            filter groups reading one stream, but for E, whose macro slots are the group's)."""
            t = next(t for t, tp in tpl.labels.items() if tp == p)
            key = (g if t == self.sset.kleene_type else stream, t, frozenset(q.filters_of(t)))

            def typed() -> np.ndarray:
                lists = [
                    by_code[code_start[c] : code_start[c + 1]]
                    for c in np.flatnonzero(pos_of_code == p)
                ]  # each ascending
                idx = (
                    lists[0]
                    if len(lists) == 1
                    else np.sort(np.concatenate([np.zeros(0, np.int64), *lists]), kind="stable")
                )
                return idx[matched(idx) == p]

            return key, self._cached(self._typed, key, typed)

        if prune:
            time = sl.time
            run = sl.pid
            if window is not None:  # (a burst lies in one window: its slot is in it too)
                run = self._cached(
                    self._windows,
                    (stream, window),
                    lambda: window_run_ids(sl.pid, sl.time, window, host_panes),
                )
                within = None
            within, bounded, lowest, highest = bound(self._time_max, within, time.dtype)
            key, starts = at_position(0)
            flo, fhi = self._cached(
                self._reach,
                (key, within, window),
                lambda: reach(run, time, starts, within, bounded, highest),
            )
            lo, hi = spans(run, time, flo, fhi, at_position(tpl.k - 1)[1], within, bounded, lowest)
        else:
            lo, hi = np.zeros(1, np.int64), np.full(1, code.shape[0], np.int64)
        return matched_slots(lo, hi, code, pos_of_code, drop, sl.idx, sl.rows, sl.time, sl.pid, seg)

    def _group_stream(self, g: int) -> Slots:
        """The slots filter group g reads: the set's slots, with each analysed burst that runs
        unshared for g (and holds events g matches) expanded back into its events, plain events
        of E whose filters g's queries then apply. Made once per group, by the compiled pass
        that collapses the set's stream; a group that shares all its bursts reads the set's."""
        assert self.slots is not None, "the set has bursts"
        if not self.unshared[g].any():
            return self.slots

        def make() -> Slots:
            burst_id, kept_id, set_pid, rows, t, codes = self._stream
            kept = np.where(kept_id >= 0, kept_id, 0)
            kept_g = np.where((kept_id >= 0) & ~self.unshared[g][kept], kept_id, -1)
            scratch = np.empty_like(self.burst_of)  # (each event's burst: `burst_of` has them)
            return Slots(
                *collapsed_stream(burst_id, kept_g, self.set_idx, set_pid, rows, t, codes, scratch)
            )

        return self._cached(self._streams, g, make)

    def _dropped(self, stream: int, sl: Slots, q: Query, matcher: Matcher) -> np.ndarray:
        """Per slot of `sl` (the stream keyed `stream` in `compressed`): whether q's filters
        drop its event (plain slots only; a macro slot stands for the events its class
        matched). One array per (stream, filters), which the queries reading that stream with
        those filters share; none: all false."""
        key = (stream, frozenset(q.filters))

        def make() -> np.ndarray:
            drop = np.zeros(sl.rows.shape[0], bool)
            dropped = matcher.drop_mask(q)
            if dropped is not None:
                plain = np.flatnonzero(sl.burst < 0)
                drop[plain] = dropped[sl.rows[plain]]
            return drop

        return self._cached(self._drops, key, make)

    def _group_slots(self, g: int, sl: Slots) -> tuple[np.ndarray, ...]:
        """Per filter group (cached): a code per slot (plain slots their type code, macro slots
        ncodes, other burst slots, which the group matches nothing of, ncodes + 1), the macro
        segment per slot or -1, and the slots ordered by code with each code's start."""

        def make() -> tuple[np.ndarray, ...]:
            ncodes = max(len(self.ev.type_names), 1)
            seg_g = self.segidx[g]
            b = sl.burst
            seg = (
                np.where(b >= 0, seg_g[np.maximum(b, 0)], -1)
                if seg_g.size
                else np.full(b.shape, -1)
            )
            code = np.where(seg >= 0, ncodes, ncodes + 1).astype(np.int32)
            plain = np.flatnonzero(b < 0)
            code[plain] = sl.codes[plain]
            # Codes are few: a 16-bit stable argsort is NumPy's linear-time radix sort.
            by_code = np.argsort(
                code.astype(np.uint16) if ncodes + 2 < 2**16 else code, kind="stable"
            )
            code_start = np.r_[0, np.cumsum(np.bincount(code, minlength=ncodes + 2))]
            return code, seg, by_code, code_start

        return self._cached(self._slots, g, make)

    def _cached(self, cache: dict, key: Any, make: Callable[[], Any]) -> Any:
        """cache[key], made once: queries' rows are built on several threads (evaluate.py),
        and a second query waits for the first one's (two groups' streams are made at once)."""
        return self._once.get(cache, key, make)

    def shares(self, name: str) -> bool:
        """Whether some burst runs shared for query `name` (a macro row in its rows)."""
        return bool((self.segidx[self.group[self.index[name]]] >= 0).any())

    def inject(self, name: str, qidx: np.ndarray) -> Injection | None:
        """For a query's events (as indices into the sorted order), which collapse into macro
        events: the events of each burst shared for it, kept as one row at the first of them."""
        seg_j = self.segidx[self.group[self.index[name]]]
        if not (seg_j >= 0).any():
            return None
        bid = self.burst_of[qidx]
        return collapse(bid, np.where(bid >= 0, seg_j[bid], -1))

    def coefficients(
        self, ring: str, param: int, channels: tuple, segs: np.ndarray, mu: np.ndarray, k: bool
    ) -> np.ndarray | None:
        """The shared bursts `segs`' MU into `mu` [len(segs), 1, lanes], and with `k` their K
        [len(segs), channels, lanes]. Each burst's coefficients are computed once, with those
        of the other bursts queries built so far keep (`Ahead`)."""
        key = (ring, param, channels)
        if key not in self._coef:
            dtype, lanes = layout(ring)
            self._coef[key] = (
                np.empty((self.nseg, 1, lanes), dtype),
                np.empty((self.nseg, len(channels), lanes), dtype),
                np.zeros(self.nseg, bool),
            )
        MU, K, done = self._coef[key]
        if not done[segs].all():
            new, ev, local = pending(done, segs, self.coef_lo, self.ahead)
            at = self.coef_events[ev]
            rows = self._set_rows[at]
            # Burst events are all of type E: channels of other types get zero weights.
            code = self.ev.code_of(self.sset.kleene_type)
            labels = np.full(rows.shape[0], code, self.ev.type_codes.dtype)
            label_of = {c.type: self.ev.code_of(c.type) for c in channels if c.type is not None}
            W = self.attrs.weights(ring, channels, rows, labels, label_of, param)
            MU[new], K[new] = self.be.burst_coefficients(
                ring, local, self._set_time[at], W, new.size, param
            )
            done[new] = True
        MU.take(segs, axis=0, out=mu)  # (10x a 3-d fancy index)
        return K.take(segs, axis=0) if k else None


def pending(
    done: np.ndarray, wanted: np.ndarray, starts: np.ndarray, ahead: Ahead
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of the segments `wanted` (bursts' coefficients, or stages' run maps) and those `ahead`,
    the ones not `done` yet (ascending); their events, as indices into event arrays in segment
    order (segment s holds starts[s] to starts[s + 1]); and each event's index among those
    segments. Costs the new segments' events only."""
    need = ahead.mask.copy()
    need[wanted] = True
    need &= ~done
    new = np.flatnonzero(need)
    lo, hi = starts[new], starts[new + 1]
    return new, ranges(lo, hi), np.repeat(np.arange(new.size), hi - lo)


def collapse(bid: np.ndarray, seg: np.ndarray) -> Injection:
    """A query's events (their burst `bid`, ascending where >= 0) with each burst that has a
    segment (`seg` >= 0) kept as one macro row at its first event. (A burst's events need not
    be adjacent: those of a timestamp group that mixes types, gpu_hamlet/engine/window_sharing.py,
    may have other events of their timestamp between them.)"""
    sh = seg >= 0
    seen = np.maximum.accumulate(np.where(sh, bid, -1))
    first = sh.copy()
    first[1:] &= bid[1:] > seen[:-1]
    keep = ~sh | first
    return Injection(keep, first[keep], seg[first])


def _representatives(hashes: np.ndarray) -> np.ndarray:
    """For each (query, burst): the first query with the same match hash (its class's rep)."""
    k, nb = hashes.shape
    order = np.argsort(hashes, axis=0, kind="stable")
    hs = np.take_along_axis(hashes, order, axis=0)
    start = np.ones((k, nb), bool)
    start[1:] = hs[1:] != hs[:-1]
    run_start = np.maximum.accumulate(np.where(start, np.arange(k)[:, None], 0), axis=0)
    rep_sorted = np.take_along_axis(order, run_start, axis=0)
    rep = np.empty_like(rep_sorted)
    np.put_along_axis(rep, order, rep_sorted, axis=0)
    return rep


@dataclass
class RunStats:
    """Statistics of one `aggregate` run: per sharable set, and each query's burst snapshots
    (HAMLET's bursts shared whole; not those shared window by window for NEXT conditions, nor
    GLORIA's stage runs; an AND query has none of its own).

    Pass an instance as `aggregate(..., stats=RunStats())`; the engine empties it and fills it
    in. A stream's are the sums of its chunks' runs, and a chunk runs again the events of the
    windows the one before left open: those count once per chunk that ran them."""

    sets: list[SharingStats] = field(default_factory=list)
    snapshots: dict[str, list[float]] = field(default_factory=dict)
    #: Engine runs (one per call, Spark task or slice) by where they ran: "cpu", "gpu" (the
    #: current GPU) or "gpu:N" (the GPU a Spark task was given).
    devices: dict[str, int] = field(default_factory=dict)

    def clear(self) -> None:
        """Empty it, as a new one (`start_stats`)."""
        for f in fields(self):
            getattr(self, f.name).clear()

    def ran_on(self, backend: Backend) -> None:
        """Count one engine run on `backend`."""
        where = backend.name if backend.device is None else f"{backend.name}:{backend.device}"
        self.devices[where] = self.devices.get(where, 0) + 1

    def add(self, other: RunStats) -> None:
        """Add the decisions of another run (another Spark task, slice or stream chunk):
        counts summed per sharable set, flags true where any run set them (they were summed as
        counts), snapshots appended."""
        mine = {(s.kleene_type, s.queries, s.stage): s for s in self.sets}
        for s in other.sets:
            key = (s.kleene_type, s.queries, s.stage)
            if key not in mine:
                mine[key] = SharingStats(s.kleene_type, s.queries, stage=s.stage)
                self.sets.append(mine[key])
            for name, value in s.as_dict().items():
                if isinstance(value, bool):
                    if name != "stage":
                        setattr(mine[key], name, getattr(mine[key], name) or value)
                elif isinstance(value, int):
                    setattr(mine[key], name, getattr(mine[key], name) + value)
        for name, snaps in other.snapshots.items():
            self.snapshots.setdefault(name, []).extend(snaps)
        for where, runs in other.devices.items():
            self.devices[where] = self.devices.get(where, 0) + runs

    def describe(self) -> str:
        if not self.sets:
            return (
                "sharing: nothing analysed in this call (no sharable set, sharing='none', or "
                "GLORIA's plan found no Q-set worth its cost on these events)"
            )
        out = []
        for s in self.sets:
            # A type E is shared as E+; a stage of GLORIA's plan (a cycle `SEQ(P, T)+`, a
            # transition `tran(A, B)` or a chain of them) is named as written.
            name = s.kleene_type if s.stage else quoted(s.kleene_type) + "+"
            queries = quoted_list(s.queries)
            # (a sample's blocks may miss a burst between them: row_sample.py `sample_rows`)
            if s.loses_on_sample and not s.bursts:
                out.append(
                    f"{name} shared by {queries}: not analysed: on a sample of the rows, "
                    "sharing its bursts window by window gained nothing over the queries' own "
                    "trees (or the sample held none of its bursts)"
                )
                continue
            if s.below_fixed_costs and not s.bursts:
                out.append(
                    f"{name} shared by {queries}: not analysed: on a sample of the rows, "
                    "sharing could not pay for its fixed costs in this call (too few or too "
                    "short bursts there)"
                )
                continue
            # (summed over a stream's chunks or Spark's tasks, some runs may have shared)
            some = "in some runs " if s.shared else ""
            out.append(
                f"{name} shared by {queries}: {s.bursts} bursts "
                f"({s.burst_events} events), {s.shared} shared, {s.unshared} not; "
                f"{s.splits} splits, {s.merges} merges; {s.graphlet_snapshots} graphlet "
                f"and {s.event_snapshots} event-level snapshots"
                + (f" ({some}the gains were below the fixed costs)" if s.below_fixed_costs else "")
                + (" (not analysed where a sample lost)" if s.loses_on_sample else "")
            )
        return "\n".join(out)


def start_stats(stats: object) -> None:
    """A TypeError unless `stats` is None or a RunStats, checked where a public entry point
    receives it, before any work (a stream or a Spark job met it only after its first answer);
    a RunStats given again is emptied, for it holds one run's statistics (another call's sets
    were listed beside this one's, and its snapshots kept where this call had none)."""
    if stats is not None and not isinstance(stats, RunStats):
        raise TypeError(f"stats must be a gpu_hamlet.RunStats, not {type(stats).__name__}")
    if stats is not None:
        stats.clear()

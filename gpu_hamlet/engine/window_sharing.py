"""Sharing the bursts of a Kleene type E that NEXT conditions touch, window by window
(docs/architecture.md section 9).

When every query of a set compares adjacent E events by the same E -> E conditions (and none
compares E with its neighbours of other types), the E events of a window are one linear system
the queries share: with a snapshot c_s per burst s (the query's input at the burst, HAMLET's
graphlet snapshot), a query's values on burst b are the sum over the earlier bursts s of its
window of c_s * D[s, b], where D[s, b] is the response on b of the tree recursion started with 1
on burst s's events (its *basis pass*). An E event also reads the E events of earlier bursts by
value, so a burst does not fold into one snapshot on its own, as a burst of an untouched type does
(gpu_hamlet/engine/sharing.py): each query resolves each burst against all earlier snapshots of
its window (gpu_hamlet/core/adjacency.py `resolve_window`).

The basis pass of burst s runs over the E events of the bursts its windows can reach (those of
its partition up to the end of the last window holding it), once for every query of the set and
every window holding it. The optimizer (`WindowCostModel`) decides per partition: all of a
partition's bursts are shared or none, since a window's E events must all be resolved one way.

Queries whose conditions differ only in strictness ('<' against '<=') share too (HAMLET Def. 9):
the basis passes follow the strict conditions, and an E event j that a tie edge enters (an
earlier E event of equal keys) is an *event-level snapshot*: for a query that takes ties, its
value is the sum over those earlier events' values, which every snapshot before it gives through
G[x, j] (the basis pass of x read at j through the tie edges: rows of a third state, `BASIS_TIES`);
it then propagates through its own basis pass, started with 1 on j alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import NamedTuple

import numpy as np

from gpu_hamlet.core.adjacency import AdjacentRuns
from gpu_hamlet.core.recursions import EVENT
from gpu_hamlet.core.rings import layout
from gpu_hamlet.engine.adjacent import KeyRanks, adjacent_runs, sorted_by
from gpu_hamlet.engine.attributes import Attributes
from gpu_hamlet.engine.backend import Backend
from gpu_hamlet.engine.events import EventFrame
from gpu_hamlet.engine.matching import Matcher
from gpu_hamlet.engine.optimizer import WindowCostModel
from gpu_hamlet.engine.partitions import SortedKeys
from gpu_hamlet.engine.row_sample import RowSample
from gpu_hamlet.engine.sharing import Injection, SharableSet, SharingStats, collapse, query_width
from gpu_hamlet.engine.window_bursts import window_bursts, window_presence
from gpu_hamlet.query.plan import Adjacency, Channel, QueryPlan
from gpu_hamlet.query.workload import NextCondition


@dataclass(frozen=True)
class BasisTemplate:
    """The automaton of a basis pass, as the backends read a template (`BASIS`)."""

    k: int
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    is_start: np.ndarray
    is_end: np.ndarray
    move_ptr: np.ndarray
    move_from: np.ndarray
    move_to: np.ndarray


#: State 0 is burst s's events (a start: each adds 1), state 1 the later bursts' events; they
#: share one E -> E tree (class 0): each reads it and adds to it. (The layout gives each state a
#: tree, so a run clears the two it owns; the second stays empty.)
BASIS = BasisTemplate(
    k=2,
    pred_ptr=np.array([0, 1, 2], np.int64),
    pred_idx=np.array([0, 1], np.int64),
    is_start=np.array([True, False]),
    is_end=np.array([False, False]),
    move_ptr=np.zeros(2, np.int64),
    move_from=np.zeros(0, np.int64),
    move_to=np.zeros(0, np.int64),
)
BASIS_TREES = np.array([[0], [0]], np.int64)

#: With event-level snapshots: state 2 is a tie reader, a copy of an event snapshot j that reads
#: the tie edges' tree (class 1: the '=' form of the conditions) of states 0 and 1 and writes
#: nothing; its value is G[x, j].
BASIS_TIES = BasisTemplate(
    k=3,
    pred_ptr=np.array([0, 1, 2, 3], np.int64),
    pred_idx=np.array([0, 1, 0], np.int64),
    is_start=np.array([True, False, False]),
    is_end=np.array([False, False, False]),
    move_ptr=np.zeros(3, np.int64),
    move_from=np.zeros(0, np.int64),
    move_to=np.zeros(0, np.int64),
)
BASIS_TIES_TREES = np.array([[0, 0], [0, 0], [-1, -1]], np.int64)

#: The type name of the tie readers' rows in a basis pass (never an event type: they are E
#: events read through the tie edges).
_TIE = "<tie reader>"


#: `dynamic` analyses a window set only where, on a sample of its rows (`RowSample`), the
#: model's basis passes and resolutions cost less than this many times the queries' own trees.
#: The analysis reads every row of the set: on bench_next_sharing.py's 5 queries in 1-minute
#: windows it took 3.1 ms of a 23 ms call, where not sharing took 20 ms, and the model's shared
#: cost was 3.6x the queries' own. Sharing paid in the rows where that ratio was 0.7-1.0, and
#: a sample's ratio is off by well under this margin there (windows cut at a block's edges make
#: the basis passes look shorter, so the sample errs towards analysing).
GATE_MARGIN = 1.5


class BurstReach(NamedTuple):
    """The bursts of a set's Kleene type over its rows (sorted by partition and time) and how
    far each one's basis pass reaches."""

    bid: np.ndarray  # per row: its burst (-1: not an E event)
    e_at: np.ndarray  # the rows of E events, bursts ascending
    e_start: np.ndarray  # per burst: its first E event (an index of e_at); then e_at's length
    b_pid: np.ndarray  # per burst: its partition
    end: np.ndarray  # per burst: the first burst past its reach

    def basis_rows(self) -> np.ndarray:
        """Per burst: the E events its basis pass runs."""
        return (self.e_start[self.end] - self.e_start[:-1]).astype(np.float64)

    def pairs(self) -> np.ndarray:
        """Per burst: the bursts its snapshot is resolved against."""
        return (self.end - np.arange(self.b_pid.shape[0])).astype(np.float64)


def burst_reach(
    be: Backend,
    ev: EventFrame,
    sset: SharableSet,
    pid: np.ndarray,
    t: np.ndarray,
    codes: np.ndarray,
) -> BurstReach:
    """Burst s reaches the bursts of its partition before the end of the last window that holds
    it: windows [k * slide, k * slide + within) in panes, for every query."""
    panes, _ = be.segments(pid, t, ev.axis.ticks(sset.pane_ms, sset.queries[0], "pane"))
    bid = window_bursts(pid, panes, t, codes == ev.code_of(sset.kleene_type))
    e_at = np.flatnonzero(bid >= 0)
    e_start = np.r_[np.flatnonzero(np.diff(bid[e_at], prepend=-1) != 0), e_at.size]
    b_pid = pid[e_at[e_start[:-1]]]
    b_pane = panes[e_at[e_start[:-1]]]
    stop = np.zeros_like(b_pane)
    for q in sset.queries:
        slide, within = q.slide_ms // sset.pane_ms, q.within_ms // sset.pane_ms
        stop = np.maximum(stop, b_pane // slide * slide + within)
    uniq = np.unique(b_pane)  # (pid, pane rank) as one ascending key
    key = b_pid * (uniq.shape[0] + 1) + np.searchsorted(uniq, b_pane)
    end = np.searchsorted(key, b_pid * (uniq.shape[0] + 1) + np.searchsorted(uniq, stop))
    return BurstReach(bid, e_at, e_start, b_pid, end)


def alone_rows(
    sset: SharableSet,
    ev: EventFrame,
    plans: dict[str, QueryPlan],
    pid: np.ndarray,
    t: np.ndarray,
    codes: np.ndarray,
    is_e: np.ndarray,
) -> np.ndarray:
    """Per partition (by pid), the E events the queries would run alone, each weighted by its
    window copies and channels: alone, a query keeps only the E events of windows that hold one
    of its start types and one of its end types (pruning, engine/pruning.py; the order within
    the window is not checked here)."""
    out = np.zeros(int(pid.max()) + 1 if pid.size else 0)
    ntypes = max(len(ev.type_names), 1)
    windows: dict[int | float, tuple[np.ndarray, ...]] = {}  # by window length
    for q in sset.queries:
        within = ev.axis.ticks(q.within_ms, q, "WITHIN")
        if within not in windows:  # per window: its partition, types present, E events
            windows[within] = window_presence(pid, t // within, codes, is_e, ntypes)
        wpid, present, e_count = windows[within]
        tpl = plans[q.name].template
        whole = np.ones(present.shape[0], bool)
        for flags in (tpl.is_start, tpl.is_end):
            names = [name for name, p in tpl.labels.items() if flags[p]]
            cols = [c if c >= 0 else ntypes for c in map(ev.code_of, names)]
            whole &= present[:, cols].any(axis=1)
        weight = q.within_ms / q.slide_ms * query_width(plans[q.name])
        out += np.bincount(wpid, weights=e_count * whole * weight, minlength=out.shape[0])
    return out


def window_costs(
    sset: SharableSet,
    model: WindowCostModel,
    plans: dict[str, QueryPlan],
    b_pid: np.ndarray,
    alone: np.ndarray,
    basis_rows: np.ndarray,
    pairs: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each burst's partition among those with bursts, and per such partition the model's cost
    of sharing its bursts and of its queries' own trees)."""
    copies = np.asarray([q.within_ms / q.slide_ms for q in sset.queries])
    width = np.asarray([query_width(plans[q.name]) for q in sset.queries], np.float64)
    distinct = {_channels(plans[q.name]): plans[q.name] for q in sset.queries}
    basis_width = sum(query_width(plan) for plan in distinct.values())
    parts, at = np.unique(b_pid, return_inverse=True)
    basis = np.bincount(at, weights=basis_rows, minlength=parts.shape[0])
    npairs = np.bincount(at, weights=pairs, minlength=parts.shape[0])
    bursts = np.bincount(at, minlength=parts.shape[0])
    levels = np.log2(basis / np.maximum(bursts, 1) + 2.0)
    width_q = float((copies * width).sum())
    shared = model.shared(basis, levels, basis_width, bursts, npairs, width_q)
    return at, shared, model.nonshared(alone[parts], levels)


def windows_may_pay(
    sset: SharableSet,
    ev: EventFrame,
    keys: SortedKeys,
    plans: dict[str, QueryPlan],
    matcher: Matcher,
    model: WindowCostModel,
    be: Backend,
) -> bool:
    """Whether `dynamic` should analyse a window set at all: on a sample of the sorted rows (its
    blocks' edges cut partitions), sharing must cost less than GATE_MARGIN times the queries'
    own trees. A call small enough to be sampled whole is analysed whole."""
    sample = RowSample.of(keys)
    if sample.scale == 1.0:
        return True
    rows = sample.rows
    sub = SortedKeys(keys.order[rows], sample.part, keys.gid[rows], keys.time[rows], sample.codes)
    idx = np.flatnonzero(matcher.matched_by_any(sset.queries, sub))
    pid, t, codes = sample.part[idx], sub.time[idx], sample.codes[idx]
    reach = burst_reach(be, ev, sset, pid, t, codes)
    if reach.b_pid.shape[0] == 0:
        return False
    alone = alone_rows(sset, ev, plans, pid, t, codes, reach.bid >= 0)
    _, shared, own = window_costs(
        sset, model, plans, reach.b_pid, alone, reach.basis_rows(), reach.pairs()
    )
    return float(shared.sum()) < GATE_MARGIN * float(own.sum())


class SharedWindows:
    """The bursts of one sharable set of a touched Kleene type over one input, its event-level
    snapshots, the optimizer's per-partition decisions, and the basis responses D and G
    (duck-typed like SharedBursts where gpu_hamlet/engine/query_rows.py reads a source)."""

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
        model: WindowCostModel,
    ) -> None:
        self.ev, self.attrs, self.be, self.sset = ev, attrs, be, sset
        E = sset.kleene_type
        self.stats = SharingStats(E, sset.names)
        self.names = set(sset.names)
        self._responses: dict[tuple, np.ndarray] = {}
        set_idx, rows, spid, t, codes = keys.select(matcher.matched_by_any(sset.queries, keys))
        reach = burst_reach(be, ev, sset, spid, t, codes)
        bid, e_at, e_start, b_pid, end = reach
        nb = b_pid.shape[0]
        e_bid = bid[e_at]
        self._rows, self._time = rows[e_at], t[e_at]
        reach_end = e_start[end]  # per burst: where its basis pass stops (an index of e_at)
        basis_rows, pairs = reach.basis_rows(), reach.pairs()
        alone = (
            alone_rows(sset, ev, plans, spid, t, codes, bid >= 0)
            if mode != "static" and nb
            else np.zeros(0)
        )

        def decide(basis_rows: np.ndarray, pairs: np.ndarray) -> np.ndarray:
            """Which bursts run shared: static all; dynamic and hamlet those of the partitions
            where the model says the basis passes and resolutions cost less than the queries'
            own trees."""
            if mode == "static" or nb == 0:
                return np.ones(nb, bool)
            at, shared, own = window_costs(sset, model, plans, b_pid, alone, basis_rows, pairs)
            return (shared < own)[at]

        share = decide(basis_rows, pairs)
        tie = e_at[:0]
        if sset.ties and share.any():
            # Event-level snapshots (HAMLET Def. 9): the E events a tie edge enters. Each adds
            # a basis pass from it and, for the queries that take ties, its pairs; decided again
            # (they only add to the shared cost, so where sharing lost without them it loses).
            tie = self._tie_targets(spid[e_at], t[e_at], e_bid, end)
            tb = e_bid[tie]
            basis_rows += np.bincount(tb, weights=reach_end[tb] - tie, minlength=nb)
            later = np.searchsorted(tie, reach_end[tb]) - np.arange(tie.size)
            pairs += np.bincount(
                tb, weights=(end[tb] - tb + later) * self._tie_share(plans), minlength=nb
            )
            share &= decide(basis_rows, pairs)
        tie = tie[share[e_bid[tie]]]
        self.stats.bursts, self.stats.burst_events = nb, int(e_at.size)
        self.stats.shared = self.stats.graphlet_snapshots = int(share.sum())
        self.stats.event_snapshots = int(tie.size)
        self.stats.unshared = nb - self.stats.shared
        # Shared bursts renumbered densely; a partition's bursts are all shared or none, so the
        # reach of a shared burst holds shared bursts only.
        number = np.where(share, np.cumsum(share) - 1, -1)
        self.burst_of = np.full(keys.order.shape[0], -1, np.int64)
        if share.any():  # (none shared: every row's is -1)
            self.burst_of[set_idx[e_at]] = number[e_bid]
        s = np.flatnonzero(share)
        self.nshared, self.nevents = s.shape[0], tie.shape[0]
        self._layout(e_start, e_bid, end, s, tie, number)

    def _layout(
        self,
        e_start: np.ndarray,
        e_bid: np.ndarray,
        end: np.ndarray,
        s: np.ndarray,
        tie: np.ndarray,
        number: np.ndarray,
    ) -> None:
        """The basis passes (the shared bursts s, then the event snapshots `tie`: indices of the
        set's E events) and where their responses go: per pass, its E events lo .. hi (its own
        up to `own`), its first burst, and the event snapshots j it reads (jlo .. jhi); `doff`,
        `goff` and `eptr` as gpu_hamlet/core/adjacency.py reads them, relative to this set (the
        snapshot's first burst and event subtracted)."""
        tb = e_bid[tie]
        first = np.r_[s, tb]  # burst numbers (of all the set's bursts)
        self._lo = np.r_[e_start[s], tie]
        self._hi = e_start[end[first]]
        self._own = np.r_[e_start[s + 1], tie + 1]
        self._first = first
        self._jlo = np.r_[np.searchsorted(tie, e_start[s]), np.arange(1, tie.size + 1)]
        self._jhi = np.searchsorted(tie, self._hi)
        self._tie = tie
        nd = end[first] - first  # D entries per pass: the bursts it reaches
        ng = self._jhi - self._jlo  # G entries per pass
        self._dstart = np.cumsum(nd) - nd
        self._gstart = int(nd.sum()) + np.cumsum(ng) - ng
        self.entries = int(nd.sum() + ng.sum())
        self.doff = (self._dstart - number[first]).astype(np.int64)
        self.goff = (self._gstart - self._jlo).astype(np.int64)
        self.eptr = np.searchsorted(number[tb], np.arange(s.shape[0] + 1)).astype(np.int64)
        self._e_bid = e_bid

    @cached_property
    def _ranks(self) -> KeyRanks:
        """The set's E events ranked by the conditions' keys, each event once; made when some
        burst is shared (ties and basis passes read it), not for a set that shares none."""
        return KeyRanks(self.sset.queries[0], self.ev.table, self._rows)

    def _tie_targets(
        self, pid: np.ndarray, t: np.ndarray, bid: np.ndarray, end: np.ndarray
    ) -> np.ndarray:
        """Indices of the set's E events j that a tie edge can enter: an earlier E event i (at
        an earlier time, in j's partition and in a window with j) whose keys equal j's by the
        '=' form of the conditions (nulls and NaN equal nothing)."""
        n = self._rows.shape[0]
        keys, bad = [], np.zeros(2 * n, bool)
        for cond in self._tie_conditions:
            ranks, null, nan = self._ranks(cond, self._rows, self._rows)
            keys.append(ranks)
            bad |= null | nan
        # The set's E events are in (partition, time) order: a dense rank of their times.
        tick = np.cumsum(np.r_[True, (pid[1:] != pid[:-1]) | (t[1:] != t[:-1])])
        tick = np.r_[tick, tick]
        writer = (np.arange(2 * n) < n).astype(np.int64)
        ok = np.flatnonzero(~bad)
        # By keys and time, readers before the writers of their time: a reader's last writer
        # before it is the latest strictly earlier event of its keys (it reaches farthest),
        # unless that one is in an earlier partition.
        order = ok[sorted_by(keys[0][ok], [k[ok] for k in keys[1:]] + [tick[ok], writer[ok]])]
        w = writer[order] == 1
        last = np.maximum.accumulate(np.where(w, np.arange(order.shape[0]), -1))
        reads = np.flatnonzero(~w)
        reads, cand = reads[last[reads] >= 0], last[reads][last[reads] >= 0]
        i, j = order[cand], order[reads] - n
        hit = pid[i] == pid[j]
        for k in keys:
            hit &= k[i] == k[j + n]
        i, j = i[hit], j[hit]
        return np.unique(j[bid[j] < end[bid[i]]])

    @cached_property
    def _tie_conditions(self):
        """The tie edges' conditions, read by the basis passes' tie readers (type `_TIE`)."""
        return tuple(replace(c, next_type=_TIE) for c in self.sset.tie_conditions)

    def _tie_share(self, plans: dict[str, QueryPlan]) -> float:
        """The share of the set's per-query work (window copies times channels) that takes ties."""
        work = {
            q.name: q.within_ms / q.slide_ms * query_width(plans[q.name]) for q in self.sset.queries
        }
        return sum(work[name] for name in self.sset.ties) / sum(work.values())

    # -- the source interface of QueryRows --

    def shares(self, name: str) -> bool:
        return name in self.names and self.nshared > 0

    def compressed(self, *args, **kwargs) -> None:
        """No collapsed stream of the set: a query's rows come from `inject`."""
        return None

    def inject(self, name: str, qidx: np.ndarray) -> Injection | None:
        """For a query's events (indices into the sorted order): each shared burst as one window
        macro row at its first event, whose segment is the burst's number."""
        bid = self.burst_of[qidx]
        return collapse(bid, bid) if (bid >= 0).any() else None

    @cached_property
    def _basis(self) -> tuple[np.ndarray, np.ndarray, AdjacentRuns, BasisTemplate, np.ndarray]:
        """The basis passes' rows (one run per snapshot: the E events it reaches, its own in
        state 0; with event snapshots, a tie reader per event snapshot it reads, in state 2) as
        set rows and event rows, their trees and template, and the response entry of each."""
        lens = self._hi - self._lo
        run = np.repeat(np.arange(lens.shape[0]), lens)
        at = np.arange(run.shape[0]) - np.repeat(np.cumsum(lens) - lens, lens) + self._lo[run]
        pos = (at >= self._own[run]).astype(np.int64)
        entry = self._dstart[run] + self._e_bid[at] - self._first[run]
        E = self.sset.kleene_type
        classes: tuple[tuple[NextCondition, ...], ...] = (self.sset.conditions,)
        labels, template, cls, trees = {E: 0}, BASIS, np.zeros(2, np.int64), BASIS_TREES
        if self.nevents:
            tl = self._jhi - self._jlo
            trun = np.repeat(np.arange(tl.shape[0]), tl)
            tj = np.arange(trun.shape[0]) - np.repeat(np.cumsum(tl) - tl, tl) + self._jlo[trun]
            reader = np.r_[np.zeros(run.shape[0], np.int64), np.ones(trun.shape[0], np.int64)]
            run, at = np.r_[run, trun], np.r_[at, self._tie[tj]]
            pos = np.r_[pos, np.full(trun.shape[0], 2, np.int64)]
            entry = np.r_[entry, self._gstart[trun] + tj - self._jlo[trun]]
            order = sorted_by(run, [at, reader])
            run, at, pos = run[order], at[order], pos[order]
            entry, reader = entry[order], reader[order]
            classes += (self._tie_conditions,)
            labels, template, trees = {E: 0, _TIE: 1}, BASIS_TIES, BASIS_TIES_TREES
            cls = np.array([0, 0, 1], np.int64)  # the tie reader reads class 1
        else:
            reader = np.zeros(run.shape[0], np.int64)
        adj = Adjacency(classes, cls, trees, np.full(len(classes), 2, np.int64))
        n = run.shape[0]
        runs = adjacent_runs(
            self.sset.queries[0],
            adj,
            self.ev.table,
            self._rows[at],
            labels,
            reader,
            np.full(n, EVENT, np.int64),
            run,
            self._time[at],
            pos,
            self._ranks,
        )
        return at, reader, runs, template, entry

    def responses(self, ring: str, param: int, channels: tuple[Channel, ...]) -> np.ndarray:
        """The responses [entries, channels, lanes] of every snapshot's basis pass, channel 0
        the count's: D on each burst it reaches (at doff + the burst), then G on each event
        snapshot it reads (at goff + the event snapshot)."""
        key = (ring, param, channels)
        if key not in self._responses:
            at, reader, runs, template, entry = self._basis
            rows = self._rows[at]
            dtype, lanes = layout(ring)
            label_of = {c.type: self.ev.code_of(c.type) for c in channels if c.type is not None}
            codes = np.where(reader == 1, -2, self.ev.type_codes[rows])  # tie readers: no weight
            W = self.attrs.weights(ring, channels, rows, codes, label_of, param)
            n = rows.shape[0]
            _, V = self.be.adjacent_results(
                ring,
                runs,
                W,
                np.zeros((0, 1, lanes), dtype),
                np.zeros((0, len(channels), lanes), dtype),
                np.full(n, EVENT, np.int64),
                template,
                np.zeros((n, 1, lanes), dtype),
                param,
                True,  # values: the rows' values (positional, as RecordingBackend replays)
            )
            assert V is not None, "values=True returns the rows' values"
            if self.nevents:  # tie readers sit among the rows in time order
                by_entry = np.argsort(entry, kind="stable")
                V, entry = V[by_entry], entry[by_entry]
            first = np.flatnonzero(np.r_[True, entry[1:] != entry[:-1]])
            self._responses[key] = self.be.reduce_sorted(ring, V, first, param)
        return self._responses[key]


def _channels(plan: QueryPlan) -> tuple:
    return (plan.linear, plan.exact, plan.minmax)

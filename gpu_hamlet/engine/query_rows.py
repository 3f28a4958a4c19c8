"""One query's rows, the input half of its evaluation: which events, in which order, as which
rows (ordinary or macro), cut into which segments, and their segment maps in each ring
(docs/architecture.md section 4)."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_hamlet.core.adjacency import AdjacentRuns
from gpu_hamlet.core.numeric import xfloat_to_float
from gpu_hamlet.core.panes import first_window
from gpu_hamlet.core.panes import panes as host_panes
from gpu_hamlet.core.recursions import BLOCK, EVENT, MOVE, Blocks
from gpu_hamlet.core.rings import layout, ring_integers
from gpu_hamlet.core.weights import as_array
from gpu_hamlet.engine.adjacent import adjacent_runs
from gpu_hamlet.engine.attributes import Attributes
from gpu_hamlet.engine.backend import Backend, Steps, drive
from gpu_hamlet.engine.events import EventFrame
from gpu_hamlet.engine.matching import Matcher
from gpu_hamlet.engine.options import Options
from gpu_hamlet.engine.partitions import Partitioner, pair_keys
from gpu_hamlet.engine.pruning import ranges, rows_in_runs, rows_may_complete, typed_may_complete
from gpu_hamlet.engine.row_runs import collapsible_runs
from gpu_hamlet.engine.sharing import SharedBursts
from gpu_hamlet.engine.stage_sharing import SharedStages
from gpu_hamlet.engine.window_copies import WINDOW_ROUTE_COSTS, window_copies, windows_holding
from gpu_hamlet.engine.window_sharing import SharedWindows
from gpu_hamlet.errors import EventDataError
from gpu_hamlet.names import shown
from gpu_hamlet.query.plan import Asked, Channel, QueryPlan, Template

#: The share of a query's rows that runs must drop for `QueryRows._collapse_runs` to collapse
#: them, by whether residue passes follow the float pass ("exact") or not ("float"). Below it the
#: collapse's own NumPy work and the runs' coefficients per pass cost more than the rows save
#: (bench_small.py's 50 queries over 2,100 events: 2% of rows in runs, 15-25% slower when
#: collapsed; the HAMLET authors' stream: 77% of rows dropped, bigint 1.1-1.6x faster at 50,000
#: to 100,000 events, exact 1.4x at 20,000). A float pass alone never gains: it lost 7% with 14%
#: of rows dropped (bench_sharing.py, 100 queries over bursts of 50) and gained nothing with 77%
#: (the authors' stream), so 1.0, which no collapse reaches (a run keeps one row).
COLLAPSE_FRACTION = {"exact": 0.125, "float": 1.0}


#: `QueryRows.restricted` cuts a query's rows from this many on. Below, residue passes over every
#: row cost less than the Python that cuts them: on bench_small.py's 50 queries over 2,100 events
#: the cut made the exact call 1.72-1.79x float's time where passes over every row took
#: 1.45-1.62x (benchmarks/results/small_calls/ab_3bc5440_cut_rows.txt).
CUT_ROWS = 20_000


class QueryRows:
    """One query's rows: the events it matches in partition and time order, shared bursts
    collapsed into macro rows, pruned, then segmented; and their segment maps in any ring. The
    input half of a query's evaluation (gpu_hamlet/engine/results.py is the output half)."""

    def __init__(
        self,
        ev: EventFrame,
        parts: Partitioner,
        attrs: Attributes,
        plan: QueryPlan,
        matcher: Matcher,
        shared: list[SharedBursts | SharedWindows | SharedStages],
        options: Options,
        be: Backend,
        record_snapshots: bool = False,
        maps: bool = False,
        asked: Asked | None = None,
    ) -> None:
        """`asked`: which windows are asked for (`evaluate`; None: all)."""
        self.asked = asked
        self.ev, self.attrs, self.plan, self.options, self.be = ev, attrs, plan, options, be
        self.tpl = plan.template
        # Per-event arrays that hold one value (`_keep` fills them rather than gathering them).
        self._fill: dict[str, int | bool] = {}
        q = plan.query
        keys = parts.keys(q.partition_attrs, len(q.groupby))
        # A set whose optimizer shared none of the bursts q matches leaves q's rows as they are:
        # q then takes the plain path, at the cost of sharing="none" (issue 21, part 3).
        shared = [sb for sb in shared if sb.shares(q.name)]
        self.sources = shared
        # A block macro row (a shared stage's run) stands for events over a stretch of time,
        # which pruning by WITHIN cannot weigh: with several sources, such rows are pruned
        # before they collapse (one source prunes around its runs: `compressed`).
        self.prune = not any(isinstance(sb, SharedStages) for sb in shared)
        tpl = self.tpl
        assert tpl.one_row or not shared, "only flat SEQ patterns share bursts (sharing.analyze)"
        w = plan.windowing
        # The query's events; without `maps` only those that may be in a trend (a slice's maps
        # must keep events whose partners lie in other slices).
        src = shared[0] if len(shared) == 1 else None
        # Tumbling windows, each one segment: a burst set's slots are pruned per window at once.
        window = w.seg if isinstance(src, SharedBursts) and not (w.full or maps) else None
        per_window = {} if window is None else {"window": window}
        fast = (
            src.compressed(q, tpl, matcher, w.within, prune=not maps, **per_window)
            if src is not None
            else None
        )
        self._window_pruned = fast is not None and window is not None
        macro_src: np.ndarray | None  # per row: the shared burst source, or -1
        macro_seg: np.ndarray | None  # per row: the source's coefficient segment, or -1
        pruned = fast is not None
        if fast is not None:  # the set stream's slots q matches, already pruned
            qidx, self.rows, self.time, self.pid, macro_seg, self.pos = fast
            macro_src = None  # one source: derived from macro_seg
        elif not shared and tpl.one_row and not maps:  # matched and pruned in one compiled call
            # A tumbling window is its own segment: pruned by its runs at once, not again later.
            run = keys.pid if w.full else keys.window_runs(w.seg, host_panes)
            self._window_pruned = not w.full
            qidx, self.pos = typed_may_complete(
                keys.codes, matcher.position_of_code(tpl), tpl.is_start, tpl.is_end, keys.order,
                matcher.drop_mask(q), run, keys.time, w.within, by_code=keys.by_code,
            )  # fmt: skip
            self.rows, self.time, self.pid = keys.order[qidx], keys.time[qidx], keys.pid[qidx]
            macro_src = macro_seg = None
            pruned = True
        elif not shared:  # every event in partition order; pos is -1 where q matches none
            qidx = None  # the identity
            self.rows, self.time, self.pid = keys.order, keys.time, keys.pid
            self.pos = matcher.sorted_positions(q, tpl, keys)
            macro_src = macro_seg = None
            if not tpl.one_row:  # one row per state an event enters, and per negated event
                qidx = self._expand(tpl)
        else:
            pos_all = matcher.sorted_positions(q, tpl, keys)
            qidx = np.flatnonzero(pos_all >= 0)
            if not maps and not self.prune:
                # Pruned before a shared stage's runs collapse. Rows it would drop are in no
                # trend, so a run's map may still hold them.
                pos = pos_all[qidx]
                qidx = qidx[
                    rows_may_complete(keys.pid[qidx], keys.time[qidx], *self._ends(pos), w.within)
                ]
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
            self.time = keys.time[qidx]
            self.pos = pos_all[qidx]
            for s_i, sb in enumerate(shared):  # a macro row stands at its burst's Kleene position
                self.pos[macro_src == s_i] = (
                    sb.macro_position(q.name)
                    if isinstance(sb, SharedStages)
                    else tpl.labels[sb.sset.kleene_type]  # flat
                )
            # pid: the partition (GROUPBY + equivalence values).
            self.pid = keys.pid[qidx]
        if tpl.one_row:  # an event is one row, whose state is its type's label
            self.label, self.kind = self.pos, np.full(self.pos.shape[0], EVENT, np.int64)
            self._fill["kind"] = EVENT
        self._check_values(matcher)
        if not pruned:
            sel = (
                rows_may_complete(self.pid, self.time, *self._ends(), w.within)
                if self.prune and not maps
                else np.flatnonzero(self.pos >= 0)
            )
            qidx = sel if qidx is None else qidx[sel]
            self._keep(sel, ("rows", "pid", "pos", "time", "label", "kind"))
            macro_seg = macro_seg[sel] if macro_seg is not None else None
            macro_src = macro_src[sel] if macro_src is not None else None
        if macro_seg is None:  # no shared bursts: no macro rows (one array: none is written)
            macro_seg = macro_src = np.full(self.pos.shape[0], -1, np.int64)
            self.macro = np.zeros(self.pos.shape[0], bool)
        else:
            if macro_src is None:  # at most one source: rows with a segment are its macro rows
                macro_src = np.where(macro_seg >= 0, 0, -1)
            self.macro = macro_src >= 0
        self.macro_seg: np.ndarray = macro_seg
        self.macro_src: np.ndarray = macro_src
        for s_i, sb in enumerate(shared):  # computed with the other queries' (`Ahead`)
            if not isinstance(sb, SharedWindows):
                sb.ahead.add(macro_seg[macro_src == s_i])
        self.run_macro = np.zeros(self.pos.shape[0], bool)  # a collapsed run (`_collapse_runs`)
        self._fill["run_macro"] = False
        if not shared:
            self._fill.update(macro_src=-1, macro_seg=-1, macro=False)
        self._runs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._layout: tuple | None = None  # `_macro_layout`
        self._mus: dict[tuple[str, int], np.ndarray] = {}  # MU per ring (`_mu`)
        self.snapshots: list[float] | None = [] if record_snapshots and self.macro.any() else None
        self.gid_of_pid = keys.gid_of_pid  # (each partition's GROUPBY group)
        self.maps = maps
        self.full = w.full or maps  # `maps`: every segment as its map (pane summaries)
        self.seg: np.ndarray | None = None  # each event's segment, from the segmenting step
        self._adjacent: AdjacentRuns | None = None

    def prepare(self) -> Steps:
        """Segment the events (their panes: a backend step), then choose how windows are
        formed: from pane maps, or, when cheaper, each window's own events from zero."""
        if self.seg is not None:
            return
        w = self.plan.windowing
        self.seg, starts = yield ("segments", (self.pid, self.time, w.seg))
        if self.maps:
            return
        if w.full and (self.plan.adjacency or self._copies_cheaper(starts)):
            self._into_windows()  # NEXT: windows run whole (gpu_hamlet/core/adjacency.py)
        if not self.full and not self._window_pruned:  # prune again, per window
            kept = rows_in_runs(self.pid, self.seg, *self._ends())
            if kept.shape[0] < self.pos.shape[0]:  # (ascending: as many rows keep them all)
                self._keep(kept)
        if self.plan.adjacency is None:  # NEXT rows each read a tree by their own value
            self._collapse_runs()

    def _collapse_runs(self) -> None:
        """Each run of rows that enter one state without a self-loop, with no other row between
        them, as one macro row: the state's input c is the same for all b of them (only they
        change the state, which is not its own predecessor), so the run adds b*c, and per channel
        b*t + (sum of its weights)*c (docs/architecture.md section 2). Runs lie within a
        (partition, segment); their first and last timestamps hold no other row (rows of one
        timestamp read the state from before it). The runs' events are kept for the
        coefficients (`_weights`)."""
        n = self.pos.shape[0]
        if n < 2:
            return
        assert self.seg is not None, "events are segmented first"
        fraction = COLLAPSE_FRACTION["exact" if self.plan.exact else "float"]
        if fraction >= 1.0:
            return
        # Rows that may link into a run: equal positions of a state without a self-loop (a
        # Kleene burst's rows link into none; moves may stand beyond the states, and link into
        # none either). Well-mixed inputs stop here, for a few NumPy calls.
        pos, loops = self.pos, self.tpl.self_loops
        link = (pos[1:] == pos[:-1]) & ~loops.take(pos[:-1], mode="clip") & (pos[:-1] < loops.size)
        if link.sum() < n * fraction:
            return
        starts, ends = collapsible_runs(
            self.pos, self.kind, self.macro, self.tpl.self_loops, self.pid, self.seg, self.time,
            EVENT,
        )  # fmt: skip
        if starts.size == 0 or (ends - starts).sum() < n * fraction:  # rows dropped
            return
        lens = ends - starts + 1
        member = np.repeat(starts, lens) + (
            np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
        )
        self._runs = (
            self.rows[member],
            self.label[member],
            (np.cumsum(lens) - lens).astype(np.int64),
        )
        drop = np.zeros(n, bool)
        drop[member] = True
        drop[starts] = False
        first = np.zeros(n, bool)
        first[starts] = True
        self._keep(~drop)
        self.run_macro = first[~drop]
        del self._fill["run_macro"]

    _PER_EVENT = (
        "rows", "pid", "pos", "time", "label", "kind", "macro_src", "macro_seg", "macro", "seg",
        "run_macro",
    )  # fmt: skip

    def _ends(self, pos: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(matched, entering a start state, entering an end state) per row (or per event of
        `pos`, one row each), for pruning. A flat SEQ has one start and one end state: two
        comparisons, as cheap as before."""
        tpl = self.tpl
        one_row = pos is not None
        if pos is None:
            pos = self.pos

        def entering(states: np.ndarray) -> np.ndarray:
            rows = pos == states[0] if states.size == 1 else np.isin(pos, states)
            if tpl.move_from.size and not one_row:
                return rows & (self.kind == EVENT)  # not MOVE rows
            return rows

        starts, ends = entering(tpl.start_states), entering(tpl.end_states)
        if not one_row:  # a block row starts (ends) trends where its block holds a start (end)
            for s_i, sb in enumerate(self.sources):
                if isinstance(sb, SharedStages):
                    block = sb.blocks[self.plan.query.name]
                    at = self.macro_src == s_i
                    if tpl.is_start[block].any():
                        starts = starts | at
                    if tpl.is_end[block].any():
                        ends = ends | at
        return pos >= 0, starts, ends

    def _expand(self, tpl: Template) -> np.ndarray:
        """Each matched event as one row per state its label enters, then a `MOVE` row when its
        type is negated (pos: the label), all at its timestamp (gpu_hamlet/core/recursions.py).
        Returns the rows' events (indices into the partition order); sets `label` (the type's
        label on entering rows, which weights read; -1 on move rows) and `kind`."""
        lab = self.pos
        n_enter = np.diff(tpl.enter_ptr)
        moves = (np.diff(tpl.move_ptr) > 0).astype(np.int64)
        per = np.where(lab >= 0, n_enter[np.maximum(lab, 0)] + moves[np.maximum(lab, 0)], 0)
        rep = np.repeat(np.arange(lab.shape[0]), per)
        offset = np.arange(rep.shape[0]) - np.repeat(np.cumsum(per) - per, per)
        lab = lab[rep]
        is_move = offset >= n_enter[lab]
        entered = tpl.enter_idx[np.minimum(tpl.enter_ptr[lab] + offset, tpl.enter_idx.shape[0] - 1)]
        self.rows, self.time, self.pid = self.rows[rep], self.time[rep], self.pid[rep]
        self.pos = np.where(is_move, lab, entered).astype(lab.dtype)  # one kernel signature
        self.label = np.where(is_move, -1, lab)
        self.kind = np.where(is_move, MOVE, EVENT).astype(np.int64)
        return rep

    def _keep(self, rows: np.ndarray, names: tuple[str, ...] = _PER_EVENT) -> None:
        """Keep the per-event arrays `names` at `rows` (a mask, or indices that may repeat). A
        mask is turned into indices once, not once per array; one that keeps all changes
        nothing. Arrays of one value are filled, one array per value and dtype (none of them is
        written in place), and `label` stays `pos` where it is (one row per event): a gather
        costs far more."""
        if rows.dtype == bool:
            if rows.all():
                return
            rows = np.flatnonzero(rows)
        alias = self.label is self.pos
        filled: dict[tuple, np.ndarray] = {}
        for name in names:
            old = getattr(self, name)
            if name in self._fill:
                key = (self._fill[name], old.dtype)
                if key not in filled:
                    filled[key] = np.full(rows.shape[0], self._fill[name], old.dtype)
                setattr(self, name, filled[key])
            elif not (alias and name == "label"):
                setattr(self, name, old[rows])
        if alias:
            self.label = self.pos

    def _copies_cheaper(self, starts: np.ndarray) -> bool:
        """Whether running each window's events from zero beats composing pane maps, for the
        events whose (partition, pane) runs start at `starts` (`WindowRouteCosts`). With about
        one event per pane (sparse partitions) the copies win, by up to a third; with dense
        panes the maps do, by up to 17x (BENCHMARKS.md, "Sliding windows' route")."""
        w, tpl = self.plan.windowing, self.tpl
        rows = self.pos.shape[0]
        if rows == 0:
            return False
        assert self.seg is not None, "events are segmented first"
        D = len(self.plan.linear) * (tpl.k + 1) + 1
        windows = windows_holding(self.pid, self.seg, starts, w.a, w.n)
        return WINDOW_ROUTE_COSTS.copies_cheaper(
            rows, w.copies, starts.shape[0], windows, D, int(tpl.k)
        )

    def _into_windows(self) -> None:
        """Copy every event into each window holding its pane; windows become the segments.
        With pruning, each window keeps only the copies `rows_in_runs` would keep: made in the
        same pass, where copying every event first and gathering the kept copies after took
        two gathers of every per-event array (bench_engine.py's sliding windows)."""
        a, n = self.plan.windowing.a, self.plan.windowing.n
        seg = self.seg
        assert seg is not None, "events are segmented first"
        first = first_window(seg, a, n)
        total = int((seg // a - first + 1).sum())
        rep, k = window_copies(self.pid, seg, a, n, total, *self._ends())
        self._keep(rep, tuple(name for name in self._PER_EVENT if name != "seg"))
        self.seg = k
        self.full = False
        self._window_pruned = True

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
            of_type = np.flatnonzero(pos == self.tpl.labels[agg.type])
            n = pc.sum(bad.take(pa.array(of_type))).as_py() or 0
            if n:  # (a part counts its own: a Spark task's, a stream chunk's)
                part = self.ev.part
                where = " of one part of the events (the whole may hold more)" if part else ""
                raise EventDataError(
                    f"query {shown(q.name)}: {agg} reads column '{agg.attr}', which holds "
                    f"{what} on {n} matched {agg.type} event(s){where}; {advice}"
                )

    def _weights(self, ring: str, channels: tuple[Channel, ...], p: int = 0):
        """Event weights [channels, rows, lanes], and the macro rows' coefficients: (MU, K, and
        the row's index into them or -1), one entry per macro row of a burst source, then the
        basis responses of each window source (`_window_layout`). What does not depend on the
        ring (`_macro_layout`) is made once: a bigint call asks for every pass of primes."""
        labels, mseg, lens, bursts = self._macro_layout()
        W = self.attrs.weights(ring, channels, self.rows, labels, self.tpl.labels, p)
        dtype, lanes = layout(ring)
        ks: list[np.ndarray] = [np.zeros((0, len(channels), lanes), dtype)]
        # Macro rows read K only for the weighted channels (ch > 0); window sources read it all.
        need_k = len(channels) > 1 or any(isinstance(sb, SharedWindows) for sb in self.sources)
        MU = self._mu(ring, p, lens, sum(segs.shape[0] for _, segs in bursts))
        if self._runs is not None and need_k:  # collapsed runs: K = the ring sum of weights
            rows, run_labels, starts = self._runs
            Wr = self.attrs.weights(ring, channels, rows, run_labels, self.tpl.labels, p)
            vals = np.ascontiguousarray(as_array(Wr).transpose(1, 0, 2))
            ks.append(self.be.reduce_sorted(ring, vals, starts, p))
        at = lens.shape[0]
        for burst_src, segs in bursts:
            K = burst_src.coefficients(ring, p, channels, segs, MU[at : at + segs.shape[0]], need_k)
            at += segs.shape[0]
            if K is not None:
                ks.append(K)
        for sb in self.sources:
            if isinstance(sb, SharedWindows) and sb.nshared:
                ks.append(sb.responses(ring, p, channels))
        blocks = None
        if any(isinstance(sb, SharedStages) for sb in self.sources):
            mseg = mseg.copy()  # numbered per ring, below
            blocks = self._blocks(ring, channels, p, mseg)
        return W, MU, ks[1] if len(ks) == 2 else np.concatenate(ks), mseg, blocks

    def _mu(self, ring: str, p: int, lens: np.ndarray, nburst: int) -> np.ndarray:
        """MU [runs + nburst, 1, lanes]: the collapsed runs' lengths as ring elements, then room
        for the burst sources' MU. Kept per ring, the runs' part written once: the passes of a
        bigint call run one after another, and their lengths are the same residues for every
        prime above 2^30 (`ring_integers`)."""
        key = (ring, p if lens.shape[0] and lens.max() >= 2**30 else 0)
        if key not in self._mus:
            dtype, lanes = layout(ring)
            mu = np.empty((lens.shape[0] + nburst, 1, lanes), dtype)
            mu[: lens.shape[0]] = ring_integers(ring, p, lens)
            if key[1]:  # per prime: not kept
                return mu
            self._mus[key] = mu
        return self._mus[key]

    def _macro_layout(
        self,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[SharedBursts, np.ndarray]]]:
        """The rows' labels for weights (-1 on macro rows, which weigh by their coefficients),
        each row's index into MU and K (`_weights`; -1 on an event row), the collapsed runs'
        lengths, and per burst source with macro rows the bursts they stand for: once per
        query, after the rows are final."""
        if self._layout is None:
            labels = self.label
            if self.sources or self._runs is not None:
                labels = np.where(self.macro | self.run_macro, -1, self.label)
            labels = np.asarray(labels, np.int64)  # (as weights read them)
            mseg = self.kind.copy()
            offset = 0
            lens = np.zeros(0, np.int64)
            if self._runs is not None:
                lens = np.diff(np.r_[self._runs[2], self._runs[0].shape[0]])
                at = np.flatnonzero(self.run_macro)
                mseg[at] = np.arange(at.size)
                offset = at.size
            bursts = []
            for s_i, sb in enumerate(self.sources):
                at = np.flatnonzero(self.macro_src == s_i)
                if at.size and isinstance(sb, SharedBursts):
                    mseg[at] = offset + np.arange(at.size)
                    offset += at.size
                    bursts.append((sb, self.macro_seg[at]))
            self._layout = labels, mseg, lens, bursts
        return self._layout

    def _blocks(
        self, ring: str, channels: tuple[Channel, ...], p: int, mseg: np.ndarray
    ) -> Blocks | None:
        """The block macro rows' maps (GLORIA's shared stages), numbered into `mseg` as BLOCK -
        the offset of their map in BM, and each stage's block of states."""
        stages = [(s_i, sb) for s_i, sb in enumerate(self.sources) if isinstance(sb, SharedStages)]
        if not stages:
            return None
        k = self.tpl.k
        name = self.plan.query.name
        bms, bss, lists = [], [], [np.zeros(0, np.int64)] * k
        offset = 0
        for s_i, sb in stages:
            at = np.flatnonzero(self.macro_src == s_i)
            bm, bs, first = sb.maps(ring, p, channels, self.macro_seg[at])
            mseg[at] = BLOCK - (offset + first)
            bms.append(bm)
            bss.append(bs)
            offset += bm.shape[0]
            block = sb.blocks[name]
            lists[int(block[0])] = block
        ptr = np.r_[0, np.cumsum([b.shape[0] for b in lists])].astype(np.int64)
        if len(bms) > 1:
            bms, bss = [np.concatenate(bms)], [np.concatenate(bss)]
        return Blocks(bms[0], ptr, np.concatenate(lists), bss[0])

    def _window_layout(self, run: np.ndarray) -> dict:
        """The window fields of AdjacentRuns (gpu_hamlet/core/adjacency.py) for the rows: window
        macro rows numbered across the window sources, each chained to the previous one of its
        source in its run (`run`); snapshots numbered bursts first, then event-level ones, their
        responses after the burst sources' K rows (as `_weights`); a macro row of a source whose
        ties the query takes keeps its burst's event snapshots at `wesnap`."""
        n = self.pos.shape[0]
        wburst = np.full(n, -1, np.int64)
        wprev = np.full(n, -1, np.int64)
        wesnap = np.full(n, -1, np.int64)
        kbase = int(self.run_macro.sum()) + int(
            sum(
                (self.macro_src == s_i).sum()
                for s_i, sb in enumerate(self.sources)
                if isinstance(sb, SharedBursts)
            )
        )
        name = self.plan.query.name
        windows = [
            (s_i, sb)
            for s_i, sb in enumerate(self.sources)
            if isinstance(sb, SharedWindows) and sb.nshared
        ]
        dburst, devent, gburst, gevent, eptrs = [], [], [], [], []
        bursts = events = 0
        takes = np.zeros(n, bool)
        for s_i, sb in windows:
            at = np.flatnonzero(self.macro_src == s_i)
            wburst[at] = self.macro_seg[at] + bursts
            prev = np.r_[-1, at[:-1]]
            wprev[at] = np.where((prev >= 0) & (run[np.maximum(prev, 0)] == run[at]), prev, -1)
            takes[at] = name in sb.sset.ties
            S = sb.nshared
            dburst.append(sb.doff[:S] + kbase - bursts)
            devent.append(sb.doff[S:] + kbase - bursts)
            gburst.append(sb.goff[:S] + kbase - events)
            gevent.append(sb.goff[S:] + kbase - events)
            eptrs.append(sb.eptr[:-1] + events)
            kbase += sb.entries
            bursts += S
            events += sb.nevents
        eptr = np.concatenate(eptrs + [np.array([events])]).astype(np.int64)
        count = np.where(takes, eptr[wburst + 1] - eptr[wburst], 0)
        slot_at = np.cumsum(count) - count
        wesnap[takes] = slot_at[takes]
        return dict(
            wburst=wburst,
            wprev=wprev,
            doff=np.concatenate([np.zeros(0, np.int64)] + dburst + devent).astype(np.int64),
            wesnap=wesnap,
            eptr=eptr,
            goff=np.concatenate([np.zeros(0, np.int64)] + gburst + gevent).astype(np.int64),
            eslots=int(count.sum()),
        )

    def segment_maps(self, ring: str, channels: tuple[Channel, ...], p: int = 0):
        """Per (partition, segment) run: its map (with `full`) or its result from zero, as
        (maps [runs, D, D or 1, lanes], run_pid, run_seg)."""

        def steps() -> Steps:
            yield from self.prepare()
            return (yield from self.segment_steps(ring, channels, p))

        return drive({"": steps()}, self.be)[""]

    def segment_steps(self, ring: str, channels: tuple[Channel, ...], p: int = 0) -> Steps:
        """The steps giving (maps, run_pid, run_seg) of the rows in `ring`, as `segment_maps`
        returns them."""
        tpl = self.tpl
        W, MU, K, mseg, blocks = self._weights(ring, channels, p)
        dtype, lanes = layout(ring)
        if self.plan.adjacency is not None:
            runs = self._adjacent_runs()
            # Window macro rows record their whole input (every channel) as their snapshot.
            snap: np.ndarray = np.zeros((self.pos.shape[0], len(channels), lanes), dtype)
            maps, _ = yield ("adjacent_results", (ring, runs, W, MU, K, mseg, tpl, snap, p))
            first = runs.starts[:-1]
            assert self.seg is not None, "events are segmented first"
            run_pid, run_seg = self.pid[first], self.seg[first]
        else:
            record = ring == "xfloat" and self.snapshots is not None
            snap = np.zeros((self.pos.shape[0] if record else 0, 1, lanes), dtype)
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
                )
                + (() if blocks is None else (blocks,)),
            )
        if ring == "xfloat" and self.snapshots is not None:
            at = np.flatnonzero(self.macro & (mseg >= 0))  # burst macro rows
            self.snapshots = xfloat_to_float(snap[at, 0, 0], snap[at, 0, 1]).tolist()
        return maps, run_pid, run_seg

    def _adjacent_runs(self) -> AdjacentRuns:
        """The trees' layout of the rows (computed once, for every ring)."""
        if self._adjacent is None:
            adj = self.plan.adjacency
            assert adj is not None and not self.full, "NEXT queries run whole windows"
            assert self.seg is not None, "events are segmented first"
            change = np.ones(self.seg.shape[0], bool)
            change[1:] = (self.pid[1:] != self.pid[:-1]) | (self.seg[1:] != self.seg[:-1])
            run = np.cumsum(change) - 1
            window = self._window_layout(run)
            runs = adjacent_runs(
                self.plan.query,
                adj,
                self.ev.table,
                self.rows,
                self.tpl.labels,
                np.where(window["wburst"] >= 0, -1, self.label),  # window macro rows: no tree
                self.kind,
                run,
                self.time,
                self.pos,
            )
            self._adjacent = replace(runs, **window)
        return self._adjacent

    def empty(self) -> bool:
        return self.pos.shape[0] == 0

    def restricted(self, gid: np.ndarray, k: np.ndarray) -> QueryRows | None:
        """A copy holding only the rows of the (partition, segment) runs that the windows k of
        GROUPBY groups gid read, for residue passes over the windows whose values need them
        (results.py `_residue_ints`); None where the rows cannot be cut so (NEXT trees, and
        shared windows and stages, whose rows stand for other runs too) and where the rows are
        too few to be worth cutting (CUT_ROWS)."""
        if self.plan.adjacency is not None or self.maps:
            return None
        if any(not isinstance(sb, SharedBursts) for sb in self.sources):
            return None
        assert self.seg is not None, "events are segmented first"
        w = self.plan.windowing
        n = self.pos.shape[0]
        if n < CUT_ROWS:
            return None
        first = np.flatnonzero(
            np.r_[True, (self.pid[1:] != self.pid[:-1]) | (self.seg[1:] != self.seg[:-1])]
        )
        run_gid, run_seg = self.gid_of_pid[self.pid[first]], self.seg[first]
        if self.full:  # pane maps: window k reads panes k*a .. k*a + w.n - 1
            panes = (k * w.a)[:, None] + np.arange(w.n)
            gid, seg = np.repeat(gid, w.n), panes.ravel()
        else:  # each segment is a window
            seg = k
        have, need = pair_keys((run_gid, run_seg), (gid, seg))
        wanted = np.isin(have, need)
        rows = np.flatnonzero(np.repeat(wanted, np.diff(np.r_[first, n])))
        sub = copy.copy(self)
        sub._layout, sub._mus = None, {}
        sub._keep(rows)
        if self._runs is not None:  # the collapsed runs of the macro rows kept
            members, labels, starts = self._runs
            lens = np.diff(np.r_[starts, members.shape[0]])
            kept = (np.cumsum(self.run_macro) - 1)[rows[self.run_macro[rows]]]
            at = ranges(starts[kept], starts[kept] + lens[kept])
            sub._runs = (members[at], labels[at], np.cumsum(lens[kept]) - lens[kept])
        return sub

    @classmethod
    def fused(cls, members: list[QueryRows]) -> QueryRows:
        """The rows of several queries of one plan shape (`QueryPlan.shape`) as one query's,
        each query's partitions and groups numbered after the previous query's, so that every
        step after this runs once for all of them (engine/fusion.py). The members' rows come
        from one call over one sort, not segmented yet, and read the same shared sources (none,
        or one set's bursts, whose coefficient segments are the set's)."""
        first = members[0]
        sources = [id(s) for s in first.sources]
        assert all(
            [id(s) for s in m.sources] == sources
            and m._fill == first._fill
            and m.seg is None
            and m.gid_of_pid is first.gid_of_pid
            and m.label is m.pos  # one row per event: the label is the position
            for m in members
        ), "rows of one sort and sources, not segmented"
        parts = first.gid_of_pid.shape[0]
        groups = int(first.gid_of_pid.max()) + 1 if parts else 0
        out = copy.copy(first)
        out._fill, out._mus, out._layout, out.snapshots = dict(first._fill), {}, None, None
        n = sum(m.pos.shape[0] for m in members)
        for name in cls._PER_EVENT:
            if name in ("label", "seg"):
                continue
            if name in first._fill:  # arrays of one value (`_keep`)
                setattr(out, name, np.full(n, first._fill[name], getattr(first, name).dtype))
            elif name == "pid":  # (whole arrays: a NumPy call per query cost 1-2% of a call)
                sizes = [m.pid.shape[0] for m in members]
                pid = np.concatenate([m.pid for m in members])
                pid += np.repeat(np.arange(len(members)) * parts, sizes).astype(pid.dtype)
                out.pid = pid
            else:
                setattr(out, name, np.concatenate([getattr(m, name) for m in members]))
        out.label = out.pos
        gid = first.gid_of_pid
        out.gid_of_pid = (gid + groups * np.arange(len(members), dtype=gid.dtype)[:, None]).ravel()
        return out

    def order_keys(self, attr: str):
        return self.attrs.order_keys(attr)

"""GLORIA's shared stages: runs of a sub-pattern (a SEQ transition's type, a Kleene cycle such
as `SEQ(P, T)+`, or a chain of them that one Q-set shares) computed once for the queries of the
Q-set, each query resolving a run in one step (docs/architecture.md section 10).

A *run* is a maximal stretch of the Q-set's stream (the events its queries match, in one
partition and pane) made only of the sub-pattern's events, cut at timestamps that mix them with
others. Nothing else a query of the set reads happens during a run, so the run acts on each
query's state as one affine map of the block of states the sub-pattern owns and their input
(the sum of the entry's predecessors outside it, and the constant at a start): the map of the
run's events over the *sub-template* `SEQ(IN, sub-pattern)`, which the backend computes like any
segment map (`full`). It depends only on the events, so queries that see the same events there
(GLORIA's class: same partitions and filters on the sub-pattern's types) and aggregate alike
share it, and each applies it as one block macro row (gpu_hamlet/core/recursions.py
`run_segments`): for a transition tran(A, B), IN is the snapshot of A's sum that GLORIA
propagates. Per run the engine decides whether sharing pays, as HAMLET does per burst.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Mapping, Sequence
from math import gcd
from typing import NamedTuple, TypeVar, overload

import numpy as np

from gpu_hamlet.core.recursions import EVENT
from gpu_hamlet.core.rings import layout, xf_scaled_rows
from gpu_hamlet.engine.attributes import Attributes
from gpu_hamlet.engine.backend import Backend
from gpu_hamlet.engine.burst_slots import collapsed_stream
from gpu_hamlet.engine.events import EventFrame
from gpu_hamlet.engine.matching import Matcher
from gpu_hamlet.engine.optimizer import EngineCostModel
from gpu_hamlet.engine.partitions import SortedKeys
from gpu_hamlet.engine.plan_search import (
    PlanCosts,
    SearchSpace,
    SharingPlan,
    StreamStats,
    find_plan,
)
from gpu_hamlet.engine.pruning import rows_by_code, typed_may_complete
from gpu_hamlet.engine.row_sample import KEPT_QUERIES
from gpu_hamlet.engine.sharing import (
    Ahead,
    Injection,
    SharingStats,
    Slots,
    collapse,
    pending,
)
from gpu_hamlet.engine.transitions import Pool, TransitionTemplate
from gpu_hamlet.query.pattern import Pattern, PatternElement, Seq, positive_types, walk
from gpu_hamlet.query.plan import Channel, QueryPlan, Template
from gpu_hamlet.query.workload import Query, Workload

#: Events of the sample that GLORIA's statistics come from (the first ones, as given).
SAMPLE = 100_000
#: The first events of that sample that the gate before the search reads (`stage_plan`). Most
#: workloads stop there, and counting their runs over the whole sample cost a warm `dynamic`
#: call 2-3% of 20 queries over 100,000 ridesharing events (bench_gloria.py).
GATE_SAMPLE = 25_000

#: What a Q-set's runs must save beyond its bookkeeping and the pass that cuts its stream (the
#: backend's `EngineCostModel.stage_row_s` and `stage_stream_s`), in the model's seconds, for
#: the Q-set to be searched for, kept by the cut, and share any run.
#: `benchmarks/calibrate_stages.py` lowers it to -inf to time the Q-sets the model would not
#: build, with the plan and the cut's ranking left as they are.
MIN_GAIN = 0.0

#: The least GLORIA's search costs per pool a Q-set may share, in the model's seconds: a
#: workload whose best stage could save less over the stream is not searched. From
#: `python benchmarks/bench_gloria.py` (its "opt ms" over "pools"): the least was 33 us per pool
#: (bursty Kleene, 20 queries: 0.33 ms for 10 pools), over the 2.0 measured seconds per model
#: second that `calibrate_stages.py` finds (its alpha, 1.8 to 2.3).
SEARCH_S = 1.6e-5

#: What asking a query's pruning costs (`KeptShares`, a compiled pass over a sample of its rows),
#: in the model's seconds: about 50 us on the development machine (bursty SEQ, 100 queries),
#: over the 1.9 measured seconds per model second of `calibrate_stages.py`. A stage whose gain
#: at every event kept is below what asking would cost is not asked: over bench_gloria.py's
#: bursty SEQ at 100 queries and 10 body types, the gate asked 97 passes for stages that could
#: save at most about as much (6.5 ms of an 80 ms call).
ASK_S = 2.6e-5

#: Plans per workload whose chain cut's stages are kept (`Shareable.cuts`): building them took
#: 0.2-0.45 ms of a `dynamic` call over bench_gloria.py's bursty SEQ queries, whose plan is the
#: same from call to call.
CUTS_KEPT = 8


#: One amount, or an array of them (the gate weighs its stages as arrays).
Amount = TypeVar("Amount", np.ndarray, float)


def bookkeeping(nq: Amount, slots: Amount, model: EngineCostModel) -> Amount:
    """Seconds the shared path costs nq queries that each read `slots` rows of the set's
    stream (its events outside shared runs, and one per shared run), beyond the runs' own
    work: what a Q-set's runs must save to share any."""
    return nq * model.stage_row_s * slots


def block_multiply_adds(L: float | np.ndarray, width: float | np.ndarray) -> float | np.ndarray:
    """A block macro row's multiply-adds over a sub-pattern of L types for queries of `width`
    float channels: about (L + 1) (L + 2) / 2 per column and pair of channels (each output
    channel reads every input channel, `run_segments`). The stage model weighs them at
    `stage_fma_s`, which `benchmarks/calibrate_stages.py` fits from the same count."""
    return width * width * (L + 1) * (L + 2) / 2


#: The sub-template's input state's type (no event has it: IN only carries the block's input).
IN_TYPE = "IN"

Body = tuple[PatternElement | Seq, ...]


class Shareable(NamedTuple):
    """What `stage_plan` needs of a workload before it looks at the events."""

    template: TransitionTemplate
    #: (pool, classes of two or more queries that could share it)
    pools: tuple[tuple[Pool, list[tuple[str, ...]]], ...]
    #: GLORIA's search space of the template, kept across calls
    space: SearchSpace
    #: the gate's stages before the search: each class of a pool, and each stretch of
    #: consecutive shareable pools that two or more queries take, with them
    whole: Stages
    stretched: Stages
    #: the stages the cut weighs (`merged_stages`: (chain, queries) each), with their arrays,
    #: per plan's chains (at most CUTS_KEPT plans)
    cuts: dict[tuple, tuple[list[tuple[tuple[Pool, ...], tuple[str, ...]]], Stages]]


StageList = list[tuple[tuple[str, ...], tuple[str, ...]]]  # (sub-pattern's types, queries)


class Stages(NamedTuple):
    """Stages (a sub-pattern's types, the queries sharing it) that `stage_plan` weighs, with
    what its first bound reads of them as arrays: a call's bound is then a few products over
    every stage, where a sum per stage and type took 3 ms of a call at 100 SEQ queries
    (benchmarks/bench_gloria.py's bursty stream, L = 10; docs/architecture.md section 10)."""

    items: StageList
    #: per stage, (its types, the types its queries read): what `StreamStats.runs` counts
    keys: list[tuple[frozenset[str], frozenset[str]]]
    type_names: list[str]
    #: [stage, type]: how often the type occurs among the stage's types
    body: np.ndarray
    #: [stage, type]: 1 where the stage's queries read the type
    seen: np.ndarray
    #: [stage, type]: 2 in the stage's types, else 1 where its queries read it (`prefetch_marked`)
    marks: np.ndarray
    length: np.ndarray
    #: per stage, its distinct types
    kinds: np.ndarray
    nq: np.ndarray
    query_names: list[str]
    #: the stages' queries (indices into query_names), stage after stage, from `starts`
    members: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, template: TransitionTemplate, items: StageList) -> Stages:
        keys = [(frozenset(types), template.types_of(frozenset(names))) for types, names in items]
        type_names = sorted({t for body, seen in keys for t in body | seen})
        col = {t: j for j, t in enumerate(type_names)}
        body = np.zeros((len(items), len(type_names)))
        seen = np.zeros((len(items), len(type_names)))
        for i, ((types, _), (_, read)) in enumerate(zip(items, keys, strict=True)):
            for t in types:
                body[i, col[t]] += 1.0
            seen[i, [col[t] for t in read]] = 1.0
        query_names = sorted({n for _, names in items for n in names})
        at = {n: j for j, n in enumerate(query_names)}
        nq = np.array([len(names) for _, names in items], np.int64)
        return cls(
            items,
            keys,
            type_names,
            body,
            seen,
            np.maximum(seen, 2 * (body > 0)).astype(np.int8),
            np.array([len(types) for types, _ in items], np.int64),
            np.array([len(body) for body, _ in keys], np.int64),
            nq,
            query_names,
            np.array([at[n] for _, names in items for n in names], np.int64),
            np.concatenate([[0], np.cumsum(nq)[:-1]]).astype(np.int64),
        )

    def widths(self, widths: Mapping[str, int] | None) -> np.ndarray:
        """Per stage, its queries' most float channels (1 without `widths`: COUNT alone)."""
        if widths is None or not self.items:
            return np.ones(len(self.items), np.int64)
        per_query = np.array([widths[n] for n in self.query_names], np.int64)
        return np.maximum.reduceat(per_query[self.members], self.starts)

    def copies(self, copies: Mapping[str, int] | None) -> np.ndarray:
        """Per stage, its queries' mean window copies (1 without `copies`: tumbling windows),
        as `SharedStages` weighs them."""
        if copies is None or not self.items:
            return np.ones(len(self.items))
        per_query = np.array([copies[n] for n in self.query_names], np.float64)
        return np.add.reduceat(per_query[self.members], self.starts) / self.nq


@functools.lru_cache(maxsize=64)
def shareable_stages(workload: Workload) -> Shareable:
    """GLORIA's template of the workload, and its pools that a Q-set may execute shared: SEQ
    transitions (`start`, `tran`) and Kleene cycles of two or more types. A one-type Kleene pool
    is HAMLET's burst (engine/sharing.py), shared burst by burst there. Cached per workload, as
    its plans are (evaluate.py `_compiled`): every `dynamic` call asks."""
    template = TransitionTemplate.of(workload)
    out = []
    for pool in template.pools:
        if pool.kind == "kleene" and len(pool.types) < 2:
            continue
        groups = template.class_groups((pool,), pool.queries)
        if groups:
            out.append((pool, groups))
    pools = tuple(out)
    return Shareable(
        template,
        pools,
        SearchSpace(template),
        Stages.of(template, [(pool.types, g) for pool, groups in pools for g in groups]),
        Stages.of(template, [(_types_of(c), n) for c, n in _stretches(template, pools)]),
        {},
    )


def _types_of(chain: tuple[Pool, ...]) -> tuple[str, ...]:
    """A chain's types, pool after pool."""
    return tuple(t for p in chain for t in p.types)


def stage_plan(
    workload: Workload,
    ev: EventFrame,
    model: EngineCostModel,
    widths: Mapping[str, int] | None = None,
    kept: Callable[[Sequence[str], Sequence[str], float], float] | None = None,
    panes: Callable[[Sequence[str], int], int] | None = None,
    copies: Mapping[str, int] | None = None,
) -> tuple[SharingPlan | None, list[tuple[str, tuple[Pool, ...], tuple[str, ...]]]]:
    """GLORIA's plan for the workload, and what of it runs shared: (name, chain of pools,
    queries) per Q-set, consecutive pools of one Q-set chained into one sub-pattern (its
    snapshots propagate along all of them), cut to the stretches whose runs pay. No search
    (None) when neither a pool shared by its whole class nor a stretch of pools that queries
    have in common could pay for its bookkeeping and the search: then only HAMLET's bursts run
    shared. `widths`: each query's float channels (`QueryPlan.linear`; None: COUNT alone), which
    its rows' and block rows' costs grow with; `kept`: the share of the named queries' events
    of some types that their pruning keeps (`row_sample.KeptShares`; None: all), which is all
    that sharing those types' runs can save them (`SharedStages.saved_per_run`); `panes`: the
    runs of one pane of the named queries that the sample's first n events form (`PaneRuns`;
    None: none), which cut every sub-pattern's runs as `SharedStages` cuts them; `copies`: each
    query's windows holding a pane (`Windowing.copies`; None: 1), which its block rows run in."""
    template, pools, space, whole, stretched, cuts = shareable_stages(workload)
    if not pools:
        return None, []
    type_names = list(ev.type_names)
    codes = sample_of(ev, ev.type_codes)
    stats = StreamStats.of_codes(codes[:GATE_SAMPLE], type_names)
    read = min(codes.shape[0], GATE_SAMPLE)  # the events `stats` counted

    # runs, mean run, length, queries, width, window copies, cost
    Runs = tuple[float, float, int, int, int, float, float]
    Ask = tuple[int, float, Runs]

    def at(r: Runs, share: float) -> float:
        """A stage's gain where its queries keep `share` of its events."""
        runs, mean, L, nq, width, cp, cost = r
        return runs * SharedStages.saved_per_run(mean, L, nq, model, width, share, cp) - cost

    def weighed(stages: Stages, floor: float = 0.0) -> tuple[list[float], list[Ask]]:
        # Per (types, queries): the sample's runs, at their mean length, must save the queries'
        # bookkeeping and the pass that cuts the Q-set's stream into runs: else the stream is
        # not even cut. (All terms grow with the stream alike: the sample decides.) First a
        # bound from the counts alone: sharing saves at most each query's rows of the
        # sub-pattern, less the map's. The runs of the stages past it are counted in one pass,
        # and those whose runs would pay are to be weighed by the share of their rows that the
        # queries' pruning keeps (a pass per way of pruning: asked last, `asks`: the stage, the
        # share from which it gains more than `floor`, and its gain at a share).
        counts = np.array([stats.counts.get(t, 0.0) for t in stages.type_names])
        nt_all, ns_all = stages.body @ counts, stages.seen @ counts  # (sums of whole numbers)
        nq_all, width_all, copies_all = stages.nq, stages.widths(widths), stages.copies(copies)
        cut_all = model.stage_stream_s * ns_all
        per_event = nq_all * (model.base_s + width_all * model.event_s) - (
            model.base_s + (stages.length + 2) * model.event_s
        )
        bound = nt_all * per_event - cut_all - bookkeeping(nq_all, ns_all - nt_all, model)
        # The stages past the bound, as arrays too (the same sums, term by term).
        past = np.flatnonzero(bound > 0)
        stats.prefetch_marked([stages.keys[i] for i in past], stages.type_names, stages.marks[past])
        nt, ns, nq, width = nt_all[past], ns_all[past], nq_all[past], width_all[past]
        cps = copies_all[past]
        runs = np.array([stats.runs(*stages.keys[i]) for i in past], np.float64)
        if panes is not None:  # (types alone run on across panes; at most one run an event)
            pane = np.array([panes(stages.items[i][1], read) for i in past], np.float64)
            runs = np.maximum(runs, np.minimum(nt, pane))
        mean = nt / np.maximum(runs, 1.0)
        cost = bookkeeping(nq, ns - nt + runs, model) + cut_all[past]
        L = stages.kinds[past]
        gain = runs * SharedStages.saved_per_run(mean, L, nq, model, width, 1.0, cps) - cost
        bound[past] = gain
        asks: list[Ask] = []
        if kept is not None:
            # The gain is linear in the share kept: it exceeds the floor from `need` on. A stage
            # whose gain with every event kept could not exceed it by what asking costs (its
            # queries' pruning passes) is not asked, and weighs the floor at most.
            above = max(floor, 0.0)
            none = runs * SharedStages.saved_per_run(mean, L, nq, model, width, 0.0, cps)
            asking = ASK_S * np.minimum(nq, KEPT_QUERIES) * read / max(ev.type_codes.shape[0], 1)
            lazy = gain <= above + asking
            bound[past[lazy]] = np.minimum(gain[lazy], above)
            for j in np.flatnonzero(~lazy).tolist():
                r: Runs = (
                    float(runs[j]),
                    float(mean[j]),
                    int(L[j]),
                    int(nq[j]),
                    int(width[j]),
                    float(cps[j]),
                    float(cost[j]),
                )
                need = float(cost[j] + above - none[j]) / float(gain[j] + cost[j] - none[j])
                asks.append((int(past[j]), need, r))
        return bound.tolist(), asks

    def share(stage: tuple[tuple[str, ...], tuple[str, ...]], need: float) -> float:
        assert kept is not None
        return kept(stage[1], stage[0], need)

    def pays(stages: Stages, floor: float) -> bool:
        """Whether a stage gains more than `floor`, the queries' pruning asked stage by
        stage, the most promising first, up to the first that does
        (a pruning pass a way of pruning: 100 distinct queries of bench_gloria.py's bursty SEQ
        made 100 of them a call)."""
        out, asks = weighed(stages, floor)
        asked = {i for i, _, _ in asks}
        if any(g > floor for i, g in enumerate(out) if i not in asked):
            return True
        for i, need, r in sorted(asks, key=lambda a: -out[a[0]]):
            if at(r, share(stages.items[i], need)) > floor:
                return True
        return False

    # Before the search, what could pay for it: a pool shared by its whole class, or a stretch
    # of consecutive shareable pools shared by the queries that hold it. (A chain's Q-set and
    # runs are known only from the plan: its runs may be long where each pool's are not.) The
    # search's own least cost is for the whole stream: on the sample, its share.
    floor = MIN_GAIN + SEARCH_S * len(pools) * min(codes.shape[0], GATE_SAMPLE) / max(
        ev.type_codes.shape[0], 1
    )
    if not pays(whole, floor) and not pays(stretched, floor):
        return None, []
    if codes.shape[0] > GATE_SAMPLE:  # the search and the cut weigh the whole sample
        stats = StreamStats.of_codes(codes, type_names)
        read = codes.shape[0]
    plan = find_plan(template, stats, PlanCosts.of(model), space=space)  # (the backend's costs)
    by_set: dict[tuple[str, ...], list[Pool]] = {}
    for pool, _ in pools:
        for b in plan.nodes[pool.key]:
            names = tuple(n for n in pool.queries if n in b.queries)
            if len(names) >= 2:
                by_set.setdefault(names, []).append(pool)
    # Of each Q-set's chain, the stretches that pay most, disjoint: the search costs a plan in
    # snapshots, and a pool at a chain's end may cost this engine more than it saves (a start
    # pool's single events, docs/architecture.md section 10). Q-sets that the plan keeps apart
    # on one stretch only because their snapshots come from pools they do not share (start(A)'s
    # filter groups, continued into tran(A, B)) are weighed merged too (`merged_stages`).
    chains = sorted(shared_chains(by_set), key=lambda c: (c[0], c[2]))
    signature = tuple((name, names) for name, _, names in chains)
    kept_cut = cuts.get(signature)  # (a workload's plan is mostly the same from call to call)
    if kept_cut is None:
        stages = merged_stages(template, chains)
        kept_cut = (stages, Stages.of(template, [(_types_of(c), n) for c, n in stages]))
        if len(cuts) >= CUTS_KEPT:
            cuts.clear()
        cuts[signature] = kept_cut
    stages, cut = kept_cut
    # The stages that gain most, each (query, pool) in one at most, greedily. A stage's gain
    # with every event kept bounds its gain, so the queries' pruning is asked only of a stage
    # that comes first by its bound and holds no pool taken already: the same choice as asking
    # every stage first (bursty SEQ at 100 queries: the 60 stretches of the plan's 20 Q-sets
    # were asked, 5.8 ms, though the 5 merged ones that hold their pools came first).
    bound, asks = weighed(cut)
    pending = {i: (need, r) for i, need, r in asks}
    heap = [(-g, k) for k, g in enumerate(bound)]
    heapq.heapify(heap)
    taken: set[tuple[str, str]] = set()  # (query, pool) pairs a taken stage holds
    out = []
    while heap:
        top, k = heapq.heappop(heap)
        if -top <= MIN_GAIN:
            break
        chain, names = stages[k]
        held = {(n, p.key) for n in names for p in chain}
        if held & taken:
            continue
        if k in pending:  # its bound came first: its gain at the share its queries keep
            need, r = pending.pop(k)
            heapq.heappush(heap, (-at(r, share(cut.items[k], need)), k))
            continue
        taken |= held
        out.append((" ".join(p.key for p in chain), chain, names))
    return plan, sorted(out, key=lambda s: (s[0], s[2]))


def merged_stages(
    template: TransitionTemplate, chains: list[tuple[str, tuple[Pool, ...], tuple[str, ...]]]
) -> list[tuple[tuple[Pool, ...], tuple[str, ...]]]:
    """The stages the cut weighs: every stretch of each Q-set's chain with its queries, and
    every stretch that several chains hold with all their queries that may share it (the same
    class on each of its pools). This engine's cost of a stage is per run, each query reading
    its own snapshot there (its state's input to the stretch), so Q-sets that one stretch's
    classes allow to meet share its runs' maps once where the plan kept them apart (bursty SEQ
    at 100 queries: 20 Q-sets of 5 became 5 of 20, `dynamic` 0.22 -> 0.13 s; BENCHMARKS.md,
    GLORIA executed)."""
    out: dict[tuple[tuple[str, ...], frozenset[str]], tuple[tuple[Pool, ...], tuple[str, ...]]]
    out = {}
    holders: dict[tuple[str, ...], tuple[tuple[Pool, ...], list[str]]] = {}
    for _, chain, names in chains:
        for i in range(len(chain)):
            for j in range(i + 1, len(chain) + 1):
                sub = chain[i:j]
                keys = tuple(p.key for p in sub)
                out.setdefault((keys, frozenset(names)), (sub, names))
                holders.setdefault(keys, (sub, []))[1].extend(names)
    for keys, (sub, held) in holders.items():
        for group in template.class_groups(sub, sorted(set(held))):
            out.setdefault((keys, frozenset(group)), (sub, group))
    return list(out.values())


def sample_of(ev: EventFrame, values: np.ndarray) -> np.ndarray:
    """`values` (one per event) of the events GLORIA's statistics read: of the first SAMPLE,
    those of a type some query reads (the others have no type code)."""
    return values[:SAMPLE][ev.type_codes[:SAMPLE] >= 0]


def _stretches(
    template: TransitionTemplate, pools: tuple[tuple[Pool, list[tuple[str, ...]]], ...]
) -> list[tuple[tuple[Pool, ...], tuple[str, ...]]]:
    """Every stretch of two or more consecutive shareable pools that two or more queries take
    in a row and may share (the same class on each of its pools), with those queries."""
    shareable = {pool.key for pool, _ in pools}
    per_query: dict[str, list[list[Pool]]] = {}
    for pool in template.pools:
        for n in pool.queries:
            chains = per_query.setdefault(n, [[]])
            if pool.key in shareable:
                chains[-1].append(pool)
            elif chains[-1]:
                chains.append([])
    # (stretch's pool keys, their classes) -> queries; keyed by names, not pools, which hash
    # their queries (a cold workload of 100 bursty SEQ queries over 10 types: 46 -> 12 ms)
    out: dict[tuple, tuple[str, ...]] = {}
    by_key = {p.key: p for p in template.pools}
    for n, chains in per_query.items():
        for c in chains:
            keys = [p.key for p in c]
            classes = [template.class_of(p, n) for p in c]  # (once a pool: many stretches)
            for i in range(len(c) - 1):
                for j in range(i + 2, len(c) + 1):
                    key = (tuple(keys[i:j]), tuple(classes[i:j]))
                    out[key] = (*out.get(key, ()), n)
    return [
        (tuple(by_key[k] for k in keys), names)
        for (keys, _), names in out.items()
        if len(names) >= 2
    ]


def shared_chains(
    by_set: dict[tuple[str, ...], list[Pool]],
) -> list[tuple[str, tuple[Pool, ...], tuple[str, ...]]]:
    """(name, chain, queries) for each Q-set's pools (in topological order), joined into one
    chain where every query of the set takes one pool right after the other."""
    out = []
    for names, pools in by_set.items():
        chains: list[list[Pool]] = []
        for p in pools:
            if chains and all(p.prev[n] == chains[-1][-1].key for n in names):
                chains[-1].append(p)
            else:
                chains.append([p])
        out += [(" ".join(p.key for p in c), tuple(c), names) for c in chains]
    return out


def stage_body(pattern: Pattern, chain: tuple[Pool, ...]) -> Body:
    """The sub-patterns of `pattern` that the pools of `chain` process, in order."""
    body: list[PatternElement | Seq] = []
    for pool in chain:
        if pool.kind != "kleene":
            body.append(PatternElement(pool.types[0]))
            continue
        for node in walk(pattern):
            if isinstance(node, PatternElement | Seq) and node.kleene and str(node) == pool.key:
                body.append(node)
                break
    assert len(body) == len(chain), "a chain's pools are stages of its queries' patterns"
    return tuple(body)


def sub_template(body: Body) -> Template:
    """`SEQ(IN, *body)`: state 0 is IN, states 1..L the body's types in order, L its end."""
    types = {t for b in body for t in positive_types(b)}
    name = IN_TYPE
    while name in types:
        name += "_"
    return Template.of(Seq((PatternElement(name), *body)))


def block_of(tpl: Template, sub: Template, types: tuple[str, ...]) -> np.ndarray | None:
    """The query's states of the sub-pattern, in the sub-template's order (state 1 first), or
    None when the query's automaton does not hold it as one block entered at its first state
    (then the query does not share it)."""
    if not (tpl.one_row and sub.one_row):
        return None
    L = len(types)
    block = np.empty(L, np.int64)
    for t in types:
        block[sub.labels[t] - 1] = tpl.labels[t]
    inside = {int(s): p + 1 for p, s in enumerate(block)}
    for p, s in enumerate(block, start=1):
        mine = {inside.get(int(v), 0) for v in tpl.pred_idx[tpl.pred_ptr[s] : tpl.pred_ptr[s + 1]]}
        if tpl.is_start[s]:
            mine.add(0)
        theirs = set(sub.pred_idx[sub.pred_ptr[p] : sub.pred_ptr[p + 1]].tolist())
        if mine != theirs or (tpl.is_end[s] and p != L) or sub.is_end[p] != (p == L):
            return None
    return block


class SharedStages:
    """The runs of one shared sub-pattern in one Q-set's stream, which of them run shared, and
    their maps (computed once per ring and channels, when a query first needs them)."""

    def __init__(
        self,
        ev: EventFrame,
        attrs: Attributes,
        be: Backend,
        key: str,
        chain: tuple[Pool, ...],
        queries: tuple[Query, ...],
        keys: SortedKeys,
        plans: dict[str, QueryPlan],
        matcher: Matcher,
        model: EngineCostModel,
        kept: float,
    ) -> None:
        self.ev, self.attrs, self.be = ev, attrs, be
        body = stage_body(queries[0].pattern, chain)
        self.types = tuple(t for b in body for t in positive_types(b))
        self.sub = sub_template(body)
        self.blocks = {}
        for q in queries:
            b = block_of(plans[q.name].template, self.sub, self.types)
            if b is not None:
                self.blocks[q.name] = b
        names = tuple(self.blocks)
        self.stats = SharingStats(key, names, stage=True)
        # `saved_per_run`'s channels, share of the runs' events kept alone and window copies
        self.width, self.kept = max((len(plans[n].linear) for n in names), default=1), kept
        self.copies = float(np.mean([plans[n].windowing.copies for n in names] or [1]))
        # maps, the same scaled (XFloat), done
        self._maps: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.run_of = np.full(keys.order.shape[0], -1, np.int64)  # by index into the sorted order
        self.nruns = 0
        self.ahead = Ahead(0)
        self.slots: Slots | None = None  # None when no run is shared
        self.events = 0  # of the Q-set's stream, cut into runs
        if len(names) < 2:
            return
        members = tuple(q for q in queries if q.name in self.blocks)
        set_idx, rows, set_pid, t, set_codes = keys.select(matcher.matched_by_any(members, keys))
        self.events = int(rows.size)
        pane_ms = 0
        for q in members:
            pane_ms = gcd(gcd(pane_ms, q.within_ms), q.slide_ms)
        panes, _ = be.segments(set_pid, t, ev.axis.ticks(pane_ms, members[0], "pane"))
        codes = [ev.code_of(t_) for t_ in self.types]
        run_id = be.burst_ids(set_pid, panes, t, np.isin(set_codes, codes))
        in_run = np.flatnonzero(run_id >= 0)
        nb = int(run_id.max()) + 1 if in_run.size else 0
        self.stats.bursts, self.stats.burst_events = nb, int(in_run.size)
        if nb == 0:
            return
        length = np.bincount(run_id[in_run], minlength=nb).astype(np.float64)
        worth = self._worth(length, len(names), model)
        slots = rows.size - length[worth].sum() + worth.sum()
        if (
            self._saved(length[worth], len(names), model) - bookkeeping(len(names), slots, model)
            < MIN_GAIN
        ):
            # (The pass that cut the stream is spent: only the queries' bookkeeping counts.)
            worth[:] = False  # the shared path's bookkeeping would cost more than it saves
        self.stats.shared = int(worth.sum())
        self.stats.unshared = nb - self.stats.shared
        self.stats.graphlet_snapshots = self.stats.shared
        same = set_pid[in_run][np.r_[True, np.diff(run_id[in_run]) != 0]]
        same = same[1:] == same[:-1]
        self.stats.splits = int((same & worth[:-1] & ~worth[1:]).sum())
        self.stats.merges = int((same & ~worth[:-1] & worth[1:]).sum())
        # The shared runs numbered anew (the last entry: run id -1, no run), and the set's stream
        # with each shared run one slot, as `SharedBursts` collapses its bursts.
        kept_id = np.append(np.where(worth, np.cumsum(worth) - 1, -1), -1)
        self.nruns = int(worth.sum())
        self.ahead = Ahead(self.nruns)
        self.slots = Slots(
            *collapsed_stream(run_id, kept_id, set_idx, set_pid, rows, t, set_codes, self.run_of)
        )
        run_id = kept_id[run_id]
        keep = run_id >= 0
        self.ev_rows = rows[keep]
        self.ev_time = np.ascontiguousarray(t[keep])
        self.ev_run = run_id[keep]  # ascending: run r's events are ev_lo[r]:ev_lo[r + 1]
        self.ev_lo = np.r_[0, np.cumsum(np.bincount(self.ev_run, minlength=self.nruns))]

    def _saved(self, length: np.ndarray, nq: int, model: EngineCostModel) -> float:
        L, width, kept, copies = len(self.types), self.width, self.kept, self.copies
        return float(self.saved_per_run(length, L, nq, model, width, kept, copies).sum())

    def _worth(self, length: np.ndarray, nq: int, model: EngineCostModel) -> np.ndarray:
        L, width, kept, copies = len(self.types), self.width, self.kept, self.copies
        return self.saved_per_run(length, L, nq, model, width, kept, copies) > 0

    @overload
    @staticmethod
    def saved_per_run(
        length: float,
        L: int,
        nq: int,
        model: EngineCostModel,
        width: int,
        kept: float,
        copies: float,
    ) -> float: ...

    @overload
    @staticmethod
    def saved_per_run(
        length: np.ndarray,
        L: int | np.ndarray,
        nq: int | np.ndarray,
        model: EngineCostModel,
        width: int | np.ndarray,
        kept: float,
        copies: float | np.ndarray,
    ) -> np.ndarray: ...

    @staticmethod
    def saved_per_run(
        length: float | np.ndarray,
        L: int | np.ndarray,
        nq: int | np.ndarray,
        model: EngineCostModel,
        width: int | np.ndarray,
        kept: float,
        copies: float | np.ndarray,
    ) -> float | np.ndarray:
        """What sharing saves on runs of `length` events of a sub-pattern of L types, for nq
        queries of `width` float channels, in HAMLET's burst constants (optimizer.py): alone,
        each query runs the `kept` share of the run's rows that its pruning keeps (`event_s` per
        channel); shared, the map's events run once with L + 2 columns (IN, the block, the
        constant) and each query applies a block macro row in each of `copies` windows (its
        queries' windows holding a pane, `Windowing.copies`: a query's few rows on the shared
        path take the window-copies route, so its block rows run once a window), of about
        (L + 1) (L + 2) / 2 multiply-adds (`stage_fma_s`) per column and pair of channels (each
        output channel reads every input channel, `run_segments`) and `stage_block_s`, plus the
        class's bookkeeping. (The maps' kernel took the same time with one channel and two:
        bench_gloria.py's type runs; docs/architecture.md section 10.)"""
        unshared = nq * kept * length * (model.base_s + width * model.event_s)
        per_block = block_multiply_adds(L, width) * model.stage_fma_s
        shared = (
            length * (model.base_s + (L + 2) * model.event_s)
            + nq * copies * (model.base_s + per_block + model.stage_block_s)
            + model.class_s
        )
        return unshared - shared

    # -- what QueryRows asks of a sharing source --

    def shares(self, name: str) -> bool:
        return self.nruns > 0 and name in self.blocks

    def compressed(
        self,
        q: Query,
        tpl: Template,
        matcher: Matcher,
        within: int | float | None,
        prune: bool = True,
    ) -> tuple[np.ndarray, ...] | None:
        """The query's rows straight from the set's stream with each shared run one slot (the
        query matches every event of a run: its class has the same filters on their types):
        per row its index into the sorted order, event row, time, partition id, run or -1,
        and pattern position (a run's: the sub-pattern's entry). So a query reads the slots,
        not the whole stream. With `prune`, event rows that cannot be in a trend no longer
        than `within` are dropped (gpu_hamlet/engine/pruning.py) and every run is kept (it
        stands for a stretch of time). Where the sub-pattern holds the pattern's start (or end),
        a run starts (ends) trends at its slot's time, its first event's (`typed_may_complete`)."""
        sl = self.slots
        if sl is None or not self.shares(q.name):
            return None
        block = self.blocks[q.name]
        if prune:
            idx, pos = typed_may_complete(
                sl.codes, matcher.position_of_code(tpl), tpl.is_start, tpl.is_end, sl.rows,
                matcher.drop_mask(q), sl.pid, sl.time, within, sl.burst, int(block[0]),
                self._by_code, bool(tpl.is_start[block].any()), bool(tpl.is_end[block].any()),
            )  # fmt: skip
        else:
            run = sl.burst >= 0
            pos = np.full(run.shape[0], -1, np.int32)
            plain = np.flatnonzero(~run)
            pos[plain] = matcher.positions(q, tpl, sl.rows[plain])
            pos[run] = block[0]
            idx = np.flatnonzero(pos >= 0)
            pos = pos[idx]
        return sl.idx[idx], sl.rows[idx], sl.time[idx], sl.pid[idx], sl.burst[idx], pos

    @functools.cached_property
    def _by_code(self) -> tuple[np.ndarray, np.ndarray]:
        """The slots of each type code, which every query of the Q-set prunes from."""
        assert self.slots is not None, "only queries that read the slots prune them"
        return rows_by_code(self.slots.codes)

    def macro_position(self, name: str) -> int:
        """The state a block macro row stands at: the sub-pattern's entry."""
        return int(self.blocks[name][0])

    def inject(self, name: str, qidx: np.ndarray) -> Injection | None:
        """The query's events of each shared run, kept as one macro row at its first event."""
        if not self.shares(name):
            return None
        rid = self.run_of[qidx]
        return collapse(rid, rid)

    def maps(
        self, ring: str, param: int, channels: tuple[Channel, ...], runs: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The maps of runs `runs`, flattened [maps * D' * D', 1, lanes]; in XFloat the same
        scaled per map row (`Blocks.bs`, else [0, 2]); and each run's first row there. A query
        that reads most of the set's runs gets all of them as a view: a copy per query of maps
        of D'^2 entries costs more than the maps' kernel (L = 10)."""
        key = (ring, param, channels)
        nch = len(channels)
        Dp = nch * (self.sub.k + 1) + 1
        dtype, lanes = layout(ring)
        if key not in self._maps:
            self._maps[key] = (
                np.empty((self.nruns, Dp, Dp, lanes), dtype),
                np.empty((self.nruns if ring == "xfloat" else 0, Dp, Dp, 2), np.float64),
                np.zeros(self.nruns, bool),
            )
        M, S, done = self._maps[key]
        if not done[runs].all():
            new, ev, _ = pending(done, runs, self.ev_lo, self.ahead)
            rows = self.ev_rows[ev]
            labels = self.ev.type_codes[rows]
            label_of = {c.type: self.ev.code_of(c.type) for c in channels if c.type is not None}
            W = self.attrs.weights(ring, channels, rows, labels, label_of, param)
            sub_pos = np.full(len(self.ev.type_names) or 1, -1, np.int64)
            for t in self.types:
                code = self.ev.code_of(t)
                if code >= 0:  # (-1, a type these events lack, wrote over the last type's)
                    sub_pos[code] = self.sub.labels[t]
            n = rows.shape[0]
            maps, run_pid, _ = self.be.segment_maps(
                ring,
                self.ev_run[ev],
                np.zeros(n, np.int64),
                self.ev_time[ev],
                sub_pos[labels],
                W,
                np.zeros((0, 1, lanes), dtype),
                np.zeros((0, nch, lanes), dtype),
                np.full(n, EVENT, np.int64),
                self.sub,
                True,
                np.zeros((0, 1, lanes), dtype),  # no macro rows, no snapshots
                param,
            )
            M[run_pid] = maps
            if S.shape[0]:
                S[run_pid] = xf_scaled_rows(maps[..., 0], maps[..., 1])
            done[new] = True
        size = Dp * Dp
        if 2 * runs.size >= self.nruns:
            return M.reshape(-1, 1, lanes), S.reshape(-1, 2), runs * size
        if S.shape[0]:
            S = S[runs]
        return M[runs].reshape(-1, 1, lanes), S.reshape(-1, 2), np.arange(runs.size) * size

"""GLORIA's optimizer (paper sections 4 to 6): candidate sharing plans per pool, their costs in
this engine, and the search for the cheapest workload sharing plan (docs/architecture.md
section 10).

A *node* of a pool (gpu_hamlet/engine/transitions.py) is one transition sharing plan: a set of
`Block`s, each a Q-set that shares the pool (queries in no block run it alone). A block either
continues (`reuse`) the Q-set it had on the pool before, whose snapshots it keeps propagating, or
takes fresh snapshots here. Nodes are generated from the nodes of the pools before (section 5.1):
Reuse, Local snapshots, Merging, and not sharing; a Kleene cycle is shared whole with snapshots
of its own (section 6).

Costs are this engine's (`PlanCosts`, from the calibrated burst costs of optimizer.py): a query
alone pays `row_s` per event of the pool; a block pays `coef_s` per event once, and fresh
snapshots cost `class_s` each plus `resolve_s` per query: one per start (the snapshot is the
constant 1), one per event of the target type (GLORIA's local snapshots), one per run of a Kleene
body's events that the block's other types do not interrupt (HAMLET's bursts).

The search. A block that reuses ties a node to the node of the pool before it; nothing else ties
pools together, so the cost is a sum of node costs over a graph of such ties. On a forest (every
workload whose queries do not split and meet again) min-sum dynamic programming from the leaves
finds the optimum of the generated plans (`exact`). Where queries split and meet again, ties
close cycles: the search takes each choice of a few pools that cut them (conditioning) and runs
the forest's search under it, still the optimum; beyond `CUT_CHOICES` choices the cycles' ties
are dropped for the search and repaired after it (`exact` is False). `greedy` picks each pool's
cheapest node given the pools before, and `noprune` skips the pruning of dominated nodes.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from gpu_hamlet.engine.conjunction import run_queries
from gpu_hamlet.engine.optimizer import CPU_COSTS, EngineCostModel
from gpu_hamlet.engine.transitions import Pool, TransitionTemplate
from gpu_hamlet.names import quoted, quoted_list, shown
from gpu_hamlet.query.schema import decoded
from gpu_hamlet.query.workload import Workload

SEARCHES = ("gloria", "greedy", "noprune")


#: The most combinations of its parts' options (the queries arriving from one pool) that
#: `generate` takes for a pool whole: a pool that five pools reach, with five options each,
#: made 3,126 candidates and a cold search of 400 ms (bench_gloria.py's bursty SEQ at 100
#: distinct queries). Beyond, `_Pools._alike_combos`.
PART_COMBOS = 256


@dataclass(frozen=True)
class Block:
    """A Q-set sharing a pool: `reuse` names the pool whose Q-set (and snapshots) it continues;
    None means fresh snapshots here."""

    queries: frozenset[str]
    reuse: str | None = None


Node = frozenset[Block]


def _width(node: Node) -> int:
    """The queries a node's blocks hold."""
    return sum(len(b.queries) for b in node)


def _in_order(node: Node) -> list[tuple[tuple[str, ...], str]]:
    """A node's blocks in one order whatever the process's string hashes (a set's order is
    not), for choices that must not depend on it."""
    return sorted((tuple(sorted(b.queries)), b.reuse or "") for b in node)


@dataclass(frozen=True)
class PlanCosts:
    """Seconds per event or snapshot (module docstring)."""

    row_s: float
    coef_s: float
    class_s: float
    resolve_s: float

    @classmethod
    def of(cls, m: EngineCostModel) -> PlanCosts:
        row = m.per_event(1, 1)
        return cls(row, m.coef_s, m.class_s, m.macro * row)


#: From the CPU burst costs (optimizer.py `CPU_COSTS`, `python benchmarks/calibrate_costs.py`).
CPU_PLAN_COSTS = PlanCosts.of(CPU_COSTS)


class StreamStats:
    """Events per type, and runs of a Kleene body's events, from one pass over (a prefix of) the
    events in time order. Partitions are not told apart: the counts only weigh plans against each
    other. Without events (`uniform`), every type has `n` events and runs follow from the counts
    as in a random interleaving."""

    def __init__(
        self, counts: dict[str, float], codes: np.ndarray | None, names: list[str], source: str
    ):
        self.counts = counts
        self.source = source
        self._codes = codes
        self._index = {n: i for i, n in enumerate(names)}
        self._runs: dict[tuple[frozenset[str], frozenset[str]], float] = {}

    @classmethod
    def of(cls, types: Iterable[str]) -> StreamStats:
        names = [str(t) for t in types]
        uniq, codes = np.unique(np.asarray(names, dtype=object), return_inverse=True)
        return cls.of_codes(codes, list(map(str, uniq)))

    @classmethod
    def of_codes(cls, codes: np.ndarray, names: list[str]) -> StreamStats:
        """From the events' type codes, in time order (indices into `names`)."""
        counts = np.bincount(codes, minlength=len(names)).astype(float)
        return cls(dict(zip(names, counts, strict=True)), codes, names, f"{codes.size:,} events")

    @classmethod
    def uniform(cls, types: Iterable[str], n: float = 1000.0) -> StreamStats:
        return cls(dict.fromkeys(types, n), None, [], "uniform, no events given")

    def n(self, types: Iterable[str]) -> float:
        return float(sum(self.counts.get(t, 0.0) for t in types))

    def runs(self, body: frozenset[str], seen: frozenset[str]) -> float:
        """Runs of `body` events among the events of the `seen` types."""
        key = (body, seen)
        if key not in self._runs:
            self.prefetch([key])
        return self._runs[key]

    def prefetch(self, pairs: Iterable[tuple[frozenset[str], frozenset[str]]]) -> None:
        """Count the runs of several (body, seen) pairs at once, for `runs` to read: one pass
        over the events for all of them (the gate of stage_sharing.py asks for dozens)."""
        todo = [key for key in dict.fromkeys(pairs) if key not in self._runs]
        if not todo:
            return
        if self._codes is None:
            for body, seen in todo:
                nb = self.n(body)
                other = self.n(seen - body)
                self._runs[(body, seen)] = min(nb, 1.0 + nb * other / max(nb + other, 1.0))
            return
        names = sorted({t for body, seen in todo for t in seen | body})
        col = {t: j for j, t in enumerate(names)}
        marks = np.zeros((len(todo), len(names)), np.int8)
        for j, (body, seen) in enumerate(todo):
            marks[j, [col[t] for t in seen]] = 1
            marks[j, [col[t] for t in body]] = 2
        self.prefetch_marked(todo, names, marks)

    def prefetch_marked(
        self,
        pairs: list[tuple[frozenset[str], frozenset[str]]],
        names: list[str],
        marks: np.ndarray,
    ) -> None:
        """`prefetch` of pairs given as marks [pair, one of `names`]: 0 (not seen), 1 (seen),
        2 (in the body); `stage_plan` has them as arrays (`stage_sharing.Stages`)."""
        todo = list({key: j for j, key in enumerate(pairs) if key not in self._runs}.values())
        if not todo:
            return
        if self._codes is None:  # (counted from the counts: no pass)
            self.prefetch(pairs[j] for j in todo)
            return
        at = np.array([self._index.get(t, -1) for t in names], np.int64)
        lut = np.zeros((len(self._index) + 1, len(todo)), np.int8)  # type -> the pair's mark
        lut[at[at >= 0]] = marks[todo][:, at >= 0].T
        for j, runs in zip(todo, _count_runs(self._codes, lut), strict=True):
            self._runs[pairs[j]] = float(runs)


@njit(cache=True, nogil=True)
def _count_runs(codes, lut):
    """Per column of `lut`, the runs of events whose type it marks 2 among those it marks 1 or
    2, in one pass (branch-free: 2.7x the speed of branching)."""
    m = lut.shape[1]
    runs = np.zeros(m, np.int64)
    inside = np.zeros(m, np.int8)  # the column's last marked event was in its body
    for c in codes:
        for j in range(m):
            v = lut[c, j]
            body = v >> 1
            runs[j] += body & (inside[j] ^ 1)
            inside[j] = body | (inside[j] & (v == 0))
    return runs


@dataclass
class SharingPlan:
    """The chosen node per pool, its estimated cost and the cost of sharing nothing."""

    search: str
    template: TransitionTemplate
    nodes: dict[str, Node]
    cost: float
    nonshared: float
    exact: bool
    candidates: int
    source: str
    #: why a gloria or noprune plan is not proven the cheapest ('' where it is)
    unproven: str = ""

    def describe(self) -> str:
        t = self.template
        lines = [
            f"GLORIA plan ({self.search} search over {self.candidates} candidate plans, "
            f"statistics: {self.source}"
            + ("" if self.exact or self.search == "greedy" else f"; {self.unproven}")
            + f"): estimated {self.cost * 1e3:.3g} ms against {self.nonshared * 1e3:.3g} ms "
            "unshared"
        ]
        for pool in t.pools:
            node = self.nodes[pool.key]
            parts = []
            for b in sorted(node, key=lambda b: sorted(b.queries)):
                how = (
                    f"continuing from {b.reuse}"
                    if b.reuse
                    else f"snapshots of {_snapshot_type(pool)}"
                )
                parts.append(f"{quoted_list(sorted(b.queries))} share ({how})")
            alone = sorted(set(pool.queries) - _shared(node))
            if alone:
                parts.append(f"{quoted_list(alone)} alone")
            lines.append(f"    {pool.key:<24} {'; '.join(parts)}")
        for name, why in t.alone.items():
            lines.append(f"    {shown(name)} runs alone: {why}")
        return "\n".join(lines)


def _snapshot_type(pool: Pool) -> str:
    if pool.kind == "start":
        return f"{quoted(pool.types[0])} (constant)"
    return "its runs" if pool.kind == "kleene" else quoted(pool.types[0])


def _shared(node: Node) -> frozenset[str]:
    return frozenset().union(*(b.queries for b in node)) if node else frozenset()


class SearchSpace:
    """What the search derives from the template alone: the Q-sets that may share each pool, the
    offers between pools and the candidate nodes. Only the costs depend on the statistics, so a
    workload keeps one space across calls (stage_sharing.py `shareable_stages`) and a warm call
    re-costs its candidates without generating them again."""

    #: Candidate lists kept, one per choice of the Kleene pools' candidates that depend on the
    #: statistics (the blocks that pay: `_Pools.kleene_nodes`).
    KEPT = 8

    def __init__(self, template: TransitionTemplate):
        self.template = template
        self.groups: dict[tuple[str, frozenset[str]], tuple[frozenset[str], ...]] = {}
        self.arrivals: dict[tuple[str, str | None], frozenset[str]] = {}
        self.offered: dict[tuple[str, str, Node], frozenset[frozenset[str]]] = {}
        self.reused: dict[tuple[Node, str], frozenset[frozenset[str]]] = {}
        # per choice of the Kleene pools' paying blocks: the candidates, and what the search derives
        # from them alone (`_Pools.signatures`, `_Pools.forest`)
        self.candidates: dict[tuple[Node, ...], tuple[dict[str, list[Node]], dict]] = {}
        self.lock = threading.Lock()  # calls in several threads may share a workload's space


class _Pools:
    """The template with its statistics and costs: node generation and node costs."""

    def __init__(
        self,
        template: TransitionTemplate,
        stats: StreamStats,
        costs: PlanCosts,
        space: SearchSpace | None = None,
    ):
        if space is None or space.template is not template:
            space = SearchSpace(template)
        self.t = template
        self.stats = stats
        self.costs = costs
        self.space = space
        self.by_key = {p.key: p for p in template.pools}
        self.order = {p.key: i for i, p in enumerate(template.pools)}
        self._cost: dict[tuple[str, Node], float] = {}
        self._cost_of_block: dict[tuple[str, Block], float] = {}
        self._groups = space.groups
        self._arrivals = space.arrivals
        self._offered = space.offered
        self._reused = space.reused
        self._derived: dict = {}
        self._cut_combos = False  # (set by `generate`, kept with the candidates)

    def cost(self, pool: Pool, node: Node) -> float:
        key = (pool.key, node)
        if key not in self._cost:
            self._cost[key] = self._node_cost(pool, node)
        return self._cost[key]

    def node_costs(self, pool: Pool, nodes: list[Node]) -> list[float]:
        """`cost` of each of a pool's candidates (`nodes`, from `candidates`), at once: a warm
        call keeps its workload's candidates and re-costs them with its own statistics, so the
        blocks the candidates are made of (the same ones in many) and which candidate holds
        which are found once per search space, and each call costs every block once. By block
        lookups one at a time, 100 distinct queries of bench_gloria.py's bursty SEQ workload
        took about 30 ms a call; the sums are the same, in the same order."""
        key = ("blocks", pool.key)
        if key not in self._derived:
            ids: dict[Block, int] = {}
            of_node = [
                (i, ids.setdefault(b, len(ids))) for i, node in enumerate(nodes) for b in node
            ]
            which, block = np.asarray(of_node, np.int64).reshape(-1, 2).T
            self._derived[key] = (list(ids), which, block)
        blocks, which, block = self._derived[key]
        each = np.asarray([self._block_cost(pool, b) for b in blocks], np.float64)
        added = np.bincount(which, weights=each[block], minlength=len(nodes))
        alone = self.alone(pool, len(pool.queries))
        out = [alone + float(a) for a in added]
        self._cost.update(((pool.key, n), c) for n, c in zip(nodes, out, strict=True))
        return out

    def alone(self, pool: Pool, count: int) -> float:
        """The cost of `count` queries running the pool alone."""
        return count * self.stats.n(pool.types) * self.costs.row_s

    def _node_cost(self, pool: Pool, node: Node) -> float:
        # (A node's blocks are disjoint Q-sets: each takes its queries off those alone.)
        return self.alone(pool, len(pool.queries)) + sum(self._block_cost(pool, b) for b in node)

    def _block_cost(self, pool: Pool, b: Block) -> float:
        """What block `b` adds to the pool's cost, less what its queries cost alone."""
        key = (pool.key, b)
        if key not in self._cost_of_block:
            c = self.costs
            total = self.stats.n(pool.types) * c.coef_s - self.alone(pool, len(b.queries))
            if b.reuse is None:
                total += self.snapshots(pool, b) * (c.class_s + len(b.queries) * c.resolve_s)
            self._cost_of_block[key] = total
        return self._cost_of_block[key]

    def snapshots(self, pool: Pool, b: Block) -> float:
        if pool.kind == "start":
            return 1.0
        if pool.kind == "tran":
            return self.stats.n(pool.types)
        return self.stats.runs(frozenset(pool.types), self.t.types_of(b.queries))

    def groups(self, pool: Pool, names: frozenset[str]) -> tuple[frozenset[str], ...]:
        """`names` by what they must agree on to share the pool; groups of two or more."""
        key = (pool.key, names)
        if key not in self._groups:
            groups = self.t.class_groups((pool,), names)
            self._groups[key] = tuple(frozenset(g) for g in groups)
        return self._groups[key]

    def arrivals(self, pool: Pool, src: str | None) -> frozenset[str]:
        """The queries that take `pool` right after pool `src`."""
        if (pool.key, src) not in self._arrivals:
            here = frozenset(q for q in pool.queries if pool.prev[q] == src)
            self._arrivals[(pool.key, src)] = here
        return self._arrivals[(pool.key, src)]

    def offered(self, pool: Pool, src: str, before: Node) -> frozenset[frozenset[str]]:
        """The Q-sets that node `before` of pool `src` lets `pool` continue."""
        key = (pool.key, src, before)
        if key not in self._offered:
            here = self.arrivals(pool, src)
            self._offered[key] = frozenset(
                g for b in before for g in self.groups(pool, b.queries & here)
            )
        return self._offered[key]

    def merged(self, pool: Pool) -> Node:
        """GLORIA's Merging: every group of the pool's queries that may share it, one block."""
        return frozenset(Block(g) for g in self.groups(pool, frozenset(pool.queries)))

    def paying(self, pool: Pool, node: Node) -> Node:
        """The blocks of a Kleene pool's `node` that cost less shared than alone."""
        return frozenset(b for b in node if self._block_cost(pool, b) < 0)

    def entering(self, pool: Pool) -> Node:
        """The blocks of the queries that reach `pool` from no pool before it in the template's
        order (a start, or a pool after it in another query), one group per pool they come
        from: what Greedy can share (`_greedy`), and fresh snapshots for any search."""
        at = self.order[pool.key]
        return frozenset(
            Block(g)
            for src in set(pool.prev.values())
            if src is None or self.order.get(src, at) >= at
            for g in self.groups(pool, self.arrivals(pool, src))
        )

    def kleene_nodes(self, pool: Pool) -> set[Node]:
        """A Kleene pool's candidates (section 6's path generation principle: the cycle is
        shared whole with fresh snapshots, or not at all): the merged classes, the queries that
        enter the cycle from no pool before it (fewer types may interrupt their runs, so they
        may pay where the whole class does not), and of each the blocks that pay."""
        merged, entering = self.merged(pool), self.entering(pool)
        return {
            frozenset(),
            merged,
            self.paying(pool, merged),
            entering,
            self.paying(pool, entering),
        }

    def candidates(self) -> dict[str, list[Node]]:
        """Every pool's candidate nodes (`generate`, in topological order). Only the Kleene
        pools' depend on the statistics (which of their classes pay), so the search space keeps
        them per choice of those."""
        kleene = [p for p in self.t.pools if p.kind == "kleene"]
        self.stats.prefetch(
            (frozenset(p.types), self.t.types_of(b.queries))
            for p in kleene
            for b in self.merged(p) | self.entering(p)
        )
        key = tuple(  # (what of the Kleene pools' candidates depends on the statistics)
            self.paying(p, node) for p in kleene for node in (self.merged(p), self.entering(p))
        )
        kept = self.space.candidates
        with self.space.lock:
            if key not in kept:
                cands: dict[str, list[Node]] = {}
                self._cut_combos = False
                for pool in self.t.pools:
                    cands[pool.key] = self.generate(pool, cands)
                if len(kept) >= SearchSpace.KEPT:
                    del kept[next(iter(kept))]
                kept[key] = (cands, {"cut combos": self._cut_combos})
            cands, self._derived = kept[key]
        return cands

    def combos_cut(self) -> bool:
        """Whether `candidates` took some pool's alike combinations only (`_alike_combos`): the
        cheapest of the candidates may then cost more than a plan they left out."""
        return bool(self._derived.get("cut combos"))

    def signatures(self, key: str, other: str, nodes: list[Node]) -> tuple[list[int], list[int]]:
        """Per candidate of pool `key` (`nodes`, from `candidates`), the index of what the
        neighbouring pool `other` sees of it: the Q-sets it needs from `other` and offers it.
        The search treats candidates that look alike there alike. Also one candidate per index."""
        if (key, other) not in self._derived:
            ids: dict[tuple, int] = {}
            of: list[int] = []
            reps: list[int] = []
            to = self.by_key[other]
            for i, n in enumerate(nodes):
                sig = (self.needs(n, other), self.offered(to, key, n))
                if sig not in ids:
                    ids[sig] = len(reps)
                    reps.append(i)
                of.append(ids[sig])
            self._derived[(key, other)] = (of, reps)
        return self._derived[(key, other)]

    def forest(
        self, cands: dict[str, list[Node]]
    ) -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
        """The ties between pools that the candidates' reuse blocks make, as a forest (neighbours
        per pool), and the ties left out of it because they close a cycle (queries that split
        and meet again: `_min_sum` conditions on them)."""
        if "forest" in self._derived:
            return self._derived["forest"]
        ties = {(b.reuse, p.key) for p in self.t.pools for n in cands[p.key] for b in n if b.reuse}
        parent = {p.key: p.key for p in self.t.pools}

        def root(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        tree: dict[str, set[str]] = {p.key: set() for p in self.t.pools}
        dropped: list[tuple[str, str]] = []
        for a, b in sorted(ties):
            ra, rb = root(a), root(b)
            if ra == rb:
                dropped.append((a, b))
                continue
            parent[ra] = rb
            tree[a].add(b)
            tree[b].add(a)
        self._derived["forest"] = (tree, dropped)
        return tree, dropped

    def generate(self, pool: Pool, before: dict[str, list[Node]]) -> list[Node]:
        """Section 5.1's principles, per group of queries arriving from one pool (a part), then
        every combination of the parts; Merging over all of the pool's queries; not sharing.
        A Kleene cycle is shared whole with fresh snapshots (section 6), or not.
        Queries arriving from a pool not generated yet (queries ordering pools in a cycle) share
        only with fresh snapshots."""
        if pool.kind == "kleene":
            return list(self.kleene_nodes(pool))
        merged = self.merged(pool)
        arrivals: dict[str | None, list[str]] = {}
        for q in pool.queries:
            arrivals.setdefault(pool.prev[q], []).append(q)
        part_options: list[set[Node]] = []
        for src, names in arrivals.items():
            opts: set[Node] = {frozenset()}
            if src not in before:  # a start, or a pool after this one in another query
                opts.add(frozenset(Block(g) for g in self.groups(pool, frozenset(names))))
            else:
                for node in before[src]:
                    qsets = self.offered(pool, src, node)
                    if not qsets:
                        continue
                    opts.add(frozenset(Block(g) for g in qsets))  # local snapshots
                    opts.add(frozenset(Block(g, src) for g in qsets))  # reuse
            part_options.append(opts)
        if math.prod(map(len, part_options)) <= PART_COMBOS:
            combos: Iterable[tuple[Node, ...]] = itertools.product(*part_options)
        else:
            combos = self._alike_combos(part_options)
            self._cut_combos = True
        nodes = {frozenset().union(*combo) for combo in combos}
        nodes.add(merged)  # merging
        return list(nodes)

    def _alike_combos(self, parts: list[set[Node]]) -> list[tuple[Node, ...]]:
        """Where the combinations of a pool's parts' options are more than PART_COMBOS: each
        part's options with the other parts not sharing; every part taking its option of one
        shape (local snapshots or reuse of a pool of one kind, in Q-sets of the same sizes);
        and every part taking its finest, or its coarsest, option of one kind. Parts reached
        from pools alike (a start type each) take alike options in the cheapest plans: each
        continues its own chain."""
        empty: Node = frozenset()
        alone = tuple(empty for _ in parts)
        out = [alone]
        ranks = {
            "finest": lambda n: (len(n), _width(n)),
            "coarsest": lambda n: (-len(n), _width(n)),
        }
        chosen: list[dict[tuple, Node]] = []
        for i, opts in enumerate(parts):
            out += [alone[:i] + (o,) + alone[i + 1 :] for o in opts]
            by: dict[tuple, Node] = {}
            for o in sorted(opts, key=_in_order):
                by[("shape", self._shape(o))] = o
                kind = self._kind(o)
                for end, rank in ranks.items():
                    held = by.get((end, kind))
                    if held is None or rank(o) > rank(held):
                        by[(end, kind)] = o
            chosen.append(by)
        for key in {k for by in chosen for k in by}:
            out.append(tuple(by.get(key, empty) for by in chosen))
        return out

    def _kind(self, node: Node) -> tuple[str, ...]:
        """Local snapshots ("") or reuse, of which kinds of pool."""
        return tuple(sorted({"" if b.reuse is None else self.by_key[b.reuse].kind for b in node}))

    def _shape(self, node: Node) -> tuple[tuple[int, str], ...]:
        """The sizes of a node's Q-sets, each with its `_kind`."""
        return tuple(
            sorted(
                (len(b.queries), "" if b.reuse is None else self.by_key[b.reuse].kind) for b in node
            )
        )

    def needs(self, node: Node, src: str) -> frozenset[frozenset[str]]:
        """The Q-sets that `node`'s blocks continue from pool `src`."""
        key = (node, src)
        if key not in self._reused:  # the search asks each node this of many candidates
            self._reused[key] = frozenset(b.queries for b in node if b.reuse == src)
        return self._reused[key]

    def fits(self, pool: Pool, node: Node, src: str, before: Node) -> bool:
        """Whether `node`'s blocks that continue from pool `src` find their Q-sets there."""
        need = self.needs(node, src)
        return not need or need <= self.offered(pool, src, before)


def find_plan(
    template: TransitionTemplate,
    stats: StreamStats,
    costs: PlanCosts = CPU_PLAN_COSTS,
    search: str = "gloria",
    space: SearchSpace | None = None,
) -> SharingPlan:
    """The workload sharing plan of `search` ('gloria', 'greedy' or 'noprune'); `space` is the
    template's search space kept from earlier calls, if any."""
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {', '.join(map(repr, SEARCHES))}, not {search!r}")
    pools = _Pools(template, stats, costs, space)
    nonshared = sum(pools.alone(p, len(p.queries)) for p in template.pools)
    if search == "greedy":
        nodes = _greedy(pools)
        total = plan_cost(pools, nodes)
        weighed = 2 * len(nodes)  # (two candidates a pool: alone, or reusing what came before)
        return SharingPlan(search, template, nodes, total, nonshared, False, weighed, stats.source)
    cands = pools.candidates()
    nodes, exact, count = _min_sum(pools, cands, prune=search == "gloria")
    unproven = "" if exact else "queries split and meet again: not proven optimal"
    if not exact:  # ties closed a cycle: improve the repaired plan, and Greedy's, pool by pool
        nodes = min(
            (_improve(pools, cands, nodes), _improve(pools, cands, _greedy(pools))),
            key=lambda n: plan_cost(pools, n),
        )
    elif pools.combos_cut():  # the cheapest candidates, which may have left Greedy's plan out
        exact = False
        unproven = f"a pool's candidates cut to alike ones (over {PART_COMBOS}): not proven optimal"
        nodes = min((nodes, _greedy(pools)), key=lambda n: plan_cost(pools, n))
    total = plan_cost(pools, nodes)
    return SharingPlan(
        search, template, nodes, total, nonshared, exact, count, stats.source, unproven
    )


def plan_workload(
    workload: Workload,
    events: pa.Table | None = None,
    type_col: str = "type",
    search: str = "gloria",
    sample: int = 100_000,
    costs: PlanCosts = CPU_PLAN_COSTS,
) -> SharingPlan:
    """GLORIA's plan for a workload, with statistics from the first `sample` events of its types
    (or uniform ones without events): what `gpu-hamlet explain` prints. It is the plan that
    `dynamic` searches (stage_sharing.py `stage_plan`): over the queries the engine runs (an AND
    as its counts, conjunction.py `run_queries`), the first `sample` of the rows the engine keeps
    (the events of the workload's types, events.py `prepare_events`) and the backend's `costs`."""
    template = TransitionTemplate.of(run_queries(workload))
    if events is None:
        stats = StreamStats.uniform({t for q in workload for t in q.types})
        return find_plan(template, stats, costs, search=search)
    used = sorted({t for q in workload for t in q.event_types})
    col = events.column(type_col)
    types: list[str] = []
    step = max(sample, 1 << 16)
    for start in range(0, len(col), step):  # slices: the sample is most often in the first
        part = decoded(col.slice(start, step))
        kept = pc.filter(part, pc.is_in(part, value_set=pa.array(used, part.type)))
        types += kept.slice(0, sample - len(types)).to_pylist()
        if len(types) >= sample:
            break
    return find_plan(template, StreamStats.of(types), costs, search=search)


def _greedy(pools: _Pools) -> dict[str, Node]:
    """Per pool in order, the cheaper of not sharing and reusing what the pools before chose
    (starts: sharing the constant snapshot), as GLORIA's Greedy baseline (section 8.1)."""
    chosen: dict[str, Node] = {}
    for pool in pools.t.pools:
        reuse = set(pools.entering(pool))  # (pools come in the template's order)
        for src in set(pool.prev.values()):
            if src in chosen and pool.kind != "kleene":
                reuse.update(Block(g, src) for g in pools.offered(pool, src, chosen[src]))
        options = [frozenset(), frozenset(reuse)]
        chosen[pool.key] = min(options, key=lambda n: pools.cost(pool, n))
    return chosen


def _min_sum(
    pools: _Pools, cands: dict[str, list[Node]], prune: bool
) -> tuple[dict[str, Node], bool, int]:
    """The cheapest choice of one candidate per pool whose reuse blocks find their Q-sets, by
    dynamic programming over the forest of ties (`_tree_min`); also whether it is proven the
    cheapest, and the candidates weighed. Ties that close a cycle are met by conditioning: every
    choice of the pools that cut them (`_cut`) fixes those pools, their other neighbours keep
    the candidates that agree, and the forest's search runs once per choice. Beyond
    CUT_CHOICES choices the cycles' ties are left out and repaired after (not proven)."""
    tree, dropped = pools.forest(cands)
    cut = _cut(dropped, cands)
    exact = math.prod(len(cands[k]) for k in cut) <= CUT_CHOICES
    if not exact:
        cut = []
    chosen: dict[str, Node] = {}
    kept = 0
    seen: set[str] = set()
    base = {p.key: pools.node_costs(p, cands[p.key]) for p in pools.t.pools}
    for pool in reversed(pools.t.pools):
        if pool.key in seen:
            continue
        order: list[tuple[str, str | None]] = []
        stack: list[tuple[str, str | None]] = [(pool.key, None)]
        while stack:
            key, up = stack.pop()
            seen.add(key)
            order.append((key, up))
            stack.extend((k, key) for k in tree[key] if k != up)
        members = {k for k, _ in order}
        here = [k for k in cut if k in members]
        found: tuple[float, dict[str, Node]] | None = None
        for choice in itertools.product(*(range(len(cands[k])) for k in here)):
            vals = _conditioned(pools, cands, dropped, dict(zip(here, choice, strict=True)), base)
            if vals is None:
                continue
            total, picked, weighed = _tree_min(pools, cands, tree, order, prune, vals)
            kept += weighed
            if found is None or total < found[0]:
                found = (total, picked)
        assert found is not None  # (sharing nothing is a candidate of every pool)
        chosen.update(found[1])
    return (chosen if exact else _repair(pools, chosen)), exact, kept


#: The most choices of the pools that cut the cycles of ties that `_min_sum` conditions on, one
#: search of the forest each. Of 3,000 random workloads of 2 to 12 queries, the 19 whose ties
#: closed cycles needed at most 15; bench_plan_search.py's workloads need at most 4.
CUT_CHOICES = 256


def _cut(dropped: list[tuple[str, str]], cands: dict[str, list[Node]]) -> list[str]:
    """Pools that meet every tie left out of the forest, few candidates first (a greedy vertex
    cover: the conditioning takes every choice of them)."""
    cut: list[str] = []
    left = list(dropped)
    while left:
        meets: dict[str, int] = {}
        for a, b in left:
            meets[a] = meets.get(a, 0) + 1
            meets[b] = meets.get(b, 0) + 1
        k = min(meets, key=lambda k: (-meets[k], len(cands[k]), k))
        cut.append(k)
        left = [(a, b) for a, b in left if k not in (a, b)]
    return cut


def _conditioned(
    pools: _Pools,
    cands: dict[str, list[Node]],
    dropped: list[tuple[str, str]],
    fixed: dict[str, int],
    base: dict[str, list[float]],
) -> dict[str, list[float]] | None:
    """The candidates' costs with the pools of `fixed` held to one candidate each: infinite for
    the others, and for their neighbours' candidates that disagree across a left-out tie; None
    when two fixed pools disagree."""
    vals = dict(base)
    for k, i in fixed.items():
        vals[k] = [v if j == i else math.inf for j, v in enumerate(base[k])]
    for a, b in dropped:
        if a not in fixed and b not in fixed:  # (a tie of another tree)
            continue
        if a in fixed and b in fixed:
            if not _agree(pools, a, cands[a][fixed[a]], b, cands[b][fixed[b]]):
                return None
            continue
        c, o = (a, b) if a in fixed else (b, a)
        node = cands[c][fixed[c]]
        of, reps = pools.signatures(o, c, cands[o])
        agree = [_agree(pools, o, cands[o][r], c, node) for r in reps]
        vals[o] = [v if agree[s] else math.inf for v, s in zip(vals[o], of, strict=True)]
    return vals


def _tree_min(
    pools: _Pools,
    cands: dict[str, list[Node]],
    tree: dict[str, set[str]],
    order: list[tuple[str, str | None]],
    prune: bool,
    costs: dict[str, list[float]],
) -> tuple[float, dict[str, Node], int]:
    """Min-sum dynamic programming over one tree of ties (`order`: its pools from the root, each
    with its parent), from the leaves: the least total of `costs` over the choices whose reuse
    blocks find their Q-sets, the choice, and the candidates kept. With `prune`, GLORIA's node
    pruning (section 5.2): of the candidates that look alike from the pool the search goes on to
    (the same Q-sets offered to it, the same ones needed from it), only the one with the least
    distance so far is kept."""
    best: dict[str, list[float]] = {}
    live: dict[str, list[Node]] = {}
    pick: dict[tuple[str, str], list[int]] = {}
    kept = 0
    for key, up in reversed(order):  # children first
        nodes = cands[key]
        vals = costs[key]
        picks = {}
        for child in tree[key] - {up}:
            by_cost = sorted(range(len(best[child])), key=best[child].__getitem__)
            # A node's best child depends only on what the child sees of it.
            of, reps = pools.signatures(key, child, nodes)
            found = [
                _best_child(pools, key, nodes[r], child, live[child], best[child], by_cost)
                for r in reps
            ]
            arg = [found[i] for i in of]
            picks[child] = arg
            vals = [
                v + (best[child][i] if i >= 0 else math.inf) for v, i in zip(vals, arg, strict=True)
            ]
        keep = list(range(len(nodes)))
        if prune and up is not None:
            least: dict[int, int] = {}
            for i, sig in enumerate(pools.signatures(key, up, nodes)[0]):
                if sig not in least or vals[i] < vals[least[sig]]:
                    least[sig] = i
            keep = sorted(least.values())
        live[key] = [nodes[i] for i in keep]
        best[key] = [vals[i] for i in keep]
        for child, arg in picks.items():
            pick[(key, child)] = [arg[i] for i in keep]
        kept += len(live[key])
    root = order[0][0]
    top = int(np.argmin(best[root]))
    chosen: dict[str, Node] = {}
    todo = [(root, top)]
    while todo:
        key, i = todo.pop()
        chosen[key] = live[key][i]
        todo.extend((child, pick[(key, child)][i]) for child in tree[key] if (key, child) in pick)
    return best[root][top], chosen, kept


def _best_child(
    pools: _Pools,
    key: str,
    node: Node,
    child: str,
    options: list[Node],
    costs: list[float],
    by_cost: list[int],
) -> int:
    """The cheapest candidate of a neighbouring pool consistent with `node` (-1: none), the
    first of equal cost; `by_cost` orders the candidates by cost (stably), so the search stops
    at the first that agrees."""
    for i in by_cost:
        if costs[i] == math.inf:
            break
        if _agree(pools, key, node, child, options[i]):
            return i
    return -1


def _agree(pools: _Pools, a: str, na: Node, b: str, nb: Node) -> bool:
    pa, pb = pools.by_key[a], pools.by_key[b]
    return pools.fits(pa, na, b, nb) and pools.fits(pb, nb, a, na)


def _improve(
    pools: _Pools, cands: dict[str, list[Node]], nodes: dict[str, Node]
) -> dict[str, Node]:
    """Each pool in turn takes its cheapest candidate that agrees with its neighbours' choices,
    until nothing changes (a local optimum, for graphs of ties with cycles)."""
    nodes = dict(nodes)
    near: dict[str, set[str]] = {p.key: set() for p in pools.t.pools}
    for p in pools.t.pools:
        for src in set(p.prev.values()) - {None}:
            if src in near:
                near[p.key].add(src)
                near[src].add(p.key)
    changed = True
    while changed:
        changed = False
        for p in pools.t.pools:
            options = cands[p.key]
            ok = [True] * len(options)
            for o in near[p.key]:  # candidates that look alike from o agree with it alike
                of, reps = pools.signatures(p.key, o, options)
                agree = [_agree(pools, p.key, options[r], o, nodes[o]) for r in reps]
                ok = [a and agree[s] for a, s in zip(ok, of, strict=True)]
            fit = [n for n, a in zip(options, ok, strict=True) if a]
            if not fit:
                continue
            n = min(fit, key=lambda n: pools.cost(p, n))
            if pools.cost(p, n) < pools.cost(p, nodes[p.key]):
                nodes[p.key] = n
                changed = True
    return nodes


def _repair(pools: _Pools, chosen: dict[str, Node]) -> dict[str, Node]:
    """Blocks whose Q-set the pool before does not have (only where ties closed a cycle) take
    fresh snapshots instead."""
    out: dict[str, Node] = {}
    for pool in pools.t.pools:
        node = chosen[pool.key]
        fixed = frozenset(
            b
            if b.reuse is None
            or pools.fits(pool, frozenset({b}), b.reuse, out.get(b.reuse, chosen[b.reuse]))
            else Block(b.queries)
            for b in node
        )
        out[pool.key] = fixed
    return out


def plan_cost(pools: _Pools, nodes: dict[str, Node]) -> float:
    """The cost of a choice of one node per pool; infinite when a reuse block finds no Q-set."""
    total = 0.0
    for pool in pools.t.pools:
        node = nodes[pool.key]
        for src in {b.reuse for b in node if b.reuse}:
            if not pools.fits(pool, node, src, nodes[src]):
                return math.inf
        total += pools.cost(pool, node)
    return total

"""GLORIA's template (paper section 2.2): the workload's transitions and the queries on each.

A query takes part when its pattern is built of SEQ and Kleene plus over distinct types, with no
NOT, OR, AND or NEXT condition (GLORIA's assumptions, section 6); the others run alone. Its
pattern is cut into *stages*: a type, or a Kleene sub-pattern (`B+`, `SEQ(P, T)+`, nested ones
whole). Every stage is reached by a transition, and transitions of several queries that do the
same work form one *pool* of candidate sharing plans (docs/architecture.md section 10):

- `start(A)`: A's events start trends (the stage comes first);
- `tran(A, B)`: B's events read A's sums;
- `K` for a Kleene sub-pattern K: its body's events, entry included. By the path generation
  principle (Lemma 6.1) one plan holds for every transition of the cycle, so the cycle is one
  pool, of the queries that contain K (section 6's assumption 1).

Queries in one pool may share it only when they see the same events there: the same partition
attributes and the same filters on the pool's types (`class_of`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gpu_hamlet.names import quoted
from gpu_hamlet.query.pattern import Pattern, PatternElement, Seq, positive_types
from gpu_hamlet.query.workload import Query, Workload


@dataclass(frozen=True)
class Stage:
    """One stage of a query's pattern: a type (`types == (type,)`, not `kleene`) or a Kleene
    sub-pattern, named as the language writes it (names quoted: pools are keyed by name)."""

    name: str
    types: tuple[str, ...]
    kleene: bool


def stages(pattern: Pattern) -> tuple[Stage, ...] | None:
    """The stages of a pattern of SEQ and Kleene plus over distinct types; None otherwise."""
    out: list[Stage] = []

    def visit(node: object) -> bool:
        if isinstance(node, PatternElement) and not node.kleene:
            out.append(Stage(quoted(node.type), (node.type,), False))
            return True
        if isinstance(node, PatternElement | Seq) and node.kleene:
            if not _seq_only(node):
                return False
            out.append(Stage(str(node), positive_types(node), True))
            return True
        if isinstance(node, Seq):
            return all(visit(p) for p in node.parts)
        return False

    if not visit(pattern):
        return None
    types = [t for s in out for t in s.types]
    return tuple(out) if len(types) == len(set(types)) else None


def _seq_only(node: object) -> bool:
    if isinstance(node, PatternElement):
        return True
    return isinstance(node, Seq) and all(_seq_only(p) for p in node.parts)


@dataclass(frozen=True)
class Pool:
    """The candidate plans of one transition (or Kleene cycle): `queries` take it, `prev[q]` is
    the pool q takes just before (None at a start), `types` the types whose events it processes."""

    key: str
    types: tuple[str, ...]
    kind: str  # "start", "tran" or "kleene"
    queries: tuple[str, ...]
    prev: dict[str, str | None] = field(compare=False)


@dataclass(frozen=True)
class TransitionTemplate:
    """The pools of a workload in topological order, and the queries that run alone (with why)."""

    pools: tuple[Pool, ...]
    queries: dict[str, Query]
    alone: dict[str, str]
    _types: dict[frozenset[str], frozenset[str]] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, workload: Workload) -> TransitionTemplate:
        found: dict[str, dict] = {}
        alone: dict[str, str] = {}
        queries: dict[str, Query] = {}
        for q in workload:
            st = stages(q.pattern)
            if q.next_conditions:
                alone[q.name] = "NEXT conditions"
                continue
            if st is None:
                alone[q.name] = "not a SEQ of distinct types under Kleene plus"
                continue
            queries[q.name] = q
            before: str | None = None
            for i, s in enumerate(st):
                if s.kleene:
                    key, kind = s.name, "kleene"
                elif i == 0:
                    key, kind = f"start({s.name})", "start"
                else:
                    key, kind = f"tran({st[i - 1].name}, {s.name})", "tran"
                pool = found.setdefault(key, {"types": s.types, "kind": kind, "prev": {}})
                pool["prev"][q.name] = before
                before = key
        pools = {
            k: Pool(k, v["types"], v["kind"], tuple(v["prev"]), dict(v["prev"]))
            for k, v in found.items()
        }
        return cls(_topological(pools), queries, alone)

    def class_of(self, pool: Pool, name: str) -> tuple:
        """What queries must agree on to share `pool`: partitions and filters on its types."""
        q = self.queries[name]
        filters = frozenset(str(f) for t in pool.types for f in q.filters_of(t))
        return (q.partition_attrs, filters)

    def class_groups(self, pools: Sequence[Pool], names: Iterable[str]) -> list[tuple[str, ...]]:
        """`names` grouped by their classes on every one of `pools` (`class_of`), in their
        order: the groups of two or more, which may share those pools."""
        by: dict[tuple, list[str]] = {}
        for n in names:
            by.setdefault(tuple(self.class_of(p, n) for p in pools), []).append(n)
        return [tuple(g) for g in by.values() if len(g) >= 2]

    def types_of(self, names: frozenset[str]) -> frozenset[str]:
        """The types the queries `names` read (what interrupts their shared runs)."""
        if names not in self._types:
            self._types[names] = frozenset(t for n in names for t in self.queries[n].types)
        return self._types[names]


def _topological(pools: dict[str, Pool]) -> tuple[Pool, ...]:
    """Pools ordered so that every query's pools come in its pattern's order. Pools of queries
    that order them differently (`SEQ(A, B, C)` and `SEQ(C, A, B)` need no order, but a cycle of
    pools through several queries may) keep the first order found: the search needs none."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(key: str, path: frozenset[str]) -> None:
        if key in seen or key in path:
            return
        for before in set(pools[key].prev.values()):
            if before is not None:
                visit(before, path | {key})
        seen.add(key)
        order.append(key)

    for key in pools:
        visit(key, frozenset())
    return tuple(pools[k] for k in order)

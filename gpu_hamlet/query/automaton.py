"""A pattern compiled to the deterministic automaton the recursions run (docs/architecture.md
section 3): states with an entering type and predecessor lists, start and end flags, and for each
negated type the moves its events make.

Why deterministic: a state holds the number of partial trends that reach it, and a trend must be
counted once however many ways it matches (`SEQ(A+, A+)`), so every partial trend must be in
exactly one state. The construction:

1. Positions (Glushkov): every type leaf of the pattern is a position; `first` and `last` are
   the positions a match may start and end at, `follow[p][q]` says q may come right after p, with
   the set of types negated between them (the NOTs of the SEQ that q's part follows p's part in).
2. Subsets: a state is (S, G): S the set of positions the partial trend may stand at, G the
   negated types seen since its last event (only those some edge out of S forbids). An event of
   type E takes (S, G) to (S', {}) with S' the E positions following some p in S by an edge
   whose negated types miss G; an event of a negated type N takes (S, G) to (S, G + {N}) (a
   *move*, applied after the reads of its timestamp). A state no event can leave any more is
   dropped: a move into it is a clear.

A pattern without NOT, OR, nested Kleene or repeated types gives one state per position, numbered
as the positions (`SEQ(A, B+, C)`: states A, B, C, B reading A and itself), the automaton the
engine ran before these forms existed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from gpu_hamlet.errors import WorkloadError
from gpu_hamlet.names import quoted
from gpu_hamlet.query.pattern import Alt, And, Both, Not, Pattern, PatternElement, Positive

#: The most states a pattern's automaton may have. Sets of positions can multiply: after
#: `(A OR B)+, A` each further `(A OR B)` doubles them (`SEQ((A OR B)+, A, (A OR B), ...)` with
#: 16 of them: 131,073 states, 18 s to build, and more for each). A query's work per event and
#: its windows' maps grow with its states: 2,049 states over 2,000 events with sliding windows
#: took 2.3 s and 922 MB (a `/tmp` script, 2026-11-29).
MAX_STATES = 4096

#: follow[p][q]: the types negated between p and q.
Follow = dict[int, dict[int, frozenset[str]]]


@dataclass(frozen=True)
class Positions:
    """The pattern's positions (type leaves, left to right) and how they follow each other."""

    types: tuple[str, ...]
    first: frozenset[int]
    last: frozenset[int]
    follow: Follow

    @classmethod
    def of(cls, pattern: Positive) -> Positions:
        types: list[str] = []
        follow: Follow = {}

        def link(ps: frozenset[int], qs: frozenset[int], blocked: frozenset[str]) -> None:
            for p in ps:
                for q in qs:
                    # One route per pair: q is first in the part right after p's (a SEQ), or
                    # p and q are last and first of one Kleene body (no negation between).
                    assert follow[p].get(q, blocked) == blocked, "one negation set per pair"
                    follow[p][q] = blocked

        def visit(node: Positive) -> tuple[frozenset[int], frozenset[int]]:
            if isinstance(node, PatternElement):
                p = len(types)
                types.append(node.type)
                follow[p] = {}
                first = last = frozenset((p,))
            elif isinstance(node, Alt):
                ends = [visit(o) for o in node.options]
                first = frozenset().union(*(f for f, _ in ends))
                last = frozenset().union(*(la for _, la in ends))
            else:
                first = last = frozenset()
                blocked: set[str] = set()
                for part in node.parts:
                    if isinstance(part, Not):
                        blocked.add(part.type)
                        continue
                    f, la = visit(part)
                    if not first:
                        first = f
                    else:
                        link(last, f, frozenset(blocked))
                    last, blocked = la, set()
            if node.kleene:
                link(last, first, frozenset())
            return first, last

        first, last = visit(pattern)
        return cls(tuple(types), first, last, follow)


@dataclass(frozen=True)
class State:
    """Per pattern run together (one; two for the trends an AND's sides share): the positions a
    partial trend may stand at, and the negated types seen since its last event. `type` is the
    type of the events entering it (None for a state only moves reach)."""

    at: tuple[frozenset[int], ...]
    seen: tuple[frozenset[str], ...]
    type: str | None


Key = tuple[tuple[frozenset[int], ...], tuple[frozenset[str], ...]]


@dataclass(frozen=True)
class Automaton:
    """States, numbered; `preds[s]` the states an event entering s extends; `moves[N]` the
    (from, to) pairs of an N event, to = -1 where the partial trends end there."""

    states: tuple[State, ...]
    preds: tuple[tuple[int, ...], ...]
    start: tuple[bool, ...]
    end: tuple[bool, ...]
    moves: dict[str, tuple[tuple[int, int], ...]]
    positions: tuple[Positions, ...]

    def entering(self, type_: str) -> tuple[int, ...]:
        """The states an event of `type_` enters (one row each, at its timestamp)."""
        return tuple(s for s, st in enumerate(self.states) if st.type == type_)

    @classmethod
    def of(cls, *patterns: Positive, query: str | None = None) -> Automaton:
        """The automaton of the trends matching every one of `patterns` (one pattern, or an
        AND's two sides for the trends they share): the patterns' subset automata run in
        lockstep, a state alive while each of them is. A WorkloadError naming `query` beyond
        MAX_STATES states."""
        comps = tuple(Positions.of(p) for p in patterns)

        def forbidden(c: Positions, at: frozenset[int]) -> frozenset[str]:
            """Negated types some edge out of `at` forbids: the only ones a state tracks."""
            return frozenset().union(*(b for p in at for b in c.follow[p].values()))

        def step(c: Positions, at: frozenset[int], seen: frozenset[str], t: str) -> frozenset[int]:
            return frozenset(
                q
                for p in at
                for q, blocked in c.follow[p].items()
                if c.types[q] == t and not blocked & seen
            )

        def alive(c: Positions, at: frozenset[int], seen: frozenset[str]) -> bool:
            """Whether some event can still extend a partial trend in this state (else only its
            arrival, counted in the finals, mattered)."""
            return any(not b & seen for p in at for b in c.follow[p].values())

        def firsts(t: str) -> tuple[frozenset[int], ...]:
            return tuple(frozenset(p for p in c.first if c.types[p] == t) for c in comps)

        none: tuple[frozenset[str], ...] = tuple(frozenset() for _ in comps)
        found: dict[Key, int] = {}
        order: list[State] = []
        todo: deque[Key] = deque()

        def state(at: tuple[frozenset[int], ...], seen: tuple[frozenset[str], ...]) -> int:
            key = (at, seen)
            if key not in found:
                if len(order) == MAX_STATES:
                    raise WorkloadError(
                        f"its pattern compiles to more than {MAX_STATES:,} automaton states: a "
                        "partial trend may stand at several of its elements at once (after "
                        "`(A OR B)+, A` an A is the Kleene part's or the next element's), and "
                        "each further element can double those sets; split the pattern over "
                        "several queries or give it fewer such elements",
                        query=query,
                    )
                types = {comps[0].types[p] for p in at[0]}
                found[key] = len(order)
                order.append(State(at, seen, types.pop() if not any(seen) else None))
                todo.append(key)
            return found[key]

        alphabet = tuple(dict.fromkeys(t for c in comps for t in c.types))
        rank_of = {t: i for i, t in enumerate(alphabet)}
        for t in alphabet:
            if all(firsts(t)):
                state(firsts(t), none)
        edges: list[tuple[int, int]] = []  # (from, to) by events
        moved: dict[str, list[tuple[int, int]]] = {}
        while todo:
            at, seen = todo.popleft()
            s = found[(at, seen)]
            # Only the types of the first pattern's next positions can step: trying the whole
            # alphabet made a SEQ of n types n^2 steps (3,000 types: 6.9 s).
            c0 = comps[0]
            follows = {c0.types[q] for p in at[0] for q in c0.follow[p]}
            for t in sorted(follows, key=rank_of.__getitem__):
                nxt = tuple(step(c, a, g, t) for c, a, g in zip(comps, at, seen))
                if all(nxt):
                    edges.append((s, state(nxt, none)))
            negated = frozenset().union(*(forbidden(c, a) - g for c, a, g in zip(comps, at, seen)))
            for n in sorted(negated):
                more = tuple(
                    g | {n} if n in forbidden(c, a) else g for c, a, g in zip(comps, at, seen)
                )
                live = all(alive(c, a, g) for c, a, g in zip(comps, at, more))
                moved.setdefault(n, []).append((s, state(at, more) if live else -1))
        # Number states by their positions (and seen types): the flat patterns' states then
        # stand in position order, as the engine always numbered them.
        rank = sorted(
            range(len(order)),
            key=lambda i: (
                [sorted(a) for a in order[i].at],
                [sorted(g) for g in order[i].seen],
            ),
        )
        new = {old: i for i, old in enumerate(rank)}
        new[-1] = -1
        states = tuple(order[i] for i in rank)
        preds: list[list[int]] = [[] for _ in states]
        for a, b in edges:
            preds[new[b]].append(new[a])
        starts = {new[found[(firsts(t), none)]] for t in alphabet if all(firsts(t))}
        return cls(
            states,
            tuple(tuple(sorted(set(p))) for p in preds),
            tuple(i in starts for i in range(len(states))),
            tuple(
                all(a & c.last for c, a in zip(comps, st.at)) and not any(st.seen) for st in states
            ),
            {n: tuple(sorted((new[a], new[b]) for a, b in ms)) for n, ms in moved.items()},
            comps,
        )

    def last_type(self, s: int) -> str:
        """The type of the last event of the partial trends in state s (moves keep it)."""
        c = self.positions[0]
        return c.types[next(iter(self.states[s].at[0]))]

    def describe(self) -> list[str]:
        """One line per state and per negated type, for `gpu-hamlet explain`."""

        def name(s: int) -> str:
            st = self.states[s]
            at = " & ".join(
                ",".join(f"{quoted(c.types[p])}#{p}" for p in sorted(a))
                for c, a in zip(self.positions, st.at)
            )
            seen = "+".join(map(quoted, sorted(set().union(*st.seen))))
            return f"s{s}{{{at}}}" + (f" after {seen}" if seen else "")

        lines = []
        for s, st in enumerate(self.states):
            flags = [f for f, on in (("start", self.start[s]), ("end", self.end[s])) if on]
            entered = (
                f"entered by {quoted(st.type)}" if st.type else "reached by negated events only"
            )
            reads = ", ".join(f"s{p}" for p in self.preds[s]) or "nothing"
            tail = f" [{', '.join(flags)}]" if flags else ""
            lines.append(f"{name(s)}: {entered}, extends {reads}{tail}")
        for n, ms in self.moves.items():
            shown = ", ".join(f"s{a} -> {'ended' if b < 0 else f's{b}'}" for a, b in ms)
            lines.append(f"NOT {quoted(n)} blocks: {shown}")
        return lines


def can_follow(pattern: Pattern, first: str, then: str) -> bool:
    """Whether a `then` event can come right after a `first` event in a trend of `pattern`
    (of either side of an AND)."""
    tops: tuple[Positive, ...]
    if isinstance(pattern, And | Both):
        tops = (pattern.left, pattern.right)
    else:
        tops = (pattern,)
    return any(
        c.types[p] == first and c.types[q] == then
        for side in tops
        for c in (Positions.of(side),)
        for p in range(len(c.types))
        for q in c.follow[p]
    )


__all__ = ["Automaton", "Positions", "State", "can_follow"]

"""The pattern of a query as a tree (docs/semantics.md section 2): types, SEQ, OR, Kleene plus,
NOT between the parts of a SEQ, and AND at the top.

Every positive node may carry Kleene plus (`kleene`). `str()` spells a node back in the query
language (names quoted where they must be), so messages and `explain` show what the user wrote in
one canonical form, and different patterns never read the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gpu_hamlet.names import quoted


@dataclass(frozen=True)
class PatternElement:
    """An event type, optionally under Kleene plus: the leaf of a pattern."""

    type: str
    kleene: bool = False

    def __str__(self) -> str:
        return quoted(self.type) + ("+" if self.kleene else "")


@dataclass(frozen=True)
class Not:
    """`NOT TYPE` inside a SEQ: no event of the type between the trend events on either side."""

    type: str

    def __str__(self) -> str:
        return f"NOT {quoted(self.type)}"


@dataclass(frozen=True)
class Seq:
    """`SEQ(part, ...)`: concatenation; `Not` parts stand between two positive parts."""

    parts: tuple[Positive | Not, ...]
    kleene: bool = False

    def __str__(self) -> str:
        return f"SEQ({', '.join(map(str, self.parts))})" + ("+" if self.kleene else "")


@dataclass(frozen=True)
class Alt:
    """`unit OR unit ...`: the union of the options' trends."""

    options: tuple[Positive, ...]
    kleene: bool = False

    def __str__(self) -> str:
        inner = " OR ".join(map(str, self.options))
        return f"({inner})+" if self.kleene else f"({inner})"


#: A pattern without AND: what a SEQ part, an option or a Kleene body may be.
Positive = PatternElement | Seq | Alt


@dataclass(frozen=True)
class And:
    """`alt AND alt` (top level only): unordered pairs of distinct trends, one of each side."""

    left: Positive
    right: Positive

    def __str__(self) -> str:
        return f"{show(self.left)} AND {show(self.right)}"


@dataclass(frozen=True)
class Both:
    """The trends matching both sides of an AND: never written, only run by the engine (one of
    the three counts an AND combines, gpu_hamlet/engine/conjunction.py)."""

    left: Positive
    right: Positive

    def __str__(self) -> str:
        return f"BOTH({show(self.left)}; {show(self.right)})"


Pattern = Positive | And | Both


def show(node: Pattern) -> str:
    """A whole pattern as written at the top of a query (an OR needs no parentheses there)."""
    if isinstance(node, Alt) and not node.kleene:
        return " OR ".join(map(str, node.options))
    return str(node)


def sides(node: Positive | Both) -> tuple[Positive, ...]:
    """The patterns a trend must match together: both sides of `Both`, else the pattern."""
    return (node.left, node.right) if isinstance(node, Both) else (node,)


def walk(node: Pattern | Not) -> Iterator[Pattern | Not]:
    """Every node of the tree, parents before children, left to right."""
    yield node
    if isinstance(node, Seq):
        for part in node.parts:
            yield from walk(part)
    elif isinstance(node, Alt):
        for option in node.options:
            yield from walk(option)
    elif isinstance(node, And | Both):
        yield from walk(node.left)
        yield from walk(node.right)


def positive_types(node: Pattern) -> tuple[str, ...]:
    """The types trend events may have, first appearance first."""
    seen = dict.fromkeys(n.type for n in walk(node) if isinstance(n, PatternElement))
    return tuple(seen)


def negated_types(node: Pattern) -> tuple[str, ...]:
    """The types of the pattern's `NOT` parts, first appearance first."""
    return tuple(dict.fromkeys(n.type for n in walk(node) if isinstance(n, Not)))


def elements(node: Pattern) -> tuple[PatternElement, ...] | None:
    """The flat form `SEQ(T1, T2+, ...)` of distinct types (or one type), whose automaton is
    the list of its positions; None for any other pattern. Sharing and pruning have fast paths
    for it (docs/architecture.md section 3)."""
    if isinstance(node, PatternElement):
        return (node,)
    if not isinstance(node, Seq) or node.kleene:
        return None
    if not all(isinstance(p, PatternElement) for p in node.parts):
        return None
    elems = tuple(p for p in node.parts if isinstance(p, PatternElement))
    return elems if len({e.type for e in elems}) == len(elems) else None

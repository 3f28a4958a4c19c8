"""The parsed form of a workload: what the parser produces and the engine compiles.

Kept free of any parsing or execution logic so that the parser, the engine, the Spark job and the
explain command all agree on one plain description of a query.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal

from gpu_hamlet.names import quoted
from gpu_hamlet.query.pattern import (
    Pattern,
    PatternElement,
    Seq,
    elements,
    negated_types,
    positive_types,
    show,
)

#: A filter literal. A number with a fraction is a float when the float reads back as written
#: (every literal of up to 15 significant digits), else a Decimal: either way it stands for the
#: number written, which filters compare exactly with integer and decimal columns.
Literal = int | float | Decimal | str

#: Comparison operators allowed in filters, in the spelling of the query language.
COMPARISON_OPS: tuple[str, ...] = ("=", "!=", "<", "<=", ">", ">=")

#: Aggregate functions of the language.
AGGREGATE_FUNCS: tuple[str, ...] = ("COUNT", "SUM", "AVG", "MIN", "MAX")


def format_ms(ms: int) -> str:
    """A duration in the largest unit of the query language that holds it whole (`30 min`),
    as a query would spell it."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms % size == 0 and ms != 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


@dataclass(frozen=True)
class Filter:
    """`TYPE.attr op literal`: only events of `type` passing the comparison take part in trends.

    Equal and hashed with the literal's type: 0.1 (a float) and the Decimal of float 0.1's exact
    value are equal in Python, but not on a decimal column, and queries (`run_as`), filter masks
    and compiled plans keyed by filters took one for the other."""

    type: str
    attr: str
    op: str
    value: Literal

    def _key(self) -> tuple:
        return (self.type, self.attr, self.op, type(self.value), self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Filter) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        value = str(self.value) if isinstance(self.value, Decimal) else repr(self.value)
        return f"{quoted(self.type)}.{quoted(self.attr, True)} {self.op} {value}"


@dataclass(frozen=True)
class NextCondition:
    """`TYPE.attr op NEXT(NEXT_TYPE).next_attr`: for every two adjacent events e, e' of a trend
    (e' right after e) with e of `type` and e' of `next_type`, `e.attr op e'.next_attr` holds. A
    comparison with a null is false; floats compare as IEEE numbers (docs/semantics.md
    section 2)."""

    type: str
    attr: str
    op: str
    next_type: str
    next_attr: str

    def __str__(self) -> str:
        return (
            f"{quoted(self.type)}.{quoted(self.attr, True)} {self.op} "
            f"NEXT({quoted(self.next_type)}).{quoted(self.next_attr, True)}"
        )


@dataclass(frozen=True)
class Aggregate:
    """One RETURN aggregate.

    `func` is upper case; `type` is None for COUNT(*); `attr` is None for COUNT(*) and COUNT(E).
    `name` is the output column: the alias, or the default `count`, `count_E`, `sum_E_a`, ...
    """

    func: str
    type: str | None
    attr: str | None
    name: str

    @property
    def default_name(self) -> str:
        if self.type is None:
            return "count"
        if self.attr is None:
            return f"count_{self.type}"
        return f"{self.func.lower()}_{self.type}_{self.attr}"

    def __str__(self) -> str:
        if self.type is None:
            arg = "*"
        elif self.attr is None:
            arg = quoted(self.type)
        else:
            arg = f"{quoted(self.type)}.{quoted(self.attr, True)}"
        return f"{self.func}({arg})"


@dataclass(frozen=True)
class Query:
    """One event trend aggregation query.

    Durations are whole milliseconds. `slide_ms == within_ms` for tumbling windows.
    `group_items` are the bare names of RETURN (each one is in `groupby`).
    `equivalence` lists the attributes of all `[a, b]` conditions, first appearance first.
    `pattern` is a tree (gpu_hamlet/query/pattern.py); a tuple of PatternElements given here
    stands for their SEQ. What is derived from the pattern is computed once per query (cached
    properties): small calls ask for it many times (docs/architecture.md section 4).
    """

    name: str
    pattern: Pattern
    aggregates: tuple[Aggregate, ...]
    group_items: tuple[str, ...] = ()
    filters: tuple[Filter, ...] = ()
    next_conditions: tuple[NextCondition, ...] = ()
    equivalence: tuple[str, ...] = ()
    groupby: tuple[str, ...] = ()
    within_ms: int = 0
    slide_ms: int = 0
    text: str = field(default="", compare=False)
    #: The window clause as written (`WITHIN 30 min SLIDE 10 min`), for messages and explain.
    window_text: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.pattern, tuple | list):
            elems = tuple(self.pattern)
            object.__setattr__(self, "pattern", elems[0] if len(elems) == 1 else Seq(elems))

    @property
    def window(self) -> str:
        """The window clause in the query's own units (or the largest whole ones)."""
        if self.window_text:
            return self.window_text
        slide = f" SLIDE {format_ms(self.slide_ms)}" if self.slide_ms != self.within_ms else ""
        return f"WITHIN {format_ms(self.within_ms)}{slide}"

    @property
    def pane_ms(self) -> int:
        """gcd of WITHIN and SLIDE: the pane every window of the query is made of."""
        return math.gcd(self.within_ms, self.slide_ms)

    @functools.cached_property
    def types(self) -> tuple[str, ...]:
        """Types trend events may have, first appearance first."""
        return positive_types(self.pattern)

    @functools.cached_property
    def negated_types(self) -> tuple[str, ...]:
        """Types of the pattern's NOT parts: their events end partial trends, never join one."""
        return negated_types(self.pattern)

    @functools.cached_property
    def event_types(self) -> tuple[str, ...]:
        """Types whose events the query reads: its trend types, then its negated-only types."""
        return tuple(dict.fromkeys(self.types + self.negated_types))

    @functools.cached_property
    def elements(self) -> tuple[PatternElement, ...] | None:
        """The pattern as `SEQ(T1, T2+, ...)` of distinct types, or None when it is not one."""
        return elements(self.pattern)

    @property
    def pattern_text(self) -> str:
        return show(self.pattern)

    @functools.cached_property
    def partition_attrs(self) -> tuple[str, ...]:
        """Attributes whose values must be equal inside a trend: GROUPBY, then equivalence."""
        extra = tuple(a for a in self.equivalence if a not in self.groupby)
        return self.groupby + extra

    def next_of(self, type_: str, next_type: str) -> tuple[NextCondition, ...]:
        """The conditions between an event of `type_` and the `next_type` event right after it
        in a trend: '=' conditions first, then the one ordering condition, if any."""
        conds = [c for c in self.next_conditions if (c.type, c.next_type) == (type_, next_type)]
        return tuple(sorted(conds, key=lambda c: c.op != "="))

    def filters_of(self, type_: str) -> tuple[Filter, ...]:
        return tuple(f for f in self.filters if f.type == type_)

    def __str__(self) -> str:
        return self.text or self.name


@dataclass(frozen=True)
class Workload:
    """An ordered collection of uniquely named queries."""

    queries: tuple[Query, ...]

    def __iter__(self) -> Iterator[Query]:
        return iter(self.queries)

    def __len__(self) -> int:
        return len(self.queries)

    def __getitem__(self, name: str) -> Query:
        for q in self.queries:
            if q.name == name:
                return q
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(q.name for q in self.queries)

    def __hash__(self) -> int:
        """The queries' hash, computed once: the caches of compiled plans and of GLORIA's
        stages look a workload up on every call (120 us at 100 queries). Not pickled: a string's
        hash differs from process to process."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(self.queries)
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        return {"queries": self.queries}

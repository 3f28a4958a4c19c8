"""Compiling a query into what the kernels run: the pattern template and the state's channels.

The template is the pattern's automaton over positions (HAMLET's query template): predecessor
lists in CSR form, start and end flags. Channels are the weighted counts the aggregates need
(cpu_fallback/kernels.py explains the state). Which channels run in which number system depends
on the numeric mode, so it is decided here once per query.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from math import gcd

import numpy as np
import pyarrow as pa

from gpu_hamlet.errors import WorkloadError
from gpu_hamlet.query.automaton import Automaton
from gpu_hamlet.query.pattern import And, Positive, negated_types, positive_types, sides
from gpu_hamlet.query.schema import attr_kind, result_schema
from gpu_hamlet.query.time_axis import TimeAxis
from gpu_hamlet.query.workload import Aggregate, NextCondition, Query, format_ms


def _csr(lists: list[list[int]] | list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.cumsum([0] + [len(x) for x in lists]).astype(np.int64)
    idx = np.asarray([v for x in lists for v in x], np.int64)
    return ptr, idx


@dataclass(frozen=True)
class Template:
    """The pattern's automaton as arrays (gpu_hamlet/query/automaton.py): per state its
    predecessors (CSR `pred_ptr`, `pred_idx`), start and end flags; per *label* (a type of the
    pattern, negated types included) the states its events enter (CSR `enter_ptr`, `enter_idx`)
    and the moves of a negated type (CSR `move_ptr` into `move_from`, `move_to`; -1: cleared).

    An event becomes one row per state it enters plus one move row if its type is negated. When
    every label enters exactly its own state and nothing is negated (`one_row`), an event is one
    row whose state is its label, as for every flat `SEQ(A, B+, C)`."""

    k: int
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    is_start: np.ndarray
    is_end: np.ndarray
    labels: dict[str, int]
    enter_ptr: np.ndarray
    enter_idx: np.ndarray
    move_ptr: np.ndarray
    move_from: np.ndarray
    move_to: np.ndarray
    automaton: Automaton

    @cached_property
    def carry(self) -> np.ndarray:
        """States some row reads (a predecessor) or moves on to one: the inputs a segment map
        depends on. (Cached, like `one_row`: plans are compiled once per workload and read on
        every call.)"""
        moved = self.move_from[self.move_to >= 0]
        return np.unique(np.concatenate([self.pred_idx, moved])).astype(np.int64)

    @cached_property
    def self_loops(self) -> np.ndarray:
        """Per state, whether it is its own predecessor (a Kleene plus): its events read each
        other, so a run of them is no single macro row (engine/query_rows.py `_collapse_runs`)."""
        owner = np.repeat(np.arange(self.k), np.diff(self.pred_ptr))
        loops = np.zeros(self.k, bool)
        loops[owner[self.pred_idx == owner]] = True
        return loops

    @cached_property
    def start_states(self) -> np.ndarray:
        """The start states, for pruning (engine/query_rows.py `_ends`), which runs per call."""
        return np.flatnonzero(self.is_start)

    @cached_property
    def end_states(self) -> np.ndarray:
        """The end states (`start_states`)."""
        return np.flatnonzero(self.is_end)

    @cached_property
    def one_row(self) -> bool:
        n = len(self.labels)
        return (
            self.move_from.shape[0] == 0
            and np.array_equal(self.enter_ptr, np.arange(n + 1))
            and np.array_equal(self.enter_idx, np.arange(n))
        )

    @classmethod
    def of(cls, *patterns: Positive, query: str | None = None) -> Template:
        """The template of the trends matching every one of `patterns` (usually one; `query`:
        whose, for an error: `Automaton.of`)."""
        auto = Automaton.of(*patterns, query=query)
        types = [t for p in patterns for t in positive_types(p)]
        types += [t for p in patterns for t in negated_types(p)]
        labels = {t: i for i, t in enumerate(dict.fromkeys(types))}
        enter_ptr, enter_idx = _csr([auto.entering(t) for t in labels])
        move_ptr, moves = _csr(
            [[m for pair in auto.moves.get(t, ()) for m in pair] for t in labels]
        )
        pred_ptr, pred_idx = _csr(list(auto.preds))
        return cls(
            len(auto.states),
            pred_ptr,
            pred_idx,
            np.asarray(auto.start, np.bool_),
            np.asarray(auto.end, np.bool_),
            labels,
            enter_ptr,
            enter_idx,
            move_ptr // 2,
            np.ascontiguousarray(moves[0::2]),
            np.ascontiguousarray(moves[1::2]),
            auto,
        )


@dataclass(frozen=True)
class Adjacency:
    """A query's predicates between adjacent events on its template (gpu_hamlet/core/adjacency.py).

    A *class* is the conditions of one pair of types (X, Y) ('=' first). `pred_cls` gives, per
    template edge (aligned with `pred_idx`), the class an event reads that predecessor through
    (-1: none, the state's running sum); every state whose partial trends end with an X event
    keeps a tree per class of X: `tree[q, c]` numbers it among the `ntree[c]` trees of class c."""

    classes: tuple[tuple[NextCondition, ...], ...]
    pred_cls: np.ndarray
    tree: np.ndarray
    ntree: np.ndarray

    @classmethod
    def of(cls, query: Query, tpl: Template) -> Adjacency | None:
        if not query.next_conditions:
            return None
        auto = tpl.automaton
        last = [auto.last_type(s) for s in range(tpl.k)]
        classes: dict[tuple[str, str], int] = {}
        pred_cls = np.full(tpl.pred_idx.shape[0], -1, np.int64)
        for p, st in enumerate(auto.states):
            for qi in range(tpl.pred_ptr[p], tpl.pred_ptr[p + 1]):
                pair = (last[tpl.pred_idx[qi]], st.type or last[p])
                if query.next_of(*pair):
                    pred_cls[qi] = classes.setdefault(pair, len(classes))
        tree = np.full((tpl.k, len(classes)), -1, np.int64)
        ntree = np.zeros(len(classes), np.int64)
        for (x, _), c in classes.items():
            for q in range(tpl.k):
                if last[q] == x:
                    tree[q, c] = ntree[c]
                    ntree[c] += 1
        return cls(tuple(query.next_of(*pair) for pair in classes), pred_cls, tree, ntree)


@dataclass(frozen=True)
class Channel:
    """A weighted trend count: `count` (weight 1 everywhere, channel 0), `count_e` (1 on events
    of `type`), `sum` (attribute value, 0 for null), `abs` (|value|: a magnitude bound for exact
    sums), `count_valid` (1 on events of `type` whose `attr` is not null: AVG's divisor, and
    whether a SUM has any value), `min` / `max` (attribute rank; nulls are skipped)."""

    kind: str
    type: str | None = None
    attr: str | None = None


COUNT = Channel("count")


@dataclass(frozen=True)
class Windowing:
    """Segments and windows in ticks: windows are [k*a, k*a+n) in segment units."""

    seg: int | float
    a: int
    n: int
    within: int | float
    slide: int | float

    @property
    def full(self) -> bool:
        """Whether segments must be composed (sliding) rather than each being a window."""
        return self.n > 1

    @property
    def copies(self) -> int:
        """The windows holding each segment: the copies of a row on the window-copies route
        (engine/query_rows.py `_into_windows`); 1 when tumbling."""
        return -(-self.n // self.a)

    @classmethod
    def of(cls, query: Query, axis: TimeAxis) -> Windowing:
        w = axis.ticks(query.within_ms, query, "WITHIN")
        s = axis.ticks(query.slide_ms, query, "SLIDE")
        # Pane = gcd of window and slide (the window itself when tumbling). A whole number of
        # ticks whenever the window and the slide are.
        g_ms = gcd(query.within_ms, query.slide_ms)
        g = axis.ticks(g_ms, query, "pane")
        if query.within_ms // g_ms > 2**63 - 1:  # (float times: int64 ticks have fewer panes)
            raise WorkloadError(
                f"{query.window} is more than 2^63 - 1 panes of {format_ms(g_ms)} (the gcd of "
                f"WITHIN and SLIDE), which the int64 pane numbers cannot count",
                query=query.name,
            )
        return cls(g, query.slide_ms // g_ms, query.within_ms // g_ms, w, s)


#: Which windows a caller asks for (`evaluate`): a mask from their windowing and their start and
#: end ticks, as the engine computes them (before the time column's type rounds them).
Asked = Callable[[Windowing, np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Output:
    """How one aggregate's column is made from the runs' channels (engine/results.py)."""

    type: pa.DataType  # the column's, in the result schema
    scale: int  # a decimal column's scale (its sums are unscaled integers), else 0
    channel: Channel  # the channel holding its values (MIN/MAX: the MINREACH run's)
    divisor: Channel | None  # SUM and AVG: the count telling whether any value was aggregated


@dataclass(frozen=True)
class QueryPlan:
    """Everything the engine needs to run one query."""

    query: Query
    template: Template
    windowing: Windowing
    linear: tuple[Channel, ...]  # float (shadow) run: channel 0 is COUNT
    exact: tuple[Channel, ...]  # residue runs (empty in float mode): channel 0 is COUNT
    minmax: tuple[Channel, ...]  # MINREACH run: channel 0 is reachability
    attr_types: dict[str, pa.DataType]
    nullable: frozenset[str]  # aggregated columns that may hold nulls
    result_schema: pa.Schema  # the result table's (gpu_hamlet/query/schema.py)
    adjacency: Adjacency | None = None  # predicates between adjacent events (NEXT)
    #: A run of queries alike but for RETURN (engine/conjunction.py `run_as`): each aggregate's
    #: column, with the query that asks for it first, which its errors name.
    asked_by: tuple[tuple[str, str], ...] = ()

    @cached_property
    def outputs(self) -> dict[str, Output]:
        """Per aggregate (by name), how its column is made: worked out once, as the plan is
        compiled once per workload and read on every call."""
        out = {}
        for agg in self.query.aggregates:
            t = self.attr_types[agg.attr] if agg.attr else None
            if agg.func in ("MIN", "MAX"):
                ch = Channel(agg.func.lower(), agg.type, agg.attr)
            elif agg.type is None:
                ch = COUNT
            elif agg.attr is None:
                ch = Channel("count_e", agg.type)
            else:
                ch = Channel("sum", agg.type, agg.attr)
            out[agg.name] = Output(
                self.result_schema.field(agg.name).type,
                t.scale if t is not None and attr_kind(t) == "decimal" else 0,
                ch,
                divisor(agg, agg.attr in self.nullable) if agg.attr else None,
            )
        return out

    @cached_property
    def shape(self) -> int | None:
        """What the plans of queries that one run can answer together share (engine/fusion.py),
        as a number per distinct shape: the automaton up to the names of its types, save those
        the channels weigh; windows; partitions and groups; channels; and the result columns.
        None where a plan never runs so: an event of several rows (nested or negated
        patterns), or NEXT conditions. (A number: hashing the tuple, with its schema, took
        about 9 us, and a call groups its queries by shape.)"""
        tpl = self.template
        if not tpl.one_row or self.adjacency is not None:
            return None
        key = self._shape_key()
        with _SHAPES_LOCK:
            number = _SHAPES.get(key)
            if number is None:
                if len(_SHAPES) >= SHAPES_KEPT:
                    _SHAPES.clear()
                number = _SHAPES[key] = next(_SHAPE_NUMBERS)
            return number

    def _shape_key(self) -> tuple:
        tpl = self.template
        channels = (*self.linear, *self.exact, *self.minmax)
        weighed = sorted({(c.type, tpl.labels[c.type]) for c in channels if c.type is not None})
        q = self.query
        return (
            tpl.k,
            tpl.pred_ptr.tobytes(),
            tpl.pred_idx.tobytes(),
            tpl.is_start.tobytes(),
            tpl.is_end.tobytes(),
            tuple(weighed),
            self.windowing,
            q.partition_attrs,
            q.groupby,
            channels,
            self.linear,
            self.exact,
            q.aggregates,
            self.nullable,
            self.result_schema,
        )


#: The plan shapes met lately in this process, numbered (`QueryPlan.shape`), at most
#: SHAPES_KEPT of them: a long-running process compiles ever new queries (it grew by a shape a
#: call, without end). A number is never given again, so a shape met after the table was
#: cleared gets a new one: plans made before and after it are not fused together (a plan keeps
#: its number, and the compiled plans of a workload are kept, engine/evaluate.py `_compiled`).
SHAPES_KEPT = 4096
_SHAPES: dict[tuple, int] = {}
_SHAPE_NUMBERS = itertools.count()
_SHAPES_LOCK = threading.Lock()


def divisor(agg: Aggregate, nullable: bool) -> Channel:
    """The count an AVG divides by, and that tells whether a SUM has any value: the events of the
    type with a value (COUNT(E) itself when the column holds no nulls)."""
    return Channel("count_valid", agg.type, agg.attr) if nullable else Channel("count_e", agg.type)


def _channels_for(
    agg: Aggregate, kinds: dict[str, str], nullable: set[str], exact_mode: bool, optional: bool
):
    """(float-run channels, exact-run channels, minmax channels) one aggregate needs. With
    `optional` (a pattern whose trends need not hold every type: OR, repeated parts) a SUM
    also counts its values, to be null where no trend of the window holds one."""
    if agg.type is None:
        return [], [], []
    ce = Channel("count_e", agg.type)
    if agg.attr is None:
        return [ce], ([ce] if exact_mode else []), []
    if agg.func in ("MIN", "MAX"):
        return [], [], [Channel(agg.func.lower(), agg.type, agg.attr)]
    s = Channel("sum", agg.type, agg.attr)
    d = divisor(agg, agg.attr in nullable)
    exact_attr = exact_mode and kinds[agg.attr] in ("int", "decimal")
    lin = [s] + ([Channel("abs", agg.type, agg.attr)] if exact_attr else [])
    if agg.func == "AVG":
        lin.append(d)
        return lin, ([s, d] if exact_attr else []), []
    if d.kind == "count_valid" or optional:  # SUM over no value (or only nulls) is null
        lin.append(d)
    return lin, ([s] if exact_attr else []), []


def plan_query(query: Query, axis: TimeAxis, schema: pa.Schema, numeric: str) -> QueryPlan:
    """Compile one query for one input schema and numeric mode. The channels follow the schema,
    nullability included (an aggregated column that may hold nulls needs its own divisor), so
    every slice of one dataset gets the same plan. SUM and AVG of a column that is not a number
    are a WorkloadError (`result_schema`)."""
    assert not isinstance(query.pattern, And), (
        "an AND runs as three queries (engine/conjunction.py)"
    )
    result = result_schema(query, axis, schema, numeric)
    attr_types = {a.attr: schema.field(a.attr).type for a in query.aggregates if a.attr}
    kinds = {name: attr_kind(t) for name, t in attr_types.items()}
    nullable = {name for name in attr_types if schema.field(name).nullable}
    exact_mode = numeric in ("exact", "bigint")
    linear: list[Channel] = [COUNT]
    exact: list[Channel] = [COUNT] if exact_mode else []
    minmax: list[Channel] = []
    for agg in query.aggregates:
        lin, ex, mm = _channels_for(agg, kinds, nullable, exact_mode, query.elements is None)
        linear += [c for c in lin if c not in linear]
        exact += [c for c in ex if c not in exact]
        minmax += [c for c in mm if c not in minmax]
    if minmax:
        minmax.insert(0, COUNT)
    tpl = Template.of(*sides(query.pattern), query=query.name)
    return QueryPlan(
        query,
        tpl,
        Windowing.of(query, axis),
        tuple(linear),
        tuple(exact),
        tuple(minmax),
        attr_types,
        frozenset(nullable),
        result,
        Adjacency.of(query, tpl),
    )

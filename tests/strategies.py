"""Hypothesis strategies: random workloads (query-language text) and small event streams.

* ``workloads()`` draws workload TEXT; ``workload_cases()`` draws ``(text, Workload)`` where the
  Workload is built here, independently of the parser, with the meaning docs/semantics.md gives
  the text (so the oracle can run on it while the engine parses the text itself).
* ``event_streams(types)`` draws a small list of event dicts over the attributes of
  :data:`EVENT_ATTRS`, with integer times in a small range (duplicate timestamps are common), in
  which every type of ``types`` occurs at least once unless the stream is empty.

Types of the patterns come from ``A``..``E`` (each at most once per pattern); streams may also hold
events of the type ``Z`` that no pattern uses. Attributes: ``g`` (string, 2 values), ``k`` (int, 2
values), ``x`` (int, small, may be negative), ``y`` (float, multiples of 0.25), ``s`` (string).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from gpu_hamlet.query.automaton import can_follow
from gpu_hamlet.query.pattern import Alt, And, Not, Positive, Seq
from gpu_hamlet.query.workload import (
    Aggregate,
    Filter,
    NextCondition,
    PatternElement,
    Query,
    Workload,
)

__all__ = [
    "TYPES",
    "NOISE_TYPES",
    "EVENT_ATTRS",
    "G_VALUES",
    "K_VALUES",
    "S_VALUES",
    "workloads",
    "workload_cases",
    "query_cases",
    "event_streams",
    "workload_types",
    "patterns",
]

TYPES = ("A", "B", "C", "D", "E")
NOISE_TYPES = ("Z",)
G_VALUES = ("g1", "g2")
K_VALUES = (0, 1)
S_VALUES = ("u", "v", "w")
#: Attribute name -> Python type of the events the strategies draw.
EVENT_ATTRS = {"g": str, "k": int, "x": int, "y": float, "s": str}

_OPS = ("=", "!=", "<", "<=", ">", ">=")
_NUMERIC_ATTRS = ("x", "y")
#: Column pairs a NEXT condition compares: ints, floats, an int with a float, strings.
_NEXT_ATTRS = (("x", "x"), ("x", "x"), ("y", "y"), ("x", "y"), ("s", "s"), ("k", "x"))


def workload_types(workload: Workload) -> list[str]:
    """Sorted event types the patterns of ``workload`` read (negated ones included)."""
    return sorted({t for q in workload for t in q.event_types})


@st.composite
def _kw(draw, word: str) -> str:
    """A keyword in random letter case (keywords are case-insensitive)."""
    return draw(st.sampled_from([word.upper(), word.upper(), word.lower(), word.capitalize()]))


@st.composite
def _duration(draw, ms: int) -> str:
    forms = []
    if ms % 1000 == 0:
        s = ms // 1000
        forms += [f"{s} s", f"{s}s", f"{s} sec", f"{s} secs", f"{ms} ms"]
    if ms % 60000 == 0:
        m = ms // 60000
        forms += [f"{m} min", f"{m} mins"]
    if not forms:
        forms = [f"{ms} ms", f"{ms}ms", f"{ms / 1000:g} s"]
    return draw(st.sampled_from(forms))


@st.composite
def _literal(draw, attr: str):
    """(text, value) of a filter literal for attribute ``attr``."""
    if attr == "x":
        if draw(st.integers(0, 9)) == 0:  # occasionally a float literal on the int attribute
            v = draw(st.integers(-12, 20)) / 4
            return repr(v), v
        v = draw(st.integers(-3, 5))
        return str(v), v
    if attr == "y":
        if draw(st.integers(0, 4)) == 0:  # occasionally an int literal on the float attribute
            v = draw(st.integers(-2, 2))
            return str(v), v
        v = draw(st.integers(-8, 8)) / 4
        return repr(v), v
    v = draw(st.sampled_from(S_VALUES + ("uu", "a", "z")))
    return f"'{v}'", v


@st.composite
def patterns(draw, alphabet: Sequence[str], depth: int = 3) -> tuple[str, Positive]:
    """(text, tree) of a pattern of the whole language but AND (docs/semantics.md section 2):
    SEQ with NOT between positive parts, OR, Kleene plus at any depth, types repeated. NOT
    names a type of `alphabet` or the noise type Z."""
    kw = lambda w: draw(_kw(w))  # noqa: E731
    kinds = ["type", "type"] + (["seq", "seq", "alt"] if depth > 0 else [])
    kind = draw(st.sampled_from(kinds))
    plus = draw(st.integers(0, 2)) == 0
    if kind == "type":
        t = draw(st.sampled_from(list(alphabet)))
        return t + ("+" if plus else ""), PatternElement(t, plus)
    if kind == "alt":
        options = [draw(patterns(alphabet, depth - 1)) for _ in range(2)]
        text = "(" + f" {kw('OR')} ".join(t for t, _ in options) + ")" + ("+" if plus else "")
        return text, Alt(tuple(n for _, n in options), plus)
    texts: list[str] = []
    nodes: list[Positive | Not] = []
    for i in range(draw(st.integers(2, 3))):
        if i > 0 and draw(st.integers(0, 2)) == 0:
            n = draw(st.sampled_from([*alphabet, *NOISE_TYPES]))
            texts.append(f"{kw('NOT')} {n}")
            nodes.append(Not(n))
        t, node = draw(patterns(alphabet, depth - 1))
        texts.append(t)
        nodes.append(node)
    return f"{kw('SEQ')}({', '.join(texts)})" + ("+" if plus else ""), Seq(tuple(nodes), plus)


@st.composite
def query_cases(
    draw,
    index: int,
    alphabet: Sequence[str] = TYPES,
    window_unit_ms: int = 1000,
    general: bool = False,
    adjacent: bool = False,
) -> tuple[str, Query]:
    """One query at position ``index`` (1-based) over types of ``alphabet``: text and Query.

    WITHIN and SLIDE are multiples of ``window_unit_ms`` (1000: whole seconds, which int-second
    time columns can hold; 250 or 100 give sub-second windows for float or timestamp times).
    With ``adjacent``, one or two NEXT conditions between types that can be adjacent.
    """
    kw = lambda w: draw(_kw(w))  # noqa: E731

    # name
    named = draw(st.booleans())
    name = f"n{index}" if named else f"q{index}"

    # pattern: 1..4 distinct types, Kleene plus anywhere; or (`general`) the whole language
    pattern: Positive | And | tuple[PatternElement, ...]
    conjunction = False
    if general:
        pattern_text, pattern = draw(patterns(alphabet, draw(st.sampled_from([1, 2, 2, 3]))))
        types = list(dict.fromkeys(n.type for n in _leaves(pattern)))
        if draw(st.integers(0, 3)) == 0:  # P1 AND P2: COUNT(*) only
            right_text, right = draw(patterns(alphabet, draw(st.sampled_from([1, 2]))))
            pattern_text = f"{pattern_text} {kw('AND')} {right_text}"
            pattern = And(pattern, right)
            conjunction = True
    else:
        n = min(draw(st.sampled_from([1, 2, 2, 3, 3, 4])), len(alphabet))
        types = draw(st.permutations(alphabet))[:n]
        pattern = tuple(PatternElement(t, draw(st.booleans())) for t in types)
        elems = [str(e) for e in pattern]
        if n == 1 and draw(st.booleans()):
            pattern_text = elems[0]
        else:
            pattern_text = f"{kw('SEQ')}({', '.join(elems)})"

    # GROUPBY and the bare RETURN names
    groupby = draw(st.sampled_from([(), (), (), ("g",), ("g",), ("k",), ("g", "k")]))
    group_items = tuple(a for a in groupby if draw(st.booleans()))

    # aggregates: distinct (func, type, attr), optional aliases
    candidates = [("COUNT", None, None)]
    for t in [] if conjunction else types:
        candidates.append(("COUNT", t, None))
        for f in ("SUM", "AVG", "MIN", "MAX"):
            for a in _NUMERIC_ATTRS:
                candidates.append((f, t, a))
    chosen = draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=4, unique=True))
    aggregates = []
    agg_texts = []
    for i, (f, t, a) in enumerate(chosen):
        arg = "*" if t is None else (t if a is None else f"{t}.{a}")
        text = f"{kw(f)}({arg})"
        default = Aggregate(f, t, a, "").default_name
        if draw(st.integers(0, 3)) == 0:
            alias = f"r{i}"
            text += f" {kw('AS')} {alias}"
        else:
            alias = default
        aggregates.append(Aggregate(f, t, a, alias))
        agg_texts.append(text)
    # bare group names go anywhere in RETURN; they do not change the output column order
    items = list(agg_texts)
    for g in group_items:
        items.insert(draw(st.integers(0, len(items))), g)
    group_items = tuple(it for it in items if it in groupby)  # in RETURN order

    # WHERE: equivalence and filters in any order
    equivalence_groups = draw(
        st.sampled_from([[], [], [["k"]], [["g"]], [["g", "k"]], [["k", "g"]], [["g"], ["k"]]])
    )
    conds: list[tuple[str, object]] = [("eq", grp) for grp in equivalence_groups]
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))):
        t = draw(st.sampled_from(types))
        attr = draw(st.sampled_from(("x", "x", "y", "y", "s")))
        op = draw(st.sampled_from(_OPS))
        lit_text, value = draw(_literal(attr))
        conds.append(("filter", (f"{t}.{attr} {op} {lit_text}", Filter(t, attr, op, value))))
    if adjacent:
        tree = (
            (pattern[0] if len(pattern) == 1 else Seq(pattern))
            if isinstance(pattern, tuple)
            else pattern
        )
        pairs = [(a, b) for a in types for b in types if can_follow(tree, a, b)]
        ordered: set[tuple[str, str]] = set()
        for _ in range(draw(st.sampled_from([1, 1, 2])) if pairs else 0):
            a, b = draw(st.sampled_from(pairs))
            attr, next_attr = draw(st.sampled_from(_NEXT_ATTRS))
            op = "=" if (a, b) in ordered else draw(st.sampled_from(_OPS))
            if op != "=":
                ordered.add((a, b))
            cond = NextCondition(a, attr, op, b, next_attr)
            conds.append(("next", (str(cond), cond)))
    conds = draw(st.permutations(conds)) if conds else []
    nexts: list[NextCondition] = []
    equivalence: list[str] = []  # attributes of all [..] conditions, first appearance first
    filters: list[Filter] = []  # in text order
    cond_texts = []
    for kind, c in conds:
        if kind == "eq":
            cond_texts.append("[" + ", ".join(c) + "]")
            equivalence += [a for a in c if a not in equivalence]
        elif kind == "next":
            cond_texts.append(c[0])
            if c[1] not in nexts:
                nexts.append(c[1])
        else:
            cond_texts.append(c[0])
            filters.append(c[1])

    # windows: multiples of window_unit_ms, slide <= within, dividing it or not
    if draw(st.integers(0, 9)) == 0:
        within_ms = 60_000
        slide_ms = draw(st.sampled_from([None, 60_000, 30_000, 20_000, 15_000]))
    else:
        u = window_unit_ms
        scale = max(1, 1000 // u)  # keep windows of about 1 to 12 seconds
        if scale == 1:
            within_ms = u * draw(st.sampled_from([1, 2, 3, 4, 5, 6, 7, 8, 8, 10, 10, 12]))
        else:
            within_ms = u * draw(st.integers(1, 12 * scale))
        slide_ms = draw(st.one_of(st.none(), st.integers(1, within_ms // u).map(lambda k: k * u)))

    text = f"{name}: " if named else ""
    text += f"{kw('RETURN')} {', '.join(items)} {kw('PATTERN')} {pattern_text}"
    if cond_texts:
        text += f" {kw('WHERE')} " + f" {kw('AND')} ".join(cond_texts)
    if groupby:
        text += f" {kw('GROUPBY')} {', '.join(groupby)}"
    text += f" {kw('WITHIN')} {draw(_duration(within_ms))}"
    if slide_ms is not None:
        text += f" {kw('SLIDE')} {draw(_duration(slide_ms))}"

    q = Query(
        name=name,
        pattern=pattern,
        aggregates=tuple(aggregates),
        group_items=group_items,
        filters=tuple(filters),
        next_conditions=tuple(nexts),
        equivalence=tuple(equivalence),
        groupby=groupby,
        within_ms=within_ms,
        slide_ms=slide_ms if slide_ms is not None else within_ms,
        text=text,
    )
    return text, q


def _leaves(node: Positive) -> list[PatternElement]:
    if isinstance(node, PatternElement):
        return [node]
    kids = node.parts if isinstance(node, Seq) else node.options
    return [leaf for k in kids if not isinstance(k, Not) for leaf in _leaves(k)]


@st.composite
def workload_cases(
    draw,
    min_queries: int = 1,
    max_queries: int = 5,
    window_unit_ms: int = 1000,
    general: bool = False,
    adjacent: bool = False,
) -> tuple[str, Workload]:
    """``(workload text, Workload)`` with 1..5 queries (see query_cases for window_unit_ms,
    `general` and `adjacent`)."""
    n = draw(st.integers(min_queries, max_queries))
    # a workload draws its types from a few of A..E: denser streams, more shared Kleene types
    alphabet = draw(st.permutations(TYPES))[: draw(st.sampled_from([2, 3, 3, 4, 5]))]
    cases = [
        draw(query_cases(i + 1, alphabet, window_unit_ms, general, adjacent)) for i in range(n)
    ]
    sep = draw(st.sampled_from([";\n", "; ", ";\n\n"]))
    text = sep.join(t for t, _ in cases)
    if draw(st.booleans()):
        text += ";"
    return text, Workload(tuple(q for _, q in cases))


def workloads(
    min_queries: int = 1, max_queries: int = 5, window_unit_ms: int = 1000
) -> st.SearchStrategy[str]:
    """Random workload text in the query language (docs/semantics.md)."""
    return workload_cases(min_queries, max_queries, window_unit_ms).map(lambda case: case[0])


@st.composite
def event_streams(
    draw,
    types: Sequence[str],
    *,
    max_events: int = 20,
    max_time: int = 10,
    noise_types: Sequence[str] = NOISE_TYPES,
    nulls: bool = False,
) -> list[dict]:
    """A small list of event dicts ``{time, type, g, k, x, y, s}``; with ``nulls``, x, y and s
    are sometimes None.

    Times are ints in ``[0, max_time]`` (so equal timestamps are frequent); every type of
    ``types`` occurs at least once unless the stream is empty. At most ``max_events`` events
    (more only when ``types`` is longer), which keeps the exponential oracle fast even when no
    GROUPBY or equivalence splits the stream.
    """
    types = list(dict.fromkeys(types))
    if draw(st.integers(0, 15)) == 15:  # (hypothesis often draws 0s: keep empties rare)
        return []
    n = draw(st.sampled_from(range(min(len(types), max_events), max_events + 1)))
    n = max(n, len(types), 1)
    span = draw(st.sampled_from(sorted({max(1, max_time // 3), max(1, max_time // 2), max_time})))
    pool = types * 4 + list(noise_types)  # mostly pattern types, some noise
    kinds = types + [draw(st.sampled_from(pool)) for _ in range(n - len(types))]

    def maybe_null(values: st.SearchStrategy) -> Any:
        return draw(st.none() | values) if nulls and draw(st.integers(0, 3)) == 0 else draw(values)

    events = []
    for t in kinds:
        events.append(
            {
                "time": draw(st.integers(0, span)),
                "type": t,
                "g": draw(st.sampled_from(G_VALUES)),
                "k": draw(st.sampled_from(K_VALUES)),
                "x": maybe_null(st.integers(-3, 5)),
                "y": maybe_null(st.integers(-8, 8).map(lambda v: v / 4)),
                "s": maybe_null(st.sampled_from(S_VALUES)),
            }
        )
    return draw(st.permutations(events))

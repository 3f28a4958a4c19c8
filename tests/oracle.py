"""Brute-force ground truth for event trend aggregation (docs/semantics.md).

This module enumerates every trend, one by one, so it is exponential in the length of a burst and
meant for small inputs only. It must stay obviously correct: it shares no code with the engine and
uses no algebra (no counting formulas, no state vectors); the only thing it does beyond listing
subsequences is to prune, during a depth-first search, the prefixes that can no longer become a
trend (a later event must have a strictly greater time and be able to follow in the pattern).

Semantics implemented, literally:

* Events are partitioned by the query's GROUPBY attributes plus its equivalence attributes.
* Windows are ``[k*s, k*s + w)`` for every integer k, aligned to time 0 (the Unix epoch for
  datetimes), ``w = within_ms / 1000`` and ``s = slide_ms / 1000`` seconds.
* A trend is a subsequence e1..em of one partition's events inside one window with strictly
  increasing times, every event passing the query's filters for its type (a filter ``T.a op v``
  only applies to events of type T), whose type sequence matches the pattern (``SEQ`` of elements,
  ``E+`` one or more E). Skip-till-any-match: every such subsequence counts once.
* Per (group, window), over the partitions of that group: COUNT(*) the number of trends; COUNT(E)
  the number of E events summed over the trends; SUM(E.a) the sum of ``a`` over those occurrences;
  AVG(E.a) = SUM(E.a) / COUNT(E); MIN/MAX(E.a) over the E events that occur in at least one trend.
* A NEXT condition ``X.a op NEXT(Y).b`` drops every trend holding two adjacent events e, e'
  (e' right after e in the trend) of types X and Y with ``e.a op e'.b`` false or null.
* Only (group, window) pairs with at least one trend produce a row.

Result values: COUNT and SUM of integer and boolean attributes are exact Python ints; SUM of a
decimal attribute is the exact sum as a ``Decimal`` (an int where it is whole); SUM of a float
attribute is the exact sum rounded once to a float; AVG is an exact ``fractions.Fraction``
(whatever the attribute type); MIN/MAX are the attribute values themselves.
``window_start``/``window_end`` have the kind of the input times: ``datetime`` (naive when the
inputs are naive, then read as UTC), float seconds, or int seconds (a float where a bound is not a
whole number of seconds).
"""

from __future__ import annotations

import itertools
import math
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Context, Decimal, localcontext
from fractions import Fraction
from typing import Any

__all__ = [
    "oracle",
    "count_trends",
    "enumerate_trends",
    "brute_force_trends",
    "parse_pattern",
    "Elem",
    "MAGNITUDE_KEY",
]

#: Key of the per-row dict of sums of absolute terms (for SUM and AVG), present only when
#: ``oracle(..., with_magnitudes=True)``; used to give cancelling float sums an absolute slack.
MAGNITUDE_KEY = "__magnitude__"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True)
class Elem:
    """A pattern element (duck-type compatible with
    ``gpu_hamlet.query.workload.PatternElement``)."""

    type: str
    kleene: bool = False


def parse_pattern(text: str) -> tuple[Elem, ...]:
    """``"SEQ(A, B+, C)"`` or ``"B+"`` -> elements; a small helper for hand-written tests."""
    text = text.strip()
    m = re.fullmatch(r"(?i:SEQ)\s*\((.*)\)", text, flags=re.S)
    items = m.group(1).split(",") if m else [text]
    out = []
    for item in items:
        item = item.strip()
        kleene = item.endswith("+")
        name = item[:-1].strip() if kleene else item
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"bad pattern element {item!r} in {text!r}")
        out.append(Elem(name, kleene))
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Patterns as the oracle's own trees (no engine code): ("T", type, kleene), ("SEQ", parts,
# kleene), ("ALT", options, kleene), ("NOT", type), ("AND", left, right).
# --------------------------------------------------------------------------------------------


def parse_tree(text: str) -> tuple:
    """The whole pattern language (docs/semantics.md section 2) as a tree, by its own small
    recursive descent: ``"SEQ(A, NOT N, (B OR C)+) AND D"``."""
    toks = re.findall(r"[A-Za-z_][A-Za-z0-9_]*|[(),+]", text)
    at = [0]

    def peek() -> str:
        return toks[at[0]] if at[0] < len(toks) else ""

    def take(expected: str | None = None) -> str:
        tok = peek()
        if expected is not None and tok.upper() != expected:
            raise ValueError(f"expected {expected} at {tok!r} in {text!r}")
        at[0] += 1
        return tok

    def alt() -> tuple:
        options = [unit()]
        while peek().upper() == "OR":
            take()
            options.append(unit())
        return options[0] if len(options) == 1 else ("ALT", tuple(options), False)

    def unit() -> tuple:
        tok = take()
        if tok.upper() == "SEQ":
            take("(")
            parts = [part()]
            while peek() == ",":
                take()
                parts.append(part())
            take(")")
            node = ("SEQ", tuple(parts), False)
        elif tok == "(":
            node = alt()
            take(")")
        else:
            node = ("T", tok, False)
        if peek() == "+":
            take()
            node = (node[0], node[1], True)
        return node

    def part() -> tuple:
        if peek().upper() == "NOT":
            take()
            return ("NOT", take())
        return unit()

    left = alt()
    if peek().upper() == "AND":
        take()
        left = ("AND", left, alt())
    if at[0] != len(toks):
        raise ValueError(f"unexpected {peek()!r} in {text!r}")
    return left


def _tree(pattern: Any) -> tuple:
    """A pattern given as text, as a sequence of elements (a flat SEQ), or as the engine's
    pattern objects (read by their fields only) -> the oracle's tree."""
    if isinstance(pattern, str):
        return parse_tree(pattern)
    if isinstance(pattern, tuple | list):
        return ("SEQ", tuple(_tree(e) for e in pattern), False)
    if hasattr(pattern, "left"):
        return ("AND", _tree(pattern.left), _tree(pattern.right))
    if hasattr(pattern, "parts"):
        return ("SEQ", tuple(_tree(p) for p in pattern.parts), pattern.kleene)
    if hasattr(pattern, "options"):
        return ("ALT", tuple(_tree(o) for o in pattern.options), pattern.kleene)
    if not hasattr(pattern, "kleene"):
        return ("NOT", pattern.type)
    return ("T", pattern.type, bool(pattern.kleene))


def _leaves(node: tuple, kind: str) -> set[str]:
    if node[0] == kind:
        return {node[1]}
    if node[0] in ("T", "NOT"):
        return set()
    if node[0] == "AND":
        return _leaves(node[1], kind) | _leaves(node[2], kind)
    return set().union(*(_leaves(c, kind) for c in node[1]))


# --------------------------------------------------------------------------------------------
# Matching one candidate trend by backtracking: `ends(node, i)` is every j such that the node
# matches events i..j-1 of the candidate; `open_(node, i)` whether events i..n-1 begin a match
# (used only to prune the search). A NOT between two parts of a SEQ is checked at the boundary
# between the last event of one and the first of the next. A trend counts once, however many
# ways it matches: a candidate either matches or not.
# --------------------------------------------------------------------------------------------


class _Matcher:
    def __init__(self, tree: tuple, blockers: Sequence[tuple[Any, Any]] = ()) -> None:
        """``tree``: one side of a pattern (``_tree``); ``blockers``: (type, time) of the
        partition's events of negated types that pass their filters."""
        self.tree = tree
        if self.tree[0] == "AND":
            raise ValueError("_Matcher matches one side of an AND at a time")
        self.types = frozenset(_leaves(self.tree, "T"))
        self.blockers = list(blockers)

    def _blocked(self, types: frozenset[str], t0: Any, t1: Any) -> bool:
        return any(b in types and t0 < tb < t1 for b, tb in self.blockers)

    def _run(self, ts: Sequence[Any], tms: Sequence[Any]) -> tuple[Callable, Callable]:
        n = len(ts)
        memo_e: dict = {}
        memo_o: dict = {}

        def ok(nots: frozenset[str], j: int) -> bool:
            """The NOTs between a part ending at j-1 and one starting at j hold."""
            return not nots or j >= n or not self._blocked(nots, tms[j - 1], tms[j])

        def once(node: tuple, i: int) -> frozenset[int]:
            kind = node[0]
            if kind == "T":
                return frozenset((i + 1,)) if i < n and ts[i] == node[1] else frozenset()
            if kind == "ALT":
                return frozenset().union(*(ends(o, i) for o in node[1]))
            cur = frozenset((i,))
            nots: set[str] = set()
            first = True
            for part in node[1]:
                if part[0] == "NOT":
                    nots.add(part[1])
                    continue
                fz = frozenset(nots)
                cur = frozenset(
                    k for j in cur if first or ok(fz, j) for k in ends(part, j) if j < n
                )
                nots, first = set(), False
            return cur

        def ends(node: tuple, i: int) -> frozenset[int]:
            key = (id(node), i)
            if key not in memo_e:
                out = once(node, i)
                if node[-1] is True:  # Kleene plus: more matches of the body, back to back
                    frontier = out
                    while frontier:
                        frontier = frozenset(k for j in frontier for k in once(node, j)) - out
                        out = out | frontier
                memo_e[key] = out
            return memo_e[key]

        def open_once(node: tuple, i: int) -> bool:
            if i >= n:
                return True
            kind = node[0]
            if kind == "T":
                return n - i == 1 and ts[i] == node[1]
            if kind == "ALT":
                return any(open_(o, i) for o in node[1])
            cur = frozenset((i,))
            nots: set[str] = set()
            first = True
            for part in node[1]:
                if part[0] == "NOT":
                    nots.add(part[1])
                    continue
                fz = frozenset(nots)
                live = [j for j in cur if first or ok(fz, j)]
                if any(open_(part, j) for j in live):
                    return True
                cur = frozenset(k for j in live if j < n for k in ends(part, j))
                nots, first = set(), False
            return False

        def open_(node: tuple, i: int) -> bool:
            key = (id(node), i)
            if key not in memo_o:
                if node[-1] is True:  # some run of whole matches, then an open one
                    seen = {i}
                    frontier = {i}
                    found = False
                    while frontier and not found:
                        found = any(open_once(node, j) for j in frontier)
                        frontier = {k for j in frontier if j < n for k in once(node, j)} - seen
                        seen |= frontier
                    memo_o[key] = found
                else:
                    memo_o[key] = open_once(node, i)
            return memo_o[key]

        return ends, open_

    def matches(self, types: Sequence[Any], times: Sequence[Any] | None = None) -> bool:
        """Whether the whole candidate (its types, and times for the NOT checks) matches."""
        if not types:
            return False
        ends, _ = self._run(types, times if times is not None else range(len(types)))
        return len(types) in ends(self.tree, 0)

    def viable(self, types: Sequence[Any], times: Sequence[Any]) -> bool:
        """Whether the candidate begins some match (a later event could complete it)."""
        _, open_ = self._run(types, times)
        return open_(self.tree, 0)


def _matcher(tree: tuple, types: Sequence[Any], times: Sequence[Any]) -> _Matcher:
    """The matcher of one side of a pattern over events whose negated-type ones block."""
    negated = _leaves(tree, "NOT")
    return _Matcher(tree, [(t, tm) for t, tm in zip(types, times) if t in negated])


def _pairs(left: set[tuple[int, ...]], right: set[tuple[int, ...]]) -> int:
    """AND: unordered pairs {t1, t2} of distinct trends, one matching each side."""
    return sum(
        1
        for x, y in itertools.combinations(sorted(left | right), 2)
        if (x in left and y in right) or (y in left and x in right)
    )


def _dfs_trends(
    types: Sequence[Any],
    times: Sequence[Any],
    matcher: _Matcher,
    contrib: Sequence[tuple] | None,
    on_trend: Callable[[tuple[int, ...], tuple], None],
    adjacent: Callable[[int, int], bool] | None = None,
) -> list[bool]:
    """Enumerate the trends over events sorted by time; call ``on_trend(path, acc)`` for each.

    ``contrib[i]`` is a tuple of numbers added component-wise along the path (``acc`` is the sum
    over the trend's events). ``adjacent(i, j)`` says whether event j may come right after event
    i in a trend (the query's NEXT conditions); a path with a pair that may not is no trend.
    Returns, per event, whether it occurs in at least one trend.
    """
    n = len(types)
    assert all(times[i] <= times[i + 1] for i in range(n - 1)), "events must be sorted by time"
    used = [False] * n
    width = len(contrib[0]) if contrib else 0
    path: list[int] = []

    def extend(i: int, acc: tuple) -> bool:
        path.append(i)
        found = False
        ptypes = [types[k] for k in path]
        ptimes = [times[k] for k in path]
        if matcher.matches(ptypes, ptimes):
            on_trend(tuple(path), acc)
            found = True
        ti = times[i]
        for j in range(i + 1, n):
            # strictly later: equal timestamps never follow each other
            if adjacent is not None and not adjacent(i, j):
                continue
            if times[j] > ti and matcher.viable(ptypes + [types[j]], ptimes + [times[j]]):
                nacc = tuple(a + b for a, b in zip(acc, contrib[j])) if width else ()
                if extend(j, nacc):
                    found = True
        path.pop()
        if found:
            used[i] = True
        return found

    for i in range(n):
        if types[i] in matcher.types and matcher.viable([types[i]], [times[i]]):
            extend(i, tuple(contrib[i]) if width else ())
    return used


def enumerate_trends(
    types_and_times: Sequence[tuple[Any, Any]], pattern: Any
) -> list[tuple[int, ...]]:
    """All trends (as tuples of indices into the input) of ``[(type, time), ...]``, no windows.

    The input need not be sorted; indices refer to its order.
    """
    order = sorted(range(len(types_and_times)), key=lambda i: _time_key(types_and_times[i][1]))
    types = [types_and_times[i][0] for i in order]
    times = [_time_key(types_and_times[i][1]) for i in order]
    found: list[tuple[int, ...]] = []
    _dfs_trends(
        types,
        times,
        _matcher(_tree(pattern), types, times),
        None,
        lambda path, acc: found.append(tuple(order[k] for k in path)),
    )
    return found


def count_trends(types_and_times: Sequence[tuple[Any, Any]], pattern: Any) -> int:
    """Number of trends of ``pattern`` (``"SEQ(A, B+)"`` or PatternElements) over ``[(type,
    time)]``."""
    return len(enumerate_trends(types_and_times, pattern))


def brute_force_trends(
    types_and_times: Sequence[tuple[Any, Any]], pattern: Any
) -> list[tuple[int, ...]]:
    """The same as :func:`enumerate_trends` by trying all 2^n subsets (a check of the check)."""
    matcher = _matcher(
        _tree(pattern),
        [t for t, _ in types_and_times],
        [_time_key(tm) for _, tm in types_and_times],
    )
    n = len(types_and_times)
    out = []
    for r in range(1, n + 1):
        for subset in itertools.combinations(range(n), r):
            seq = sorted(subset, key=lambda i: _time_key(types_and_times[i][1]))
            ts = [_time_key(types_and_times[i][1]) for i in seq]
            if any(ts[k] >= ts[k + 1] for k in range(len(ts) - 1)):
                continue
            if matcher.matches([types_and_times[i][0] for i in seq], ts):
                out.append(tuple(seq))
    return out


# --------------------------------------------------------------------------------------------
# Time handling
# --------------------------------------------------------------------------------------------


def _time_key(t: Any) -> Fraction:
    """Exact seconds since the epoch of an int/float/datetime time value."""
    if t is None:
        raise ValueError("oracle: null time")
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        d = t - _EPOCH
        return Fraction(d.days * 86400 + d.seconds) + Fraction(d.microseconds, 10**6)
    if isinstance(t, bool):
        raise TypeError(f"oracle: boolean time {t!r}")
    if isinstance(t, float) and not math.isfinite(t):
        raise ValueError(f"oracle: non-finite time {t!r}")
    return Fraction(t)


def _time_kind(times: Iterable[Any]) -> tuple[str, Any]:
    kind, tz = "int", None
    for t in times:
        if isinstance(t, datetime):
            return "datetime", t.tzinfo
        if isinstance(t, float):
            kind = "float"
    return kind, tz


def _from_seconds(x: Fraction, kind: str, tz: Any) -> Any:
    if kind == "datetime":
        us = x * 10**6
        if us.denominator != 1:
            raise ValueError(f"oracle: window bound {x} s is not a whole number of microseconds")
        d = _EPOCH + timedelta(microseconds=int(us))
        return d.replace(tzinfo=None) if tz is None else d.astimezone(tz)
    if kind == "int" and x.denominator == 1:
        return int(x)
    return float(x)


# --------------------------------------------------------------------------------------------
# The oracle
# --------------------------------------------------------------------------------------------


def _passes(event: dict, filters: Sequence[Any]) -> bool:
    for f in filters:
        v = event.get(f.attr)
        if v is None:
            return False  # SQL: a comparison with null is not true
        if not COMPARISONS[f.op](v, _literal(v, f.value)):
            return False
    return True


def _adjacency(q: Any, sub: list[dict], type_col: str) -> Callable[[int, int], bool] | None:
    """Whether sub[j] may come right after sub[i] in a trend: every NEXT condition
    ``X.a op NEXT(Y).b`` with sub[i] of type X and sub[j] of type Y holds, compared as Python
    compares the values (a null is never adjacent; NaN satisfies only !=)."""
    conds = getattr(q, "next_conditions", ())
    if not conds:
        return None

    def ok(i: int, j: int) -> bool:
        e, f = sub[i], sub[j]
        for c in conds:
            if (c.type, c.next_type) != (e[type_col], f[type_col]):
                continue
            a, b = e.get(c.attr), f.get(c.next_attr)
            if a is None or b is None or not COMPARISONS[c.op](a, b):
                return False
        return True

    return ok


def _literal(v: Any, lit: Any) -> Any:
    """The literal as compared with value ``v``: a float value against the nearest float of the
    number written (Spark's cast to double); any other number against the number written, so a
    float literal stands for its shortest decimal form (0.1 is one tenth)."""
    if isinstance(lit, str) or isinstance(v, str):
        return lit
    if isinstance(v, float):
        return float(Decimal(lit))
    return Decimal(repr(lit)) if isinstance(lit, float) else lit


def _null_last(v: Any) -> tuple:
    """Result order of a GROUPBY value: nulls last, NaN above every number (as Arrow sorts)."""
    nan = isinstance(v, float) and math.isnan(v)
    return (v is None, nan, v if v is not None and not nan else 0)


#: The one NaN of partition keys: a tuple holding it equals another holding it (its items
#: compare by identity first), where NaNs from two events differ; NaN is one group.
_NAN = float("nan")


def _key_value(v: Any) -> Any:
    """A partition key's value as the engine groups it (docs/semantics.md section 8): every
    NaN one value, -0.0 the value 0.0."""
    if isinstance(v, float):
        return _NAN if math.isnan(v) else v + 0.0
    return v


def _query_rows(
    events: list[dict],
    q: Any,
    time_col: str,
    type_col: str,
    kind: str,
    tz: Any,
    float_attrs: set[str],
    with_magnitudes: bool,
) -> list[dict]:
    tree = _tree(q.pattern)
    sides = (tree[1], tree[2]) if tree[0] == "AND" else (tree,)
    pattern_types = _leaves(tree, "T") | _leaves(tree, "NOT")
    w = Fraction(q.within_ms, 1000)
    s = Fraction(q.slide_ms, 1000)
    if w <= 0 or s <= 0:
        raise ValueError(f"oracle: query {q.name}: non-positive WITHIN/SLIDE")
    part_attrs = tuple(q.partition_attrs)
    ngroup = len(q.groupby)

    # Channels summed along a trend: (kind, type, attr) for each aggregate that needs one.
    channels: list[tuple[str, str, str | None]] = []
    for a in q.aggregates:
        if a.type is None:
            continue
        want = [("cnt", a.type, None)]
        if a.func in ("SUM", "AVG"):
            want += [("sum", a.type, a.attr), ("abs", a.type, a.attr), ("nn", a.type, a.attr)]
        for c in want:
            if c not in channels:
                channels.append(c)
    chan_index = {c: i for i, c in enumerate(channels)}

    def contribution(ev: dict) -> tuple:
        out = []
        for kind_, typ, attr in channels:
            if ev[type_col] != typ:
                out.append(0)
            elif kind_ == "cnt":
                out.append(1)
            elif ev[attr] is None:  # SQL: SUM and AVG skip nulls
                out.append(0)
            elif kind_ == "nn":
                out.append(1)
            else:
                v = Fraction(ev[attr])
                out.append(abs(v) if kind_ == "abs" else v)
        return tuple(out)

    # Eligible events, partitioned.
    parts: dict[tuple, list[dict]] = {}
    for ev in events:
        typ = ev[type_col]
        if typ not in pattern_types or not _passes(ev, q.filters_of(typ)):
            continue
        key = tuple(_key_value(ev[a]) for a in part_attrs)
        parts.setdefault(key, []).append(ev)

    # (group key, window k) -> accumulated state
    cells: dict[tuple, dict] = {}
    for key, evs in parts.items():
        evs = sorted(evs, key=lambda e: _time_key(e[time_col]))
        secs = [_time_key(e[time_col]) for e in evs]
        windows = set()
        for t in secs:
            k_lo = math.floor((t - w) / s) + 1
            k_hi = math.floor(t / s)
            windows.update(range(k_lo, k_hi + 1))
        seen: dict[tuple[int, ...], tuple] = {}  # windows holding the same events: same trends
        for k in sorted(windows):
            lo, hi = k * s, k * s + w
            idx = tuple(i for i, t in enumerate(secs) if lo <= t < hi)
            sub = [evs[i] for i in idx]
            if idx not in seen:
                sub_types = [e[type_col] for e in sub]
                sub_times = [secs[i] for i in idx]
                contrib = [contribution(e) for e in sub]
                adjacent = _adjacency(q, sub, type_col)
                trends = [0]
                total = [0] * len(channels)

                def on_trend(path: tuple[int, ...], acc: tuple) -> None:
                    trends[0] += 1
                    for c in range(len(channels)):
                        total[c] += acc[c]

                if len(sides) == 2:  # AND: count pairs (COUNT(*) only)
                    found: list[set[tuple[int, ...]]] = []
                    for side in sides:
                        paths: set[tuple[int, ...]] = set()
                        _dfs_trends(
                            sub_types,
                            sub_times,
                            _matcher(side, sub_types, sub_times),
                            None,
                            lambda path, acc, paths=paths: paths.add(path),
                            adjacent,
                        )
                        found.append(paths)
                    trends[0] = _pairs(found[0], found[1])
                    used = [False] * len(sub)
                else:
                    used = _dfs_trends(
                        sub_types,
                        sub_times,
                        _matcher(tree, sub_types, sub_times),
                        contrib if channels else None,
                        on_trend,
                        adjacent,
                    )
                seen[idx] = (trends, total, used)
            trends, total, used = seen[idx]
            if trends[0] == 0:
                continue
            cell = cells.setdefault(
                (key[:ngroup], k), {"count": 0, "chan": [0] * len(channels), "used": []}
            )
            cell["count"] += trends[0]
            cell["chan"] = [a + b for a, b in zip(cell["chan"], total)]
            cell["used"].extend(e for e, u in zip(sub, used) if u)

    rows = []
    for (gkey, k), cell in cells.items():
        row: dict[str, Any] = {a: v for a, v in zip(q.groupby, gkey)}
        row["window_start"] = _from_seconds(k * s, kind, tz)
        row["window_end"] = _from_seconds(k * s + w, kind, tz)
        mags: dict[str, Any] = {}
        for a in q.aggregates:
            if a.type is None:
                row[a.name] = cell["count"]
                continue
            cnt = cell["chan"][chan_index[("cnt", a.type, None)]]
            if a.func == "COUNT":
                row[a.name] = cnt
            elif a.func in ("SUM", "AVG"):
                tot = cell["chan"][chan_index[("sum", a.type, a.attr)]]
                mag = cell["chan"][chan_index[("abs", a.type, a.attr)]]
                nn = cell["chan"][chan_index[("nn", a.type, a.attr)]]  # non-null occurrences
                if a.func == "SUM":
                    if not nn:
                        row[a.name] = None
                    elif a.attr in float_attrs:
                        row[a.name] = float(tot)
                    elif tot.denominator == 1:  # (integers and booleans; decimals of scale <= 0)
                        row[a.name] = int(tot)
                    else:  # decimals: the exact sum, whose denominator divides 10^scale
                        row[a.name] = _decimal(tot)
                    mags[a.name] = mag
                else:
                    row[a.name] = Fraction(tot) / nn if nn else None
                    mags[a.name] = Fraction(mag) / nn if nn else None
            elif a.func in ("MIN", "MAX"):
                vals = [e[a.attr] for e in cell["used"] if e[type_col] == a.type]
                vals = [v for v in vals if v is not None]
                pick = min if a.func == "MIN" else max
                row[a.name] = pick(vals, key=_min_max_order) if vals else None
            else:
                raise ValueError(f"oracle: unknown aggregate {a.func}")
        if with_magnitudes:
            row[MAGNITUDE_KEY] = mags
        rows.append(row)

    rows.sort(
        key=lambda r: tuple(_null_last(r[a]) for a in q.groupby) + (_time_key(r["window_start"]),)
    )
    return rows


def _decimal(v: Fraction) -> Decimal:
    """A fraction whose denominator d divides a power of ten (a sum of decimals), exactly: n / d
    is n * (10^k / d) / 10^k with 2^k at most d, and 10^k / d at most 5^k: 3 digits per digit
    of d are enough."""
    digits = len(str(abs(v.numerator))) + 3 * len(str(v.denominator))
    with localcontext(Context(prec=digits + 2)):
        out = Decimal(v.numerator) / v.denominator
    assert Fraction(out) == v, f"oracle: {v} is no decimal"
    return out


def _min_max_order(v):
    """MIN and MAX order NaN above every number, as Spark does (docs/semantics.md section 8);
    Python's min and max compare NaN with nothing, so their answer hung on the events' order."""
    nan = isinstance(v, float) and math.isnan(v)
    return (nan, 0.0 if nan else v)


def oracle(
    events: list[dict],
    workload: Any,
    *,
    time_col: str = "time",
    type_col: str = "type",
    with_magnitudes: bool = False,
) -> dict[str, list[dict]]:
    """Ground-truth results of every query of ``workload`` over ``events`` (a list of dicts).

    Returns ``{query name: [row, ...]}``; each row is a dict with the GROUPBY attributes,
    ``window_start``, ``window_end`` and one entry per aggregate name, rows sorted by (group
    values, window_start). With ``with_magnitudes=True`` each row also holds
    ``row[MAGNITUDE_KEY] = {aggregate name: sum of |terms|}`` for SUM (and that sum divided by
    COUNT(E) for AVG), the scale of the rounding error a float computation may make.
    """
    events = list(events)
    for ev in events:
        if ev.get(time_col) is None:
            raise ValueError(f"oracle: event without a time: {ev!r}")
        if ev.get(type_col) is None:
            raise ValueError(f"oracle: event without a type: {ev!r}")
    kind, tz = _time_kind(ev[time_col] for ev in events)
    float_attrs = {a for ev in events for a, v in ev.items() if isinstance(v, float)}
    return {
        q.name: _query_rows(events, q, time_col, type_col, kind, tz, float_attrs, with_magnitudes)
        for q in workload
    }

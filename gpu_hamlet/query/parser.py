"""Parser of the workload language (docs/semantics.md): text in, `Workload` out.

A hand-written tokenizer and recursive-descent parser: the grammar is small, and writing it by hand
keeps the project free of a parser-generator dependency and lets every error name the query, the
line and column of the offending token, the token itself and what was expected there.

Every error is a `WorkloadError`. Semantic checks (names, types, windows, output columns) run as
soon as a query has been read, so a fault in an earlier query is reported before any in a later
one; within a query the checks run in a fixed order (`_check`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, fields, replace
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from typing import NoReturn

from gpu_hamlet.errors import WorkloadError
from gpu_hamlet.names import AND_SIDES, IDENT_RE, RESERVED, and_run_name, quoted
from gpu_hamlet.query.automaton import can_follow
from gpu_hamlet.query.pattern import Alt, And, Not, Pattern, PatternElement, Positive, Seq, show
from gpu_hamlet.query.workload import (
    AGGREGATE_FUNCS,
    COMPARISON_OPS,
    Aggregate,
    Filter,
    Literal,
    NextCondition,
    Query,
    Workload,
    format_ms,
)

__all__ = ["parse_workload"]

_MS_PER_SECOND = 1000
#: Time units, lower case, to milliseconds.
UNITS_MS: dict[str, int] = {
    **dict.fromkeys(("ms", "msec", "msecs", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), _MS_PER_SECOND),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), 60 * _MS_PER_SECOND),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600 * _MS_PER_SECOND),
    **dict.fromkeys(("d", "day", "days"), 86400 * _MS_PER_SECOND),
}

#: The longest duration any time column holds is below 10^LONGEST_MS ms: float64 seconds end at
#: 1.8e308 s (int64 ticks end far earlier, checked against the column: TimeAxis.ticks). Longer
#: ones are refused as they are read, before they become integers of a million digits.
LONGEST_MS = 320

#: Output columns every result table has besides GROUPBY columns and aggregates.
WINDOW_COLUMNS: tuple[str, str] = ("window_start", "window_end")


# --------------------------------------------------------------------------------------------------
# Tokens


class Kind(Enum):
    IDENT = "identifier"  # plain [A-Za-z_][A-Za-z0-9_]*: a name, or a keyword where one fits
    QUOTED = "quoted name"  # `backtick quoted`: always a name, never a keyword
    NUMBER = "number"
    STRING = "string"
    SYMBOL = "symbol"
    ERROR = "error"  # a lexical fault, raised when the parser reaches it (so it knows the query)
    END = "end of text"


@dataclass(frozen=True)
class Token:
    """One token: `value` is normalised (unquoted name, unescaped string, canonical operator),
    `text` is the raw source (shown in messages), `start`/`end` are offsets into the source."""

    kind: Kind
    value: str
    text: str
    line: int
    column: int
    start: int
    end: int

    def is_symbol(self, symbol: str) -> bool:
        return self.kind is Kind.SYMBOL and self.value == symbol

    def is_keyword(self, keyword: str) -> bool:
        return self.kind is Kind.IDENT and self.value.upper() == keyword

    def describe(self) -> str:
        return "end of text" if self.kind is Kind.END else repr(self.text)


_NUMBER_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
#: Alternative spellings accepted for operators, mapped to the canonical one.
# fmt: off
_SYMBOLS: dict[str, str] = {
    "<=": "<=", ">=": ">=", "!=": "!=", "<>": "!=", "==": "=",
    "(": "(", ")": ")", ",": ",", ";": ";", ":": ":", ".": ".", "+": "+", "*": "*",
    "[": "[", "]": "]", "=": "=", "<": "<", ">": ">",
}
# fmt: on
_STRING_ESCAPES: dict[str, str] = {"n": "\n", "t": "\t", "r": "\r"}


def _scan_string(text: str, i: int) -> tuple[str, int] | None:
    """Scan a '...' or "..." literal starting at i; return (value, end) or None if unterminated.

    A doubled quote or a backslash escapes the quote; `\\n`, `\\t`, `\\r`, `\\\\` and a backslash
    before either quote are the usual escapes; any other backslash is kept as is, so Windows
    paths need no doubling.
    """
    quote, j, out = text[i], i + 1, []
    while j < len(text):
        ch = text[j]
        if ch == "\\" and j + 1 < len(text):
            nxt = text[j + 1]
            if nxt in (quote, "\\", "'", '"'):
                out.append(nxt)
            else:
                out.append(_STRING_ESCAPES.get(nxt, "\\" + nxt))
            j += 2
        elif ch == quote:
            if text.startswith(quote, j + 1):
                out.append(quote)
                j += 2
            else:
                return "".join(out), j + 1
        else:
            out.append(ch)
            j += 1
    return None


def _scan_quoted_name(text: str, i: int) -> tuple[str, int] | None:
    """Scan a `backtick name` (a doubled backtick stands for one); None if unterminated."""
    j, out = i + 1, []
    while j < len(text):
        if text[j] == "`":
            if text.startswith("`", j + 1):
                out.append("`")
                j += 2
                continue
            return "".join(out), j + 1
        out.append(text[j])
        j += 1
    return None


def tokenize(text: str) -> list[Token]:
    """Split `text` into tokens, ending with an END token.

    Never raises: a lexical fault becomes a final ERROR token, so that the parser reports it with
    the name of the query it is in.
    """
    tokens: list[Token] = []
    i, line, line_start, n = 0, 1, 0, len(text)

    def make(kind: Kind, value: str, end: int) -> Token:
        return Token(kind, value, text[i:end], line, i - line_start + 1, i, end)

    while i < n:
        ch = text[i]
        if ch == "\n":
            i, line, line_start = i + 1, line + 1, i + 1
            continue
        if ch in " \t\r":  # (with \n: the separators the language has, docs/semantics.md 4)
            i += 1
            continue
        if text.startswith("--", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline
            continue
        if m := IDENT_RE.match(text, i):
            tok = make(Kind.IDENT, m.group(), m.end())
        elif m := _NUMBER_RE.match(text, i):
            tok = make(Kind.NUMBER, m.group(), m.end())
        elif ch in "'\"":
            scanned = _scan_string(text, i)
            if scanned is None:
                snippet = text[i : i + 20] + ("..." if n - i > 20 else "")
                tokens.append(make(Kind.ERROR, f"unterminated string literal {snippet!r}", n))
                break
            tok = make(Kind.STRING, scanned[0], scanned[1])
        elif ch == "`":
            scanned = _scan_quoted_name(text, i)
            if scanned is None:
                snippet = text[i : i + 20] + ("..." if n - i > 20 else "")
                tokens.append(make(Kind.ERROR, f"unterminated quoted name {snippet!r}", n))
                break
            if not scanned[0]:
                tokens.append(make(Kind.ERROR, "empty quoted name '``'", scanned[1]))
                break
            tok = make(Kind.QUOTED, scanned[0], scanned[1])
        elif (sym := text[i : i + 2]) in _SYMBOLS or (sym := ch) in _SYMBOLS:
            tok = make(Kind.SYMBOL, _SYMBOLS[sym], i + len(sym))
        else:
            other = " (a space other than space, tab or newline)" if ch.isspace() else ""
            tokens.append(make(Kind.ERROR, f"unexpected character {ch!r}{other}", i + 1))
            break
        tokens.append(tok)
        # Strings and quoted names may span lines: keep line/column right after them.
        newlines = text.count("\n", tok.start, tok.end)
        if newlines:
            line += newlines
            line_start = text.rfind("\n", tok.start, tok.end) + 1
        i = tok.end
    end_line = text.count("\n") + 1
    end_col = n - (text.rfind("\n") + 1) + 1
    tokens.append(Token(Kind.END, "", "", end_line, end_col, n, n))
    return tokens


# --------------------------------------------------------------------------------------------------
# Parser


def _join_alternatives(labels: list[str]) -> str:
    unique = list(dict.fromkeys(labels))
    if len(unique) <= 1:
        return "".join(unique)
    return ", ".join(unique[:-1]) + " or " + unique[-1]


class _Parser:
    """Recursive descent over the token list, one method per grammar rule.

    `_expected` collects what was tried and not found at the current token (optional clauses,
    separators), so that an error lists every alternative, the required one first.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0
        self.query_name: str | None = None
        self._expected: list[str] = []

    # ---- token access -----------------------------------------------------------------------

    def _peek(self, ahead: int = 0) -> Token:
        tok = self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]
        if tok.kind is Kind.ERROR:
            raise self._error(tok.value, tok)
        return tok

    def _advance(self) -> Token:
        tok = self._peek()
        self.pos += 1
        self._expected = []
        return tok

    def _error(self, message: str, tok: Token | None = None) -> WorkloadError:
        if tok is None:
            return WorkloadError(message, query=self.query_name)
        return WorkloadError(message, query=self.query_name, line=tok.line, column=tok.column)

    def _fail(self, required: str | None = None, hint: str = "") -> NoReturn:
        """Raise 'expected ..., found ...' at the current token."""
        labels = ([required] if required else []) + self._expected
        tok = self._peek()
        raise self._error(
            f"expected {_join_alternatives(labels)}, found {tok.describe()}{hint}", tok
        )

    def _accept_keyword(self, keyword: str) -> Token | None:
        if self._peek().is_keyword(keyword):
            return self._advance()
        self._expected.append(keyword)
        return None

    def _expect_keyword(self, keyword: str) -> Token:
        return self._accept_keyword(keyword) or self._fail(keyword)

    def _accept_symbol(self, symbol: str) -> Token | None:
        if self._peek().is_symbol(symbol):
            return self._advance()
        self._expected.append(repr(symbol))
        return None

    def _expect_symbol(self, symbol: str) -> Token:
        return self._accept_symbol(symbol) or self._fail(repr(symbol))

    def _is_name(self, tok: Token) -> bool:
        return tok.kind is Kind.QUOTED or (
            tok.kind is Kind.IDENT and tok.value.upper() not in RESERVED
        )

    def _name(self, label: str) -> Token:
        """A type, attribute, alias or query name: an unreserved identifier or a `quoted name`."""
        tok = self._peek()
        if self._is_name(tok):
            return self._advance()
        hint = ""
        if tok.kind is Kind.IDENT:
            hint = f" ({tok.value.upper()} is a keyword: write `{tok.value}` to use it as a name)"
        self._fail(label, hint)

    def _attribute(self) -> Token:
        """The attribute after `TYPE.`: here any identifier is a name, keywords included."""
        if self._peek().kind in (Kind.IDENT, Kind.QUOTED):
            return self._advance()
        self._fail("an attribute name")

    # ---- grammar ----------------------------------------------------------------------------

    def workload(self) -> Workload:
        self.query_name = "q1"  # a lexical fault before anything else is in the first query
        if self._peek().kind is Kind.END:
            raise WorkloadError("empty workload: the text holds no query")
        queries: list[Query] = []
        seen_names: dict[str, tuple[int, bool]] = {}  # name -> (1-based position, explicit)
        starts: dict[str, Token] = {}
        while True:
            position = len(queries) + 1
            start = self._peek()
            try:
                query, explicit = self.query(position)
            except RecursionError:  # (hundreds of nested SEQ( or parentheses)
                raise self._error("the query nests too deeply to parse", start) from None
            if query.name in seen_names:
                other, other_explicit = seen_names[query.name]
                hint = ""
                if not (explicit and other_explicit):
                    hint = " (unnamed queries are named q1, q2, ... by position)"
                raise self._error(
                    f"duplicate query name {query.name!r}: query {other} has it too{hint}", start
                )
            seen_names[query.name] = (position, explicit)
            starts[query.name] = start
            queries.append(query)
            if self._accept_symbol(";"):
                self.query_name = f"q{position + 1}"  # (a lexical fault next is the next one's)
                if self._peek().kind is Kind.END:
                    break
                continue
            if self._peek().kind is Kind.END:
                break
            self._expected.append("end of text")
            self._fail()
        for q in queries:  # an AND runs as counts named after it (gpu_hamlet/engine/conjunction.py)
            if not isinstance(q.pattern, And):
                continue
            for name in (and_run_name(q.name, s) for s in AND_SIDES):
                if name in starts:
                    self.query_name = name
                    raise self._error(
                        f"query name {name!r} is the name of a count that the AND query "
                        f"{q.name!r} runs as: rename the query",
                        starts[name],
                    )
        return Workload(tuple(queries))

    def query(self, position: int) -> tuple[Query, bool]:
        """One query; returns it and whether its name was explicit."""
        self.query_name = f"q{position}"
        start = self._peek()
        explicit = self._is_name(start) and self._peek(1).is_symbol(":")
        if explicit:
            self.query_name = self._advance().value
            self._advance()
        return_tok = self._expect_keyword("RETURN")
        items = [self.item()]
        while self._accept_symbol(","):
            items.append(self.item())
        self._expect_keyword("PATTERN")
        pattern = self.pattern()
        filters: list[tuple[Filter, Token]] = []
        nexts: list[tuple[NextCondition, Token]] = []
        equivalence: list[str] = []
        if self._accept_keyword("WHERE"):
            self.condition(filters, nexts, equivalence)
            while self._accept_keyword("AND"):
                self.condition(filters, nexts, equivalence)
        groupby: list[Token] = []
        if self._accept_groupby():
            groupby.append(self._name("an attribute name"))
            while self._accept_symbol(","):
                groupby.append(self._name("an attribute name"))
        window_tok = self._expect_keyword("WITHIN")
        within_tok, within = self.duration("WITHIN")
        slide_tok, slide = within_tok, within
        if self._accept_keyword("SLIDE"):
            slide_tok, slide = self.duration("SLIDE")
        end = self.tokens[self.pos - 1].end

        query = Query(
            name=self.query_name,
            pattern=pattern,
            aggregates=tuple(a for a, _ in items if isinstance(a, Aggregate)),
            group_items=tuple(a for a, _ in items if isinstance(a, str)),
            filters=tuple(f for f, _ in filters),
            next_conditions=tuple(dict.fromkeys(c for c, _ in nexts)),
            equivalence=tuple(equivalence),
            groupby=tuple(t.value for t in groupby),
            within_ms=within,
            slide_ms=slide,
            text=self.text[start.start : end].strip(),
            window_text=" ".join(self.text[window_tok.start : end].split()),
        )
        self._check(query, return_tok, items, filters, groupby, slide_tok)
        self._check_next(query, nexts)
        return query, explicit

    def _accept_groupby(self) -> bool:
        """`GROUPBY` or `GROUP BY`."""
        if self._accept_keyword("GROUPBY"):
            return True
        if self._peek().is_keyword("GROUP"):
            self._advance()
            self._expect_keyword("BY")
            return True
        return False

    def item(self) -> tuple[Aggregate | str, Token]:
        """A RETURN item: an aggregate (with optional alias) or a bare GROUPBY attribute."""
        tok = self._peek()
        if tok.kind is Kind.IDENT and self._peek(1).is_symbol("("):
            func = tok.value.upper()
            if func not in AGGREGATE_FUNCS:
                raise self._error(
                    f"unknown aggregate function {tok.text!r} "
                    f"(expected {_join_alternatives(list(AGGREGATE_FUNCS))})",
                    tok,
                )
            self._advance()
            self._advance()
            if func == "COUNT" and self._accept_symbol("*"):
                type_, attr = None, None
            else:
                type_ = self._name("an event type").value
                if func == "COUNT":
                    attr = None
                    if self._peek().is_symbol("."):
                        raise self._error(
                            "COUNT takes '*' or an event type, not an attribute, "
                            f"found {self._peek().describe()}",
                            self._peek(),
                        )
                else:
                    self._expect_symbol(".")
                    attr = self._attribute().value
            self._expect_symbol(")")
            agg = Aggregate(func, type_, attr, "")
            name = agg.default_name
            if self._accept_keyword("AS"):
                name = self._name("an alias").value
            return Aggregate(func, type_, attr, name), tok
        if self._is_name(tok):
            return self._advance().value, tok
        self._fail("an aggregate or a GROUPBY attribute")

    def pattern(self) -> Pattern:
        """`alt ['AND' alt]`: AND joins two whole patterns, at the top level only."""
        left = self.alt()
        if not self._accept_keyword("AND"):
            return left
        right = self.alt()
        tok = self._peek()
        if tok.is_keyword("AND"):
            raise self._error("a pattern has at most one AND (P1 AND P2, at the top level)", tok)
        return And(left, right)

    def alt(self) -> Positive:
        """`unit ('OR' unit)*`."""
        options = [self.unit()]
        while self._accept_keyword("OR"):
            options.append(self.unit())
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def unit(self) -> Positive:
        """`SEQ(part, ...)`, a type or `(alt)`, optionally under Kleene plus. A SEQ of one part
        is that part."""
        tok = self._peek()
        node: Positive
        if tok.is_keyword("SEQ"):
            self._advance()
            self._expect_symbol("(")
            parts = [self.part()]
            while self._accept_symbol(","):
                parts.append(self.part())
            self._expect_symbol(")")
            for i, (part, part_tok) in enumerate(parts):
                if isinstance(part, Not) and i in (0, len(parts) - 1):
                    where = "first" if i == 0 else "last"
                    raise self._error(
                        f"{part} is {where} in its SEQ: a negation stands between two positive "
                        "parts of a SEQ",
                        part_tok,
                    )
            nodes = tuple(p for p, _ in parts)
            only = nodes[0]
            node = only if len(nodes) == 1 and not isinstance(only, Not) else Seq(nodes)
        elif tok.is_symbol("("):
            self._advance()
            node = self.alt()
            if self._peek().is_keyword("AND"):
                raise self._error(
                    "AND joins two whole patterns at the top level only, not inside parentheses",
                    self._peek(),
                )
            self._expect_symbol(")")
        elif tok.is_keyword("NOT"):
            raise self._error(
                "NOT stands only between two positive parts of a SEQ, as in SEQ(A, NOT N, B)", tok
            )
        else:
            node = PatternElement(self._name("an event type").value)
        if self._accept_symbol("+"):
            node = replace(node, kleene=True)
        return node

    def part(self) -> tuple[Positive | Not, Token]:
        """A SEQ part: a unit, or `NOT TYPE`."""
        tok = self._peek()
        if not tok.is_keyword("NOT"):
            return self.unit(), tok
        self._advance()
        what = self._peek()
        if not self._is_name(what):
            raise self._error(f"NOT takes one event type, found {what.describe()}", what)
        name = self._advance()
        if self._peek().is_symbol("+"):
            raise self._error(
                f"NOT takes one event type, not a Kleene plus: write NOT {name.value}",
                self._peek(),
            )
        return Not(name.value), tok

    def condition(
        self,
        filters: list[tuple[Filter, Token]],
        nexts: list[tuple[NextCondition, Token]],
        equivalence: list[str],
    ) -> None:
        """`[a, b]` (merged into `equivalence`), `TYPE.attr op literal` (added to `filters`) or
        `TYPE.attr op NEXT(TYPE).attr` (added to `nexts`)."""
        if self._accept_symbol("["):
            names = [self._name("an attribute name")]
            while self._accept_symbol(","):
                names.append(self._name("an attribute name"))
            self._expect_symbol("]")
            equivalence.extend(t.value for t in names if t.value not in equivalence)
            return
        type_tok = self._name("an event type")
        self._expect_symbol(".")
        attr = self._attribute().value
        op_tok = self._peek()
        if not (op_tok.kind is Kind.SYMBOL and op_tok.value in COMPARISON_OPS):
            self._fail("a comparison operator (" + ", ".join(COMPARISON_OPS) + ")")
        self._advance()
        if self._accept_keyword("NEXT"):
            self._expect_symbol("(")
            next_type = self._name("an event type").value
            self._expect_symbol(")")
            self._expect_symbol(".")
            cond = NextCondition(
                type_tok.value, attr, op_tok.value, next_type, self._attribute().value
            )
            nexts.append((cond, type_tok))
            return
        filters.append((Filter(type_tok.value, attr, op_tok.value, self.literal()), type_tok))

    def literal(self) -> Literal:
        tok = self._peek()
        if tok.kind is Kind.STRING:
            return self._advance().value
        if tok.kind is Kind.NUMBER:
            self._advance()
            if "." not in tok.value and "e" not in tok.value.lower():
                # (Python reads no integer of more than 4300 digits: a Decimal holds it)
                return int(tok.value) if len(tok.value) <= 4000 else Decimal(tok.value)
            # A float only when it holds the number written (its shortest form reads back as
            # it): `x < 9007199254740993.5` must not become `x < 9007199254740994`.
            as_float = float(tok.value)
            return as_float if Decimal(repr(as_float)) == Decimal(tok.value) else Decimal(tok.value)
        self._fail("a number or a string literal")

    def duration(self, clause: str) -> tuple[Token, int]:
        """NUMBER unit, as whole milliseconds; must be positive."""
        num_tok = self._peek()
        if num_tok.kind is not Kind.NUMBER:
            self._fail("a number")
        self._advance()
        unit_tok = self._peek()
        if unit_tok.kind is not Kind.IDENT or unit_tok.value.lower() not in UNITS_MS:
            self._fail("a time unit (ms, s, min, h, d)")
        self._advance()
        value, unit = Decimal(num_tok.value), UNITS_MS[unit_tok.value.lower()]
        shown = f"{num_tok.text} {unit_tok.text}"
        size = value.adjusted() + len(str(unit))  # |value * unit| < 10^size
        if not value.is_zero() and size > LONGEST_MS:
            raise self._error(
                f"{clause} {shown} is longer than any time column holds (10^{LONGEST_MS} ms)",
                num_tok,
            )
        # In whole numbers (Decimal's default context rounds to 28 digits): below one ms, not
        # whole unless zero.
        exact = Fraction(value) * unit if size > 0 or value.is_zero() else Fraction(1, 2)
        if exact.denominator != 1:
            raise self._error(f"{clause} {shown} is not a whole number of milliseconds", num_tok)
        if exact <= 0:
            raise self._error(f"{clause} must be a positive duration, found {shown!r}", num_tok)
        return num_tok, int(exact)

    # ---- semantic checks --------------------------------------------------------------------

    def _check(
        self,
        query: Query,
        return_tok: Token,
        items: list[tuple[Aggregate | str, Token]],
        filters: list[tuple[Filter, Token]],
        groupby: list[Token],
        slide_tok: Token,
    ) -> None:
        """The checks that need the whole query, each raised at the token at fault."""
        seen_types = set(query.types)
        shown_pattern = query.pattern_text
        for item, tok in items:
            if (
                isinstance(item, Aggregate)
                and item.type is not None
                and item.type not in seen_types
            ):
                negated = item.type in query.negated_types
                raise self._error(
                    f"{item} uses event type {item.type!r}, which is "
                    + ("only negated" if negated else "not")
                    + f" in the pattern {shown_pattern}"
                    + (" (aggregates read the events of trends)" if negated else ""),
                    tok,
                )
        if isinstance(query.pattern, And):
            for item, tok in items:
                if isinstance(item, Aggregate) and item.type is not None:
                    raise self._error(
                        f"{item} over {shown_pattern}: a conjunction (AND) defines only COUNT(*)",
                        tok,
                    )
            # An AND runs as counts grouped by its whole partition (gpu_hamlet/engine/
            # conjunction.py), whose tables have window columns beside the partition's.
            for attr in query.equivalence:
                if attr in WINDOW_COLUMNS:
                    raise self._error(
                        f"equivalence attribute {attr!r} of a conjunction (AND) clashes with the "
                        f"window column {attr!r} of the counts it runs as, grouped by its "
                        "equivalence attributes: rename the column",
                        return_tok,
                    )
        for filt, tok in filters:
            if filt.type not in seen_types and filt.type not in query.negated_types:
                raise self._error(
                    f"filter {filt} uses event type {filt.type!r}, "
                    f"which is not in the pattern {shown_pattern}",
                    tok,
                )
        columns: dict[str, str] = {}  # output column -> what produces it
        for tok in groupby:
            if tok.value in WINDOW_COLUMNS:
                raise self._error(
                    f"GROUPBY attribute {tok.value!r} clashes with the output window column "
                    f"{tok.value!r}",
                    tok,
                )
            if tok.value in columns:
                raise self._error(f"attribute {tok.value!r} appears twice in GROUPBY", tok)
            columns[tok.value] = f"the GROUPBY column {tok.value!r}"
        columns.update({c: f"the window column {c!r}" for c in WINDOW_COLUMNS})
        bare_seen: set[str] = set()
        for item, tok in items:
            if isinstance(item, str):
                if item not in query.groupby:
                    raise self._error(
                        f"RETURN names {item!r}, which is not a GROUPBY attribute "
                        "(a bare RETURN name must be grouped)",
                        tok,
                    )
                if item in bare_seen:
                    raise self._error(f"output column {item!r} appears twice in RETURN", tok)
                bare_seen.add(item)
                continue
            if item.name in columns:
                raise self._error(
                    f"output column {item.name!r} of {item} clashes with {columns[item.name]}: "
                    "output column names must be unique (rename with AS)",
                    tok,
                )
            columns[item.name] = f"the column {item.name!r} of {item}"
        if query.slide_ms > query.within_ms:
            raise self._error(
                f"SLIDE {format_ms(query.slide_ms)} is longer than WITHIN "
                f"{format_ms(query.within_ms)}: as in Spark's window(), the slide duration must "
                "be less than or equal to the window duration",
                slide_tok,
            )

    def _check_next(self, query: Query, nexts: list[tuple[NextCondition, Token]]) -> None:
        """Each NEXT condition relates two trend types that can be adjacent in a trend, and each
        pair of types has at most one ordering condition (docs/semantics.md section 2)."""
        shown = query.pattern_text
        ordering: dict[tuple[str, str], NextCondition] = {}
        for cond, tok in nexts:
            for t in (cond.type, cond.next_type):
                if t not in query.types:
                    negated = t in query.negated_types
                    raise self._error(
                        f"{cond} uses event type {t!r}, which is "
                        + ("only negated" if negated else "not")
                        + f" in the pattern {shown}",
                        tok,
                    )
            if not can_follow(query.pattern, cond.type, cond.next_type):
                raise self._error(
                    f"{cond}: in a trend of the pattern {shown}, no event of type "
                    f"{quoted(cond.next_type)} comes right after one of type {quoted(cond.type)}",
                    tok,
                )
            if cond.op != "=":
                other = ordering.setdefault((cond.type, cond.next_type), cond)
                if other != cond:
                    raise self._error(
                        f"{cond} and {other} both compare an event of type {quoted(cond.type)} "
                        f"with the {quoted(cond.next_type)} event after it by order: at most one "
                        "condition with <, <=, >, >= or != per pair of types (any number with =)",
                        tok,
                    )


def parse_workload(text: str) -> Workload:
    """Parse a workload (queries separated by ';') into its plain description.

    Raises `WorkloadError` naming the query and, for syntax errors, the line and column.
    """
    if not isinstance(text, str):
        raise TypeError(
            f"parse_workload expects the workload text as str, got {type(text).__name__}"
        )
    return _parsed(text)


def as_workload(workload: Workload | str) -> Workload:
    """A workload given as text or parsed already (what the APIs take), parsed; anything else is
    parse_workload's TypeError. A Workload object passes the parser's checks too (`checked`)."""
    return checked(workload) if isinstance(workload, Workload) else parse_workload(workload)


def checked(workload: Workload) -> Workload:
    """`workload` after the parser's checks: its text (`query_text`) must read back as these
    very queries. A Workload built by hand (the classes are public) was run unchecked: an
    aggregate `MEDIAN` read as SUM, a window of 0 ms divided by zero, two queries of one name
    gave one table."""
    for q in workload:
        if not isinstance(q, Query):
            raise TypeError(f"a Workload holds Query objects, not {type(q).__name__}")
    try:
        hash(workload)  # (`_check` is cached by it)
    except TypeError:
        for q in workload:
            for f in fields(Query):
                try:
                    hash(getattr(q, f.name))
                except TypeError:
                    raise WorkloadError(
                        f"the Query object's {f.name} is a {type(getattr(q, f.name)).__name__}, "
                        f"which the language cannot have built (build queries with "
                        f"parse_workload)",
                        query=q.name,
                    ) from None
        raise
    _check(workload)
    return workload  # (not an equal one: queries spelled apart keep their own text)


@functools.lru_cache(maxsize=128)
def _check(workload: Workload) -> None:
    """`checked`'s work, once per workload: the engine's own calls pass it again and again."""
    texts = [query_text(q) for q in workload]
    try:
        read = parse_workload(";\n".join(texts)) if texts else workload
    except WorkloadError as exc:
        exc.add_note(f"(the Workload object, as the language reads it: {'; '.join(texts)})")
        raise
    for q, r, text in zip(workload, read, texts):
        differ = [  # (of another type, as 1000.0 ms for 1000: equal, but no int)
            f.name
            for f in fields(Query)
            if f.compare
            and (
                getattr(r, f.name) != getattr(q, f.name)
                or type(getattr(r, f.name)) is not type(getattr(q, f.name))
            )
        ]
        if differ:
            raise WorkloadError(
                f"the Query object's {', '.join(differ)} is not what its text reads as: {text} "
                f"(build queries with parse_workload)",
                query=q.name,
            )


def query_text(q: Query) -> str:
    """The query in the language, as `parse_workload` reads it back (names quoted where they
    need it, windows in milliseconds)."""
    items = [quoted(g) for g in q.group_items] + [
        str(a) + ("" if a.name == a.default_name else f" AS {quoted(a.name)}") for a in q.aggregates
    ]
    where = [
        f"{quoted(f.type)}.{quoted(f.attr, True)} {f.op} {_literal_text(f.value)}"
        for f in q.filters
    ] + [str(c) for c in q.next_conditions]
    if q.equivalence:
        where.append("[" + ", ".join(map(quoted, q.equivalence)) + "]")
    text = f"{quoted(q.name)}: RETURN {', '.join(items)} PATTERN {show(q.pattern)}"
    if where:
        text += " WHERE " + " AND ".join(where)
    if q.groupby:
        text += " GROUPBY " + ", ".join(map(quoted, q.groupby))
    return text + f" WITHIN {q.within_ms} ms SLIDE {q.slide_ms} ms"


def _literal_text(value: Literal) -> str:
    """A filter's literal as the language reads it back: a string quoted (a quote doubled, a
    backslash escaped), a number as written by Python (a float by its shortest form)."""
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
    return str(value) if isinstance(value, Decimal) else repr(value)


@functools.lru_cache(maxsize=128)
def _parsed(text: str) -> Workload:
    """Parsed once per text: a Workload is immutable, and callers that pass the text on every
    call (many small `aggregate` calls, one per Spark task) would parse it again each time
    (docs/architecture.md section 4)."""
    return _Parser(text).workload()

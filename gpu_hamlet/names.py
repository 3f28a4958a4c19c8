"""Names in the workload language: which words are plain names, and a name spelled back so that
it reads as one (docs/semantics.md section 2).

Messages, `explain` and the keys of GLORIA's pools spell patterns back as text; a type such as
`` `B, C` `` written bare would read as two types there, and two different transitions could
get one key. A leaf module: error messages quote query names with it too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Words that cannot be an unquoted name (type, attribute, alias, query name), because they would
#: make the grammar ambiguous; backticks (`` `Return` ``) make any of them a name. Aggregate
#: function names and time units are not reserved: they are keywords only where the grammar expects
#: them (before '(' in RETURN, after a duration's number), so `min` or `day` stay usable attributes.
#: After `TYPE.` every identifier is an attribute, so `SUM(Stock.return)` needs no backticks.
RESERVED: frozenset[str] = frozenset(
    {
        "RETURN",
        "PATTERN",
        "WHERE",
        "GROUPBY",
        "WITHIN",
        "SLIDE",
        "AND",
        "AS",
        "SEQ",
        "NOT",
        "OR",
        "NEXT",
    }
)

#: A plain identifier: a name, or a keyword where one fits.
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def quoted(name: str, attribute: bool = False) -> str:
    """`name` as the language reads it back: bare when it is a plain identifier that is no
    reserved word (any identifier for an `attribute` after `TYPE.`), else in backticks with a
    backtick doubled."""
    if IDENT_RE.fullmatch(name) and (attribute or name.upper() not in RESERVED):
        return name
    return "`" + name.replace("`", "``") + "`"


#: The three counts an AND query runs as (gpu_hamlet/engine/conjunction.py), in order.
AND_SIDES = ("left", "right", "both")


def and_run_name(query: str, side: str) -> str:
    """The name of the count of `side` that the AND query `query` runs as; no other query of
    its workload may have it (the parser refuses one that does)."""
    return f"{query}[{side}]"


#: The suffix of the run that queries alike but for their RETURN aggregates run as
#: (engine/conjunction.py `run_as`).
TOGETHER = "return"


def together_run_name(query: str) -> str:
    """The name of the run that `query` and the queries alike but for their RETURN aggregates
    after it run as, with every aggregate of theirs; used only where no query has it."""
    return f"{query}[{TOGETHER}]"


def shown(name: str) -> str:
    """A query's name, a count an AND runs as (`` `my q`[left] ``), or the run of queries alike
    but for RETURN (`` `my q`[return] ``), as `explain` and the sharing stats show it."""
    for side in (*AND_SIDES, TOGETHER):
        suffix = f"[{side}]"
        if name.endswith(suffix) and len(name) > len(suffix):
            return quoted(name[: -len(suffix)]) + suffix
    return quoted(name)


def quoted_list(names: Iterable[str]) -> str:
    """Names separated by commas, each `shown`."""
    return ", ".join(shown(n) for n in names)

"""The options of a run (docs/semantics.md section 13), checked once where a public entry point
(`aggregate`, `trend_aggregate`, the command line) receives them; everything inside takes the
checked `Options`. Plain data, so Spark ships it to its tasks."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_hamlet.engine.backend import BACKEND_NAMES, Backend, check_backend

NUMERIC_MODES = ("exact", "bigint", "float")
OVERFLOW_MODES = ("error", "null")
#: `hamlet` is HAMLET's Kleene-burst sharing alone, for comparison with `dynamic`, which adds
#: GLORIA's shared SEQ transitions and Kleene cycles (docs/architecture.md section 10).
SHARING_MODES = ("dynamic", "static", "none", "hamlet")


@dataclass(frozen=True)
class Options:
    """How a workload runs: the backend (a name, or a Backend object), burst sharing, the
    numeric mode and what an overflow gives, and the names of the time and type columns. A bad
    value is a ValueError on construction."""

    backend: str | Backend = "auto"
    sharing: str = "dynamic"
    numeric: str = "exact"
    on_overflow: str = "error"
    time_col: str = "time"
    type_col: str = "type"

    def __post_init__(self) -> None:
        _check("on_overflow", self.on_overflow, OVERFLOW_MODES)
        _check("sharing", self.sharing, SHARING_MODES)
        _check("numeric", self.numeric, NUMERIC_MODES)
        check_backend(self.backend)
        for name in ("time_col", "type_col"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ValueError(f"{name} must be a column name (a str), not {value!r}")
        if self.time_col == self.type_col:  # (one column cannot hold both)
            raise ValueError(
                f"time_col and type_col must be two columns, not both {self.time_col!r}"
            )


def _check(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, not {value!r}")


#: The defaults, which the keyword APIs (`aggregate`, `trend_aggregate`, the command line) spell
#: out too (tests/test_options.py holds them equal).
DEFAULTS = Options()

__all__ = [
    "BACKEND_NAMES",
    "DEFAULTS",
    "NUMERIC_MODES",
    "OVERFLOW_MODES",
    "SHARING_MODES",
    "Options",
]

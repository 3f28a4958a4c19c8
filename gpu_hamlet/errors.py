"""Error types. Every message names what is at fault: the query, the column, the line or value."""

from __future__ import annotations

from gpu_hamlet.names import shown


class GpuHamletError(Exception):
    """Base class of every error gpu-hamlet raises on purpose."""


class WorkloadError(GpuHamletError, ValueError):
    """A workload that cannot be parsed or does not make sense.

    `query` is the query's name (or None when the fault is not inside one query);
    `line` and `column` (1-based) locate syntax errors in the workload text.
    """

    def __init__(
        self,
        message: str,
        *,
        query: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.query = query
        self.line = line
        self.column = column
        where = []
        if query is not None:
            where.append(f"query {shown(query)}")
        if line is not None:
            where.append(f"line {line}, column {column}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class EventDataError(GpuHamletError, ValueError):
    """Events that do not fit the workload: a missing or mistyped column, nulls, unknown types."""


class NumericOverflowError(GpuHamletError, ArithmeticError):
    """An exact result that does not fit decimal(38) (or a float result beyond float64).

    `window_end` is the end of the window at fault, in ticks of the time column (None where not
    known). A stream's chunk and a cut group's slice check only the windows they answer whole
    (`evaluate`'s `asked`), so a window's part never raises what the whole would not."""

    def __init__(self, message: str, *, window_end: int | float | None = None) -> None:
        super().__init__(message)
        self.window_end = window_end

    @classmethod
    def of(
        cls,
        query: str,
        aggregate: str,
        group: list[tuple[str, str]],
        window: tuple[str, str],
        what: str,
        ways: list[str],
        window_end: int | float | None,
    ) -> NumericOverflowError:
        """The error of one result value: its query, aggregate, group (column, value shown),
        window (its bounds shown), what is wrong with it and the options that avoid it."""
        values = ", ".join(f"{g}={v}" for g, v in group) or "all events"
        return cls(
            f"query {shown(query)}: {aggregate} for group ({values}) in window "
            f"[{window[0]}, {window[1]}) {what}; use " + ", or ".join(ways),
            window_end=window_end,
        )


class AbsentTypeWarning(UserWarning):
    """A pattern type that never occurs in the events: its query has no trends there. Not an
    error, since the same workload runs over data of every day (README: Nulls and absent types)."""

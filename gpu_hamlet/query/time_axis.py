"""The time axis of an event table: how its time column's values become the ticks the engine
sorts and windows by, and how window bounds are given back in the column's own type.

Part of the compiled query (gpu_hamlet/query/plan.py): window lengths become ticks here, so
every error about a duration names the query and clause at fault.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pyarrow as pa

from gpu_hamlet.errors import EventDataError, WorkloadError
from gpu_hamlet.query.workload import Query

_TICKS_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_INT64_MAX = 2**63 - 1
#: The longest duration in float seconds: float64's largest finite value, in milliseconds.
_FLOAT_MAX_MS = int(np.finfo(np.float64).max) * 1000


def _ms(ms: int) -> str:
    """A duration in milliseconds for a message: its digits, or past 30 of them its power of
    ten (Python prints no integer of more than 4300 digits, and WITHIN 1e400 s has 403)."""
    return f"{ms} ms" if ms < 10**30 else f"{Decimal(ms):.6E} ms"


@functools.lru_cache(maxsize=32)
def value_range(t: pa.DataType) -> tuple[int, int]:
    """The smallest and largest value an integer or timestamp column holds (kept per type:
    the checks that ask run per query and call, and NumPy's iinfo costs microseconds)."""
    if pa.types.is_timestamp(t):
        return -_INT64_MAX - 1, _INT64_MAX
    info = np.iinfo(t.to_pandas_dtype())
    return int(info.min), int(info.max)


@dataclass(frozen=True)
class TimeAxis:
    """How times are held internally (int64 ticks or float64 seconds) and given back.

    Integer and timestamp columns keep their own unit as the tick, so ordering and equality are
    exact; float columns are seconds. Durations must be whole ticks.
    """

    arrow_type: pa.DataType
    ticks_per_second: int | None  # None: float seconds

    @property
    def is_float(self) -> bool:
        return self.ticks_per_second is None

    def ticks(self, ms: int, query: Query, clause: str) -> int | float:
        """A duration in ticks; an error when it is not a whole number of the column's unit."""
        if self.ticks_per_second is None:
            if ms > _FLOAT_MAX_MS:  # (int / float raises OverflowError there)
                raise WorkloadError(
                    f"{clause} {_ms(ms)} is longer than the time column ({self.arrow_type}) "
                    f"can hold: at most {float(_FLOAT_MAX_MS / 1000):.6g} s",
                    query=query.name,
                )
            return float(Fraction(ms, 1000))  # (rounded once: `ms / 1000.0` overflowed)
        ticks = Fraction(ms * self.ticks_per_second, 1000)
        if ticks.denominator != 1:
            raise WorkloadError(
                f"{clause} {_ms(ms)} is not a whole number of the time column's unit "
                f"({self.arrow_type}); use a coarser duration or a finer time column",
                query=query.name,
            )
        if ticks > _INT64_MAX:  # times are int64 ticks: no window of this length has bounds
            raise WorkloadError(
                f"{clause} {_ms(ms)} is longer than the time column ({self.arrow_type}) can "
                f"hold: at most {_INT64_MAX} {self._unit}",
                query=query.name,
            )
        return int(ticks)

    @property
    def _unit(self) -> str:
        return self.arrow_type.unit if pa.types.is_timestamp(self.arrow_type) else "s"

    def window_overflow(self, tmin: int, tmax: int, within: int, slide: int) -> str | None:
        """What is wrong when a window holding a time in [tmin, tmax] (ticks) has a bound the
        time column's type cannot hold (window_end after its largest value, or window_start
        before its smallest), else None. Windows are [k*slide, k*slide + within)."""
        if self.is_float:
            return None
        t = self.arrow_type
        lo, hi = value_range(t)
        tmin, tmax = int(tmin), int(tmax)
        start = ((tmin - within) // slide + 1) * slide  # the first window holding tmin
        if start < lo:
            return (
                f"the window starting at {start} {self._unit} (since the epoch) holds the "
                f"event at {self._show(tmin)} but starts before the smallest value of the "
                f"time column's type {t}"
            )
        start = tmax // slide * slide  # the last window holding tmax
        if start + within > hi:
            return (
                f"the window starting at {self._show(start)} holds the event at "
                f"{self._show(tmax)} but its window_end, {start + within} {self._unit} "
                f"(since the epoch), is after the largest value of the time column's type {t}"
            )
        return None

    def bounds(
        self, k: np.ndarray, within_ms: int, slide_ms: int, within: float, slide: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """The starts and ends, in ticks, of windows `k`: [k*slide, k*slide + within), of a
        WITHIN and SLIDE of `within_ms` and `slide_ms` milliseconds (`within` and `slide` in
        ticks). Float bounds are the nearest float64 to the exact ones wherever the exact
        milliseconds are below 2^53 (as k*slide_ms / 1000, one rounding: k * 0.1 gave
        0.30000000000000004 for 0.3), k * slide + within further out."""
        if not self.is_float:
            start = k * slide
            return np.asarray(start), np.asarray(start + within)
        kf = k.astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):  # (inf: `float_overflow` names it)
            far = kf * slide
            if max(within_ms, slide_ms) >= 2**53:  # (no exact milliseconds below 2^53)
                return far, far + within
            start_ms = kf * slide_ms  # (exact below 2^53: both are integers)
            end_ms = start_ms + within_ms
            start = np.where(np.abs(start_ms) < 2.0**53, start_ms / 1000.0, far)
            end = np.where(np.abs(end_ms) < 2.0**53, end_ms / 1000.0, far + within)
        return start, end

    def float_overflow(self, t: np.ndarray, start: np.ndarray, end: np.ndarray) -> str | None:
        """What is wrong when a float window holding a time of `t` (from `start` of the first
        window holding each to `end` of the last, in ticks: `bounds`) has a bound the time
        column's type rounds to infinity, else None (the integer axes' `window_overflow`)."""
        start, end = column_ticks(self.to_arrow(start)), column_ticks(self.to_arrow(end))
        bad = np.flatnonzero(~(np.isfinite(start) & np.isfinite(end)))
        if not bad.size:
            return None
        i = int(bad[0])
        return (
            f"a window holding the event at {float(t[i])!r} has the bounds "
            f"[{float(start[i])!r}, {float(end[i])!r}) in the time column's type "
            f"{self.arrow_type}: beyond the range of its values"
        )

    def _show(self, ticks: int) -> str:
        """A time the column's type holds, as that type shows it, or as ticks since the epoch
        where Python's datetime cannot (after the year 9999)."""
        try:
            return str(self.to_arrow(np.asarray([ticks]))[0])
        except (OverflowError, ValueError):
            return f"{ticks} {self._unit} (since the epoch)"

    def to_arrow(self, values: np.ndarray) -> pa.Array:
        """Window bounds (in ticks) as an array of the time column's own type."""
        if self.ticks_per_second is None:
            return pa.array(values.astype(np.float64)).cast(self.arrow_type)
        ticks = np.ascontiguousarray(values, np.int64)
        if self.arrow_type.bit_width == 64:  # the ticks' own bytes (a fifth of pa.array's time)
            return pa.Array.from_buffers(self.arrow_type, len(ticks), [None, pa.py_buffer(ticks)])
        # (Straight into the type, no cast: it raises on overflow of a narrower integer type.)
        return pa.array(ticks, self.arrow_type)


def column_ticks(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A time column's values (or window bounds) as the engine's ticks: a timestamp's own unit,
    or the numbers, float32 as float64 as the engine reads them (in float32 the stream's cut,
    1e-9 of a window end below it, rounded away: gpu_hamlet/engine/streaming.py)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    if pa.types.is_timestamp(col.type):
        col = col.view(pa.int64())  # (the ticks' own bytes: 1.4 us against a cast's 6.5 us)
    ticks = col.to_numpy(zero_copy_only=False)
    return ticks.astype(np.float64) if ticks.dtype == np.float32 else ticks


def time_axis(t: pa.DataType, name: str) -> TimeAxis:
    """The time axis of a time column of Arrow type `t` (named `name`, for errors)."""
    if pa.types.is_timestamp(t):
        return TimeAxis(t, _TICKS_PER_SECOND[t.unit])
    if pa.types.is_integer(t):
        if pa.types.is_uint64(t):
            raise EventDataError(
                f"time column '{name}' is uint64; use int64 seconds or a timestamp"
            )
        return TimeAxis(t, 1)
    if pa.types.is_floating(t):
        if pa.types.is_float16(t):  # (11 bits of precision: times would collide)
            raise EventDataError(f"time column '{name}' is float16; use float32 or float64 seconds")
        return TimeAxis(t, None)
    raise EventDataError(
        f"time column '{name}' has unsupported type {t}: use a timestamp, or int or float seconds"
    )

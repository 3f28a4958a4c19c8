"""How the benchmarks measure `gpu_hamlet.aggregate`: timings, peak memory and sharing decisions.

Two other engineers share this machine's two cores, so a single timing means little. Modes are
compared within one run: every repeat runs each mode once, in an order rotated from one repeat to
the next (so none always runs first after data generation), and the best time per mode counts.

Peak memory is the rise of the process's resident set during the call: before each call the
collector runs, freed memory goes back to the OS (Arrow's pool and glibc's `malloc_trim`), and
the kernel's high-water mark is reset (`/proc/self/clear_refs`, Linux); afterwards the
high-water mark minus the resident size before the call is what the call needed at its peak,
from every allocator (NumPy, Arrow, numba's runtime). Host memory only: on a GPU backend device
memory is not in it. Where /proc cannot be written the figure is None.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

import gpu_hamlet
from gpu_hamlet.engine.sharing import RunStats

MODES = ("dynamic", "static", "none")
#: Fields of gpu_hamlet.engine.sharing.SharingStats added up over a run's sharable sets.
SHARING_FIELDS = (
    "bursts",
    "burst_events",
    "shared",
    "unshared",
    "splits",
    "merges",
    "graphlet_snapshots",
    "event_snapshots",
)


def best_time(fn: Callable[[], Any], repeat: int) -> float:
    """Best wall time of `repeat` calls of fn, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


#: Rounds of short cases (`best_in_turn`): at most SHORT_ROUNDS, about SHORT_S seconds in all.
#: With 15 rounds and 2 s, bench_gloria.py's rows of 20 queries (four modes of 35-40 ms doing
#: the same work) still differed by up to 9% in their best times (BENCHMARKS.md, GLORIA).
SHORT_ROUNDS = 30
SHORT_S = 4.0


def best_in_turn(
    calls: Mapping[str, Callable[[], Any]],
    repeat: int,
    seconds: float | None = None,
) -> dict[str, float]:
    """Each call's best wall time over rounds that run every call in turn, so that the
    machine's drift falls on all of them alike, every other round in reverse order, so that no
    call always follows the same one. Short cases take more rounds than `repeat`: about SHORT_S
    seconds in all, at most SHORT_ROUNDS; with `seconds`, about that long, however many. On the
    2-core development machine, modes doing the same work differed by up to 25% in the best of
    2 runs each, one mode after the other (bench_sharing.py), by up to 15% in the best of 3
    rounds and by up to 9% in the best of 15 (bench_gloria.py); over 149 rounds, by 1.2%
    (BENCHMARKS.md, GLORIA)."""
    best = dict.fromkeys(calls, float("inf"))
    order = list(calls.items())
    rounds = repeat
    r = 0
    while r < rounds:
        t0 = time.perf_counter()
        for name, fn in order if r % 2 == 0 else order[::-1]:
            t1 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t1)
        if r == 0:
            fill = math.ceil((SHORT_S if seconds is None else seconds) / (time.perf_counter() - t0))
            rounds = max(repeat, min(SHORT_ROUNDS, fill) if seconds is None else fill)
        r += 1
    return best


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None)


def _reset_peak() -> int | None:
    """Return freed memory to the OS, reset the high-water mark; the resident KiB now, or None
    where the kernel does not let us reset it."""
    gc.collect()
    pa.default_memory_pool().release_unused()
    if hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return _status_kib("VmRSS")
    except OSError:
        return None


def measured_call(fn: Callable[[], Any]) -> tuple[float, float | None]:
    """(wall seconds, peak MiB above the resident size before the call, or None) of one call."""
    base = _reset_peak()
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    peak = None if base is None else (_status_kib("VmHWM") - base) / 1024.0
    return seconds, peak


def sharing_summary(stats: RunStats) -> dict[str, float] | None:
    """The optimizer's decisions, None when nothing was shareable: HAMLET's shared Kleene bursts
    summed over their sets (named by their event type), and apart from them the sets of
    GLORIA's plan that `dynamic` adds (stages named as written, `tran(A, B)`, `SEQ(P, T)+`:
    their runs, and how many ran shared)."""
    if not stats.sets:
        return None
    bursts = [s for s in stats.sets if not s.stage]
    stages = [s for s in stats.sets if s.stage]
    out: dict[str, float] = {f: sum(getattr(s, f) for s in bursts) for f in SHARING_FIELDS}
    out["sets"] = len(bursts)
    # sets `dynamic` did not analyse: sharing them could not pay for its fixed costs
    out["sets_not_analysed"] = sum(s.below_fixed_costs and not s.bursts for s in bursts)
    out["share_rate"] = out["shared"] / out["bursts"] if out["bursts"] else 0.0
    out["stages"] = len(stages)
    out["stage_runs"] = sum(s.bursts for s in stages)
    out["stage_shared"] = sum(s.shared for s in stages)
    return out


@dataclass(frozen=True)
class Engine:
    """How `aggregate` is called: backend and numeric mode (sharing varies per measurement)."""

    backend: str = "cpu"
    numeric: str = "float"

    def run(
        self,
        events: pa.Table,
        workload: str,
        sharing: str,
        stats: RunStats | None = None,
        part: bool = False,
    ) -> dict[str, pa.Table]:
        # Overflowing floats become nulls: benchmarks time the computation, not the error path.
        return gpu_hamlet.aggregate(
            events,
            workload,
            backend=self.backend,
            sharing=sharing,
            numeric=self.numeric,
            on_overflow="null",
            stats=stats,
            part=part,
        )

    def warm_up(self, events: pa.Table, workload: str, modes: Sequence[str] = MODES) -> None:
        """Load (or compile) the kernels this workload needs before anything is timed."""
        for mode in modes:
            self.run(events.slice(0, 2000), workload, mode, part=True)

    def compare(
        self, events: pa.Table, workload: str, repeat: int, modes: Sequence[str] = MODES
    ) -> dict[str, dict[str, Any]]:
        """Per mode: best seconds, events per second, least peak MiB over the repeats, and the
        sharing decisions. Modes interleave within each repeat (rotated order)."""
        modes = tuple(modes)
        self.warm_up(events, workload, modes)
        times: dict[str, list[float]] = {m: [] for m in modes}
        peaks: dict[str, list[float]] = {m: [] for m in modes}
        decisions: dict[str, dict | None] = {}
        for r in range(repeat):
            for mode in modes[r % len(modes) :] + modes[: r % len(modes)]:
                stats = RunStats()
                seconds, peak = measured_call(lambda: self.run(events, workload, mode, stats))
                times[mode].append(seconds)
                if peak is not None:
                    peaks[mode].append(peak)
                decisions[mode] = sharing_summary(stats)
        out = {}
        for mode in modes:
            best = min(times[mode])
            out[mode] = {
                "seconds": best,
                "events_per_s": events.num_rows / best,
                "peak_mib": min(peaks[mode]) if peaks[mode] else None,
                "sharing": decisions[mode],
            }
        return out


@dataclass(frozen=True)
class Settings:
    """What one run of the experiments uses: small (quick) or full sizes, the engine, the number
    of repeats per measurement and the folder of the authors' data (`../shared/data`)."""

    quick: bool
    engine: Engine
    repeat: int
    data_dir: Path

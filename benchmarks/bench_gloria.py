"""GLORIA's execution (issue 20): sharing='dynamic' (GLORIA's plan of shared Kleene cycles plus
HAMLET's bursts) against 'none', 'static' and 'hamlet' on Kleene workloads.

    python benchmarks/bench_gloria.py [--events 100000] [--queries 20 50 100] [--lengths 2 4]
        [--repeat 2]

Two streams of `--events` events:
- *ridesharing*: the HAMLET paper's generator. Its cycles' runs are short (a Kleene body's types
  are interleaved with the others'), so little sharing pays there;
- *bursty*: runs of 40 events cycling through the body's types, each between one of 5 prefix
  and one of 5 suffix types, 10 ms apart.
Workloads: on ridesharing, bench_plan_search.py's Kleene workload (queries around one cycle of
`length` types, flat or nested, with different prefixes, suffixes, GROUPBY and filters); on the
bursty stream, queries SEQ(A_i, SEQ(T_1, ..., T_length)+, C_j) with COUNT(*). Windows of 30
min sliding by 10 min (ridesharing) and 1 min sliding by 30 s (bursty); float mode with
on_overflow='null' (the counts leave float64's range; the work is the same). Each cell: the best
of `--repeat` warm runs of `aggregate` on the CPU backend, in seconds.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import pyarrow as pa
from bench_plan_search import kleene_workload

import gpu_hamlet
from gpu_hamlet.datagen import ridesharing
from gpu_hamlet.engine.sharing import RunStats

MODES = ("none", "static", "hamlet", "dynamic")


def bursty(n: int, length: int, run: int = 40, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    body = [f"T{j}" for j in range(length)]
    types: list[str] = []
    while len(types) < n:
        types.append(f"A{rng.integers(5)}")
        types += [body[j % length] for j in range(run)]
        types.append(f"C{rng.integers(5)}")
    types = types[:n]
    return pa.table(
        {"time": pa.array(np.arange(n) * 10, pa.timestamp("ms")), "type": types, "x": rng.random(n)}
    )


def bursty_workload(n: int, length: int) -> str:
    body = ", ".join(f"T{j}" for j in range(length))
    return ";\n".join(
        f"q{i}: RETURN COUNT(*) PATTERN SEQ(A{i % 5}, SEQ({body})+, C{(i // 5) % 5}) "
        "WITHIN 1 min SLIDE 30 s"
        for i in range(n)
    )


def timed(events: pa.Table, text: str, mode: str, repeat: int) -> tuple[float, RunStats]:
    def once() -> RunStats:
        stats = RunStats()
        gpu_hamlet.aggregate(
            events,
            text,
            sharing=mode,
            numeric="float",
            on_overflow="null",
            backend="cpu",
            stats=stats,
        )
        return stats

    gpu_hamlet.aggregate(
        events.slice(0, 2000), text, sharing=mode, numeric="float", on_overflow="null"
    )
    best = float("inf")
    stats = RunStats()
    for _ in range(repeat):
        t0 = time.perf_counter()
        stats = once()
        best = min(best, time.perf_counter() - t0)
    return best, stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--queries", type=int, nargs="+", default=[20, 50, 100])
    ap.add_argument("--lengths", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    print(f"# {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"# {args.events:,} events per stream; seconds, best of {args.repeat}")
    head = " ".join(f"{m:>8}" for m in MODES)
    print(f"{'stream':<12} {'Q':>4} {'L':>3} {head} {'dyn/best':>9} {'none/dyn':>9} shared runs")
    rides = ridesharing(args.events, seed=1)
    for length in args.lengths:
        stream = bursty(args.events, length)
        for n in args.queries:
            cases = (
                ("ridesharing", rides, kleene_workload(n, length)),
                ("bursty", stream, bursty_workload(n, length)),
            )
            for name, events, text in cases:
                secs, runs = {}, ""
                for mode in MODES:
                    secs[mode], stats = timed(events, text, mode, args.repeat)
                    if mode == "dynamic":
                        cyc = [s for s in stats.sets if s.kleene_type.startswith("SEQ(")]
                        runs = f"{sum(s.shared for s in cyc)}/{sum(s.bursts for s in cyc)}"
                best = min(secs[m] for m in MODES if m != "dynamic")
                cells = " ".join(f"{secs[m]:8.3f}" for m in MODES)
                print(
                    f"{name:<12} {n:4d} {length:3d} {cells} {secs['dynamic'] / best:9.2f} "
                    f"{secs['none'] / secs['dynamic']:9.2f} {runs}",
                    flush=True,
                )


if __name__ == "__main__":
    main()

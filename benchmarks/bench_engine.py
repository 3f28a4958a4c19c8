"""Throughput of the in-process CPU engine (issue 2): Arrow in, Arrow out, every numeric mode.

    python benchmarks/bench_engine.py [--events 1000000] [--repeat 3] [--json OUT.json]

Measures events per second of `gpu_hamlet.aggregate` (sharing="none": every query alone) on a
generated Kleene stream for one query `SEQ(A, B+, C)` and for a 50-query workload, in float,
exact and bigint mode, on time-sorted and on shuffled input. Kernels are compiled (and cached) by a
warm-up run first; the best of `--repeat`
runs is reported. Ratios between modes come from one run on one machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

import numpy as np
import pyarrow as pa
from harness import best_time

import gpu_hamlet
from gpu_hamlet.datagen import kleene_stream

SINGLE = "RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 1 min"
TYPES = ("A", "B", "C", "D", "E", "F")


def kleene_queries(n: int = 50) -> str:
    """n queries over the Kleene type B: varied neighbours, windows, aggregates and filters."""
    others = [t for t in TYPES if t != "B"]
    aggs = [
        "COUNT(*)",
        "COUNT(*), SUM(B.x)",
        "COUNT(*), AVG(B.y)",
        "COUNT(*), MAX(B.y)",
        "COUNT(B), SUM(B.x)",
    ]
    windows = ["30 s", "1 min", "2 min", "1 min SLIDE 30 s", "2 min SLIDE 1 min"]
    queries = []
    for i in range(n):
        first, last = others[i % 5], others[(i // 5) % 5]
        pattern = f"SEQ({first}, B+, {last})" if first != last else f"SEQ({first}, B+)"
        where = f" WHERE B.x < {3 + i % 7}" if i % 3 == 0 else ""
        group = " GROUPBY g" if i % 4 == 0 else ""
        queries.append(
            f"q{i + 1}: RETURN {aggs[i % 5]} PATTERN {pattern}{where}{group} "
            f"WITHIN {windows[(i // 2) % 5]}"
        )
    return ";\n".join(queries)


def measure(events: pa.Table, workload, numeric: str, repeat: int) -> float:
    return best_time(
        lambda: gpu_hamlet.aggregate(
            events, workload, backend="cpu", sharing="none", numeric=numeric, on_overflow="null"
        ),
        repeat,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    sorted_ev = kleene_stream(
        args.events, seed=7, types=TYPES, mean_burst=20.0, n_groups=8, duplicate_time_fraction=0.1
    )
    shuffled = sorted_ev.take(np.random.default_rng(0).permutation(sorted_ev.num_rows))
    workloads = {
        "1 query": gpu_hamlet.parse_workload(SINGLE),
        "50 queries": gpu_hamlet.parse_workload(kleene_queries(50)),
    }
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"{args.events:,} events, best of {args.repeat}"
    )
    rows = []
    for wname, wl in workloads.items():
        for order, ev in (("sorted", sorted_ev), ("shuffled", shuffled)):
            for numeric in ("float", "exact", "bigint"):
                measure(ev.slice(0, 20_000), wl, numeric, 1)  # compile / load the kernels
                dt = measure(ev, wl, numeric, args.repeat)
                rows.append(
                    {
                        "workload": wname,
                        "input": order,
                        "numeric": numeric,
                        "seconds": dt,
                        "events_per_s": args.events / dt,
                    }
                )
                print(
                    f"{wname:>10} {order:>8} {numeric:>6}: {dt:7.3f} s "
                    f"{args.events / dt / 1e6:7.2f} M events/s",
                    flush=True,
                )
    by = {(r["workload"], r["input"], r["numeric"]): r["seconds"] for r in rows}
    for wname in workloads:
        for order in ("sorted", "shuffled"):
            ratio = by[(wname, order, "exact")] / by[(wname, order, "float")]
            print(f"exact / float time, {wname}, {order}: {ratio:.2f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()

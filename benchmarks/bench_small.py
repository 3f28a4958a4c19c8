"""Small calls (issue 21, part 2): the fixed cost of one warm, in-process `aggregate` call.

    python benchmarks/bench_small.py [--calls 300] [--json OUT.json]

Workloads with many small groups, and Spark tasks with many small partitions, pay this cost per
call. Cases: one query `SEQ(A, B+, C)` over ten events (float and exact), and the 50 queries of
bench_engine.py over 2,100 events of its Kleene stream (float, exact; sharing dynamic and none),
on the CPU backend; and the first case with backend='auto', the default, which asks whether a
GPU is visible.
The workload is passed as text, as most callers do. Each figure is the median of `--calls` warm
calls (after 20 unmeasured ones), in microseconds or milliseconds per call.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import pyarrow as pa
from bench_engine import SINGLE, TYPES, kleene_queries

import gpu_hamlet
from gpu_hamlet.datagen import kleene_stream


def per_call(events: pa.Table, workload: str, calls: int, **options) -> float:
    """Median seconds of one warm call."""

    def call() -> None:
        gpu_hamlet.aggregate(events, workload, on_overflow="null", **options)

    for _ in range(20):
        call()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    tiny = pa.table({"time": list(range(10)), "type": list("ABBBCABBBC")})
    stream = kleene_stream(
        2_100, seed=7, types=TYPES, mean_burst=20.0, n_groups=8, duplicate_time_fraction=0.1
    )
    many = kleene_queries(50)
    few = max(1, args.calls // 10)
    cases = [
        ("1 query, 10 events", tiny, SINGLE, "float", "dynamic", 1, "cpu"),
        ("1 query, 10 events", tiny, SINGLE, "exact", "dynamic", 1, "cpu"),
        ("50 queries, 2,100 events", stream, many, "float", "dynamic", few, "cpu"),
        ("50 queries, 2,100 events", stream, many, "float", "none", few, "cpu"),
        ("50 queries, 2,100 events", stream, many, "exact", "dynamic", few, "cpu"),
        ("1 query, 10 events", tiny, SINGLE, "float", "dynamic", 1, "auto"),
    ]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; median of warm calls")
    rows = []
    for label, events, workload, numeric, sharing, calls, backend in cases:
        dt = per_call(events, workload, calls, numeric=numeric, sharing=sharing, backend=backend)
        rows.append(
            {"case": label, "numeric": numeric, "sharing": sharing, "backend": backend}
            | {"calls": calls, "seconds": dt}
        )
        shown = f"{dt * 1e6:8.0f} us" if dt < 1e-2 else f"{dt * 1e3:8.2f} ms"
        print(f"{label:>26} {numeric:>6} {sharing:>8} {backend:>5}: {shown} per call", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()

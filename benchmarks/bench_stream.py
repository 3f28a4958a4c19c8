"""Throughput and peak memory from 10^5 to 10^7 events, streamed in chunks or whole (issue 21,
part 4), in one run on one machine.

    python benchmarks/bench_stream.py [--events 100000 1000000 10000000] [--queries 50]
        [--numeric float exact] [--chunk 1000000] [--json OUT.json]

The 50 queries of the ridesharing Kleene-sharing workload (benchmarks/workloads.py
`rides_kleene_sharing`: Travel+ per driver and district, 10-minute windows) over the paper's
ridesharing stream (1,000 events a minute). `stream` feeds `gpu_hamlet.aggregate_stream` batches
of 250,000 events with `rows_per_chunk=--chunk`; `whole` passes the whole table to `aggregate`.
The batches come from a pool of four generated batches (1,000,000 events) repeated with their
times shifted, so generating the stream costs neither time nor memory that grows with it.
Every case runs in a process of its own, after a warm-up call that loads the compiled kernels,
and reports the engine's seconds (best of `--repeat`), query-events per second and the
process's peak resident memory (which includes the pool and, for `whole`, the table).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from harness import best_time
from workloads import rides, rides_kleene_sharing

import gpu_hamlet

BATCH = 250_000
POOL = 4


def pool() -> list[pa.Table]:
    """Four consecutive batches of the ridesharing stream."""
    events = rides(BATCH * POOL, 1000.0, seed=1)
    return [events.slice(i * BATCH, BATCH) for i in range(POOL)]


def batches(n: int, tables: list[pa.Table]):
    """n events: the pool again and again, each round shifted past the one before."""
    first = tables[0].column("time")[0].value
    span = tables[-1].column("time")[-1].value - first + 60_000_000  # us, and a minute
    made, k = 0, 0
    while made < n:
        table = tables[k % POOL]
        shift = pa.scalar((k // POOL) * span, pa.duration("us"))
        table = table.set_column(1, "time", pc.add(table.column("time"), shift))
        table = table.slice(0, n - made)
        made += table.num_rows
        k += 1
        yield table


def one(n: int, numeric: str, kind: str, queries: int, chunk: int, repeat: int) -> dict:
    """One case in this process: the engine's best seconds and the peak memory."""
    tables = pool()
    workload = rides_kleene_sharing(queries)
    options: dict[str, Any] = dict(backend="cpu", numeric=numeric, on_overflow="null")
    gpu_hamlet.aggregate(tables[0].slice(0, 20_000), workload, **options)  # load the kernels
    whole = pa.concat_tables(batches(n, tables)) if kind == "whole" else None

    def call() -> None:
        if whole is not None:
            gpu_hamlet.aggregate(whole, workload, **options)
        else:
            gpu_hamlet.aggregate_stream(
                batches(n, tables), workload, rows_per_chunk=chunk, **options
            )

    best = best_time(call, repeat)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"seconds": best, "peak_mb": peak}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--events", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--numeric", nargs="+", default=["float", "exact"])
    ap.add_argument("--kinds", nargs="+", default=["stream", "whole"])
    ap.add_argument("--chunk", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--one", nargs=3, metavar=("N", "NUMERIC", "KIND"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        n, numeric, kind = int(args.one[0]), args.one[1], args.one[2]
        print(json.dumps(one(n, numeric, kind, args.queries, args.chunk, args.repeat)))
        return
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; {args.queries} ridesharing "
        f"queries; chunks of {args.chunk:,} rows; CPU backend, best of {args.repeat}"
    )
    print(
        f"{'events':>11} {'numeric':>7} {'kind':>6} {'seconds':>8} {'q-events/s':>11} "
        f"{'peak MB':>8}"
    )
    rows = []
    here = os.path.dirname(os.path.abspath(__file__))
    for numeric in args.numeric:
        for n in args.events:
            for kind in args.kinds:
                cmd = [sys.executable, os.path.join(here, "bench_stream.py"), "--one", str(n)]
                cmd += [numeric, kind, "--queries", str(args.queries), "--chunk", str(args.chunk)]
                cmd += ["--repeat", str(args.repeat)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=here)
                row = {"events": n, "numeric": numeric, "kind": kind}
                row.update(json.loads(out.stdout.strip().splitlines()[-1]))
                row["query_events_per_s"] = n * args.queries / row["seconds"]
                rows.append(row)
                print(
                    f"{n:>11,} {numeric:>7} {kind:>6} {row['seconds']:>8.3f} "
                    f"{row['query_events_per_s']:>11.3g} {row['peak_mb']:>8.0f}",
                    flush=True,
                )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()

"""One Spark task's share of the Spark benchmark (bench_spark.py), in-process: the engine alone.

    python benchmarks/bench_task.py [--events 10000000] [--queries 50] [--tasks 2]
        [--repeat 3] [--profile N]

The events of bench_spark.py (ridesharing, seed 1) of the types its workload uses, sorted by
district and time as Spark hands a task its shards, with the type as a dictionary column (the
worker's form); the first 1/tasks of the districts are one task's share. Times the engine
(`evaluate`) over each district in turn, as the worker calls it once per complete shard, with the
worker's options (CPU backend, float, overflow to null), and prints the best of `repeat` runs and
the events per second. `--profile N` then prints the N functions with the most own time under
cProfile.

To compare commits in one run, point PYTHONPATH at another checkout's root for one invocation:
the script's own folder comes first, so both runs use the same workload and events.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from bench_spark import workload

from gpu_hamlet.datagen import ridesharing
from gpu_hamlet.engine.evaluate import evaluate
from gpu_hamlet.engine.options import Options
from gpu_hamlet.query.parser import parse_workload

OPTIONS = Options(backend="cpu", sharing="dynamic", numeric="float", on_overflow="null")


def task_share(n_events: int, n_queries: int, tasks: int) -> list[pa.Table]:
    """The districts of one task, each a table sorted by time, types as a dictionary column."""
    used = sorted({t for q in parse_workload(workload(n_queries)) for t in q.types})
    events = ridesharing(n_events, seed=1)
    events = events.filter(pc.is_in(events["type"], pa.array(used)))
    events = events.sort_by([("district", "ascending"), ("time", "ascending")])
    at = events.schema.get_field_index("type")
    events = events.set_column(at, "type", pc.dictionary_encode(events["type"]))
    district = events.column("district").to_numpy()
    bounds = np.r_[np.flatnonzero(np.r_[True, district[1:] != district[:-1]]), len(district)]
    shards = [events.slice(int(a), int(b - a)) for a, b in zip(bounds[:-1], bounds[1:])]
    return shards[: max(1, len(shards) // tasks)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    args = ap.parse_args()
    shards = task_share(args.events, args.queries, args.tasks)
    wl = workload(args.queries)
    n = sum(s.num_rows for s in shards)

    def run() -> None:
        for shard in shards:
            evaluate(shard, wl, OPTIONS, part=True)

    evaluate(shards[0].slice(0, 10_000), wl, OPTIONS, part=True)  # compile or load the kernels
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    print(
        f"{n:,} events in {len(shards)} districts, {args.queries} queries: best {min(times):.2f} s "
        f"of {', '.join(f'{t:.2f}' for t in times)} ({n / min(times) / 1e6:.2f} M events/s)"
    )
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(run)
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()

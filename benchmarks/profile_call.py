"""Where a warm `aggregate` call's time goes, by function: cProfile over bench_sharing.py's
Kleene-sharing workload, one sharing mode at a time, with each of `--threads` host threads in
turn (OMP_NUM_THREADS; on Python 3.11 cProfile follows only the thread it starts in, so the work
on the others shows as waiting for them; on 3.12 it follows every thread).

    python benchmarks/profile_call.py [--backend gpu] [--events 200000] [--queries 25]
        [--burst 50] [--sharing none static] [--threads 1] [--calls 3] [--top 30]

Why: on an H200, `none` took 123 ms for 25 queries over bursts of 50 where `static` took 54 ms,
but the kernels of `none` are one launch of 9,378 short runs (BENCHMARKS.md, GPU kernels); on
one host thread both took 44-46 ms there. The GPU backend's steps (`*_many` in
gpu_hamlet/kernels/backend.py) wait for their kernels and copies, so their cumulative time is
the device's share and the rest is the engine's host work.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import os
import platform
import pstats
import time

from bench_sharing import TYPES, kleene_sharing

import gpu_hamlet
from gpu_hamlet.datagen import kleene_stream


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=25)
    ap.add_argument("--burst", type=float, default=50.0)
    ap.add_argument("--sharing", nargs="+", default=["none", "static"])
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)
    events = kleene_stream(
        args.events, seed=3, types=TYPES, mean_burst=args.burst, mean_other_run=3.0
    )
    text = kleene_sharing(args.queries)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; "
        f"{args.events:,} events, mean burst {args.burst:g}, {args.queries} queries; float mode, "
        f"{args.backend.upper()} backend; {args.calls} profiled calls per mode after 2 warm ones"
    )

    def call(mode: str) -> None:
        gpu_hamlet.aggregate(
            events, text, backend=args.backend, sharing=mode, numeric="float", on_overflow="null"
        )

    for threads, mode in itertools.product(args.threads, args.sharing):
        os.environ["OMP_NUM_THREADS"] = str(threads)  # read per call (gpu_hamlet/host_threads.py)
        for _ in range(2):
            call(mode)
        t0 = time.perf_counter()
        for _ in range(args.calls):
            call(mode)
        plain = (time.perf_counter() - t0) / args.calls
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.calls):
            call(mode)
        profile.disable()
        print(
            f"\n== sharing={mode}, {threads} host threads: {plain * 1e3:.1f} ms a call unprofiled"
        )
        for key in ("cumulative", "tottime"):
            out = io.StringIO()
            stats = pstats.Stats(profile, stream=out)
            stats.sort_stats(key).print_stats(args.top)
            print(f"-- by {key} (seconds over {args.calls} calls)")
            print(out.getvalue().split("\n\n", 2)[-1].rstrip())


if __name__ == "__main__":
    main()

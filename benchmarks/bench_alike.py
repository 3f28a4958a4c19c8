"""Queries alike but for RETURN (gpu_hamlet/engine/conjunction.py `run_as`), in one run.

    python benchmarks/bench_alike.py [--events 200000] [--queries 5 25] [--numeric float exact]
        [--repeat 3] [--json OUT.json]

A dashboard asks COUNT(*), SUM(B.x), AVG(B.x) and MAX(B.x) of each of n patterns (HAMLET's
Kleene-sharing patterns around B+, bench_sharing.py's stream with bursts of 5) as four queries,
4n in all. The engine runs each pattern once, with the four aggregates. The anchor is the same
n patterns written as n queries of all four aggregates: "alike / one" near 1.0 says the four
queries cost what one does (before `run_as` they ran apart: about 2-4x). Each figure is the best
of rounds that run both workloads in turn (harness.py `best_in_turn`), sharing="dynamic".
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform

from harness import best_in_turn

import gpu_hamlet
from gpu_hamlet.datagen import kleene_sharing_workload, kleene_stream

TYPES = ("A", "B", "C", "D", "E", "F", "G", "H")
OTHERS = [t for t in TYPES if t != "B"]
RETURNS = ("COUNT(*)", "SUM(B.x)", "AVG(B.x)", "MAX(B.x)")


def workloads(n: int) -> dict[str, str]:
    """The 4n queries alike but for RETURN, and the n queries of all their aggregates."""
    alike = ";\n".join(
        kleene_sharing_workload(n, "B", OTHERS, returns=r, prefix=f"r{j}_")
        for j, r in enumerate(RETURNS)
    )
    one = kleene_sharing_workload(n, "B", OTHERS, returns=", ".join(RETURNS), prefix="all")
    return {"alike": alike, "one": one}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--queries", type=int, nargs="+", default=[5, 25])
    ap.add_argument("--numeric", nargs="+", default=["float", "exact"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    events = kleene_stream(args.events, seed=3, types=TYPES, mean_burst=5, mean_other_run=3.0)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; {args.events:,} events; "
        f"CPU backend, sharing dynamic, best of {args.repeat} or more rounds in turn"
    )
    rows = []
    for n in args.queries:
        texts = workloads(n)
        for numeric in args.numeric:

            def call(text: str, numeric: str = numeric) -> None:
                gpu_hamlet.aggregate(
                    events, text, backend="cpu", numeric=numeric, on_overflow="null"
                )

            calls = {k: functools.partial(call, t) for k, t in texts.items()}
            best = best_in_turn(calls, args.repeat)
            ratio = best["alike"] / best["one"]
            print(
                f"{n:4d} patterns x 4 RETURNs  {numeric:6s}  alike {best['alike']:.4f} s  "
                f"one {best['one']:.4f} s  alike / one {ratio:.2f}",
                flush=True,
            )
            rows.append({"patterns": n, "numeric": numeric, **best, "ratio": ratio})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"events": args.events, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

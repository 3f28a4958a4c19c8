"""Sharing the bursts of a Kleene type that NEXT conditions touch, per window (issue 19):
dynamic vs static vs none, in one run on one machine.

    python benchmarks/bench_next_sharing.py [--events 200000] [--queries 5 25 50]
        [--windows 1 10 60] [--burst 20] [--backend cpu] [--seconds S] [--json OUT.json]
        [--non-strict 0.5] [--attr y]

Queries with different patterns around B+ (HAMLET 6.1's Kleene-sharing workload,
`gpu_hamlet.datagen.kleene_sharing_workload`), all with the same `B.y < NEXT(B).y`, over
`kleene_stream` (types A..H, bursts of B of mean length `--burst`, one event a second), with
tumbling windows of `--windows` minutes: the more bursts a window holds, the more each query's
resolution (a pass over the earlier snapshots of its window) costs against its own tree pass.
Every mode answers the same workload over the same events; float mode; each mode's best over at
least `--repeat` rounds that run the three modes in turn (bench_sharing.py `run`; `--seconds S`:
about S seconds of rounds per row, however many).
The constants of the optimizer's model (gpu_hamlet/engine/optimizer.py `WindowCostModel`) are
fitted to this benchmark's none and static columns; `shared` is the bursts dynamic shared.

With `--non-strict F`, every query whose index i has floor((i + 1) * F) > floor(i * F) (a share
F of them, spread evenly) compares with '<=' instead: the set still shares, its ties entering
event-level snapshots (HAMLET Def. 9; `ev snaps` is how many static made). `--attr x` compares
the integer attribute x (10 values, so about one pair in ten ties) instead of y (floats: no
ties); `--attr r` compares y rounded to 2 decimals (10,000 values: ties are rare).
"""

from __future__ import annotations

import argparse
import json
import os
import platform

import pyarrow.compute as pc
from bench_sharing import run

from gpu_hamlet.datagen import kleene_sharing_workload, kleene_stream

TYPES = ("A", "B", "C", "D", "E", "F", "G", "H")
OTHERS = [t for t in TYPES if t != "B"]


def workload(n: int, minutes: int, attr: str = "y", non_strict: float = 0.0) -> str:
    strict = f"B.{attr} < NEXT(B).{attr}"
    text = kleene_sharing_workload(
        n, "B", OTHERS, returns="COUNT(*), SUM(B.x)", where=[strict], within=f"{minutes} min"
    )
    lines = text.split(";\n")
    loose = [int((i + 1) * non_strict) > int(i * non_strict) for i in range(len(lines))]
    return ";\n".join(
        line.replace(strict, f"B.{attr} <= NEXT(B).{attr}") if lo else line
        for line, lo in zip(lines, loose)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--queries", type=int, nargs="+", default=[5, 25, 50])
    ap.add_argument("--windows", type=int, nargs="+", default=[1, 10, 60])
    ap.add_argument("--burst", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--non-strict", type=float, default=0.0)
    ap.add_argument("--attr", default="y", choices=["x", "y", "r"])
    args = ap.parse_args()
    a = args.attr
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; {args.events:,} events, mean "
        f"burst {args.burst:g}; queries WHERE B.{a} < NEXT(B).{a}, a share {args.non_strict:g} "
        f"with '<=' instead; float mode, {args.backend.upper()} backend, best of {args.repeat} "
        "or more rounds in turn"
    )
    events = kleene_stream(
        args.events, seed=5, types=TYPES, mean_burst=args.burst, mean_other_run=3.0
    )
    events = events.append_column("r", pc.round(events.column("y"), 2))
    rows = []
    header = (
        f"{'window':>7} {'queries':>7} {'bursts/win':>10} {'none s':>8} {'static s':>8} "
        f"{'dynamic s':>9} {'none/static':>11} {'dyn/best':>8} {'shared':>7} {'ev snaps':>8}"
    )
    print(header)
    for minutes in args.windows:
        for q in args.queries:
            text = workload(q, minutes, a, args.non_strict)
            times, stats = run(events, text, args.repeat, args.backend, args.seconds)
            st = stats["static"].sets[0]
            windows = max(1, args.events // (60 * minutes))
            dyn = stats["dynamic"].sets[0]
            row = {
                "window_min": minutes,
                "queries": q,
                "bursts": st.bursts,
                "bursts_per_window": st.bursts / windows,
                "none_s": times["none"],
                "static_s": times["static"],
                "dynamic_s": times["dynamic"],
                "dynamic_shared": dyn.shared,
                "event_snapshots": st.event_snapshots,
            }
            rows.append(row)
            best = min(times["none"], times["static"])
            print(
                f"{minutes:>5} m {q:>7} {row['bursts_per_window']:>10.1f} {times['none']:>8.3f} "
                f"{times['static']:>8.3f} {times['dynamic']:>9.3f} "
                f"{times['none'] / times['static']:>11.2f} {times['dynamic'] / best:>8.2f} "
                f"{dyn.shared:>7} {st.event_snapshots:>8}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"backend": args.backend, "events": args.events, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()

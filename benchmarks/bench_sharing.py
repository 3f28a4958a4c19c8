"""HAMLET sharing (issue 3): dynamic vs static vs none, in one run on one machine.

    python benchmarks/bench_sharing.py [--events 200000] [--queries 5 25 50 100]
        [--bursts 5 20 50] [--backend cpu] [--seconds S] [--json OUT.json]

Two streams from `gpu_hamlet.datagen.kleene_stream` (types A..H, Kleene type B):
- *kleene-sharing*: the workload of HAMLET 6.1, queries with different patterns that share B+
  (same window, grouping, predicates and aggregates), over bursts of mean length 5, 20, 50;
- *short bursts + filters*: bursts of mean length 1.5 and a different filter on B per query, where
  sharing does not pay.
Every mode answers the same workload over the same events; each mode's best counts, over at
least `--repeat` rounds that run the three modes in turn (more for short cases: harness.py
`best_in_turn`; `--seconds S`: about S seconds of rounds per row, however many).
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
from gpu_hamlet.engine.sharing import RunStats

TYPES = ("A", "B", "C", "D", "E", "F", "G", "H")
OTHERS = [t for t in TYPES if t != "B"]


def kleene_sharing(n: int, filters: bool = False) -> str:
    """n queries with distinct patterns around B+ (HAMLET 6.1's Kleene-sharing workload)."""
    return kleene_sharing_workload(
        n,
        "B",
        OTHERS,
        returns="COUNT(*), SUM(B.x)",
        per_query_where=[f"B.x < {1 + j}" for j in range(9)] if filters else (),
    )


MODES = ("none", "static", "dynamic")


def run(
    events, workload: str, repeat: int, backend: str, seconds: float | None = None
) -> tuple[dict[str, float], dict[str, RunStats]]:
    """Each mode's best time over rounds that run the three in turn (harness.py
    `best_in_turn`; `seconds`: about that long in rounds, however many), and each mode's
    sharing statistics from one more run (collecting them records every burst's snapshot,
    which no timed call pays: 7-9% of `dynamic` at 100 queries)."""

    def once(mode: str, stats: RunStats | None = None) -> None:
        gpu_hamlet.aggregate(
            events,
            workload,
            backend=backend,
            sharing=mode,
            numeric="float",
            on_overflow="null",
            stats=stats,
        )

    calls = {mode: functools.partial(once, mode) for mode in MODES}
    best = best_in_turn(calls, repeat, seconds)
    stats = {mode: RunStats() for mode in MODES}
    for mode in MODES:
        once(mode, stats[mode])
    return best, stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--queries", type=int, nargs="+", default=[5, 25, 50, 100])
    ap.add_argument("--bursts", type=float, nargs="+", default=[5, 20, 50])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; {args.events:,} events; "
        f"float mode, {args.backend.upper()} backend, best of {args.repeat} or more rounds in turn"
    )
    streams = [
        (
            f"kleene-sharing, mean burst {b:g}",
            kleene_stream(args.events, seed=3, types=TYPES, mean_burst=b, mean_other_run=3.0),
            False,
        )
        for b in args.bursts
    ]
    streams.append(
        (
            "short bursts + per-query filters",
            kleene_stream(args.events, seed=4, types=TYPES, mean_burst=1.5, mean_other_run=3.0),
            True,
        )
    )
    run(streams[0][1].slice(0, 5000), kleene_sharing(3), 1, args.backend)  # compile or load
    rows = []
    for label, events, filters in streams:
        for n in args.queries:
            res, stats = run(
                events, kleene_sharing(n, filters), args.repeat, args.backend, args.seconds
            )
            for mode in MODES:
                dt, st = res[mode], stats[mode]
                s = st.sets[0] if st.sets else None
                rows.append(
                    {
                        "stream": label,
                        "queries": n,
                        "sharing": mode,
                        "seconds": dt,
                        "events_per_s": args.events / dt,
                        "stats": s.as_dict() if s else None,
                    }
                )
            best_other = min(res["static"], res["none"])
            last = rows[-1]["stats"] or {}
            print(
                f"{label:>34} | {n:3d} q | none {res['none']:7.3f} s  static "
                f"{res['static']:7.3f} s  dynamic {res['dynamic']:7.3f} s | none/dynamic "
                f"{res['none'] / res['dynamic']:5.2f}x  dynamic/best "
                f"{res['dynamic'] / best_other:4.2f} | dynamic shared {last.get('shared', 0)}"
                f"/{last.get('bursts', 0)} bursts, {last.get('event_snapshots', 0)} event "
                "snapshots",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()

"""The pattern language's general forms (issue 18) next to flat SEQ workloads of the same size, with
sharing on (dynamic) and off, in one run on one machine.

    python benchmarks/bench_patterns.py [--events 200000] [--repeat 2] [--json OUT.json]

- *HAMLET Example 10*: `(SEQ(A, B+))+` and `(SEQ(C, B+))+` over `kleene_stream` (types A..D,
  bursts of B of mean 5), against the flat `SEQ(A, B+)` and `SEQ(C, B+)`.
- *GLORIA Figure 1*: `SEQ(R, SEQ(P, T)+, D)`, `SEQ(A, R, SEQ(P, T)+, D)`,
  `SEQ(A, R, SEQ(P, T)+, C)` over a stream of orders (A? R (P T){k} then D or C, per district),
  against the flat `SEQ(R, P+, D)`, `SEQ(A, R, P+, D)`, `SEQ(A, R, P+, C)` over the same events.

Every query returns COUNT(*) and AVG of an attribute per district, WITHIN 60 s SLIDE 30 s, in
float mode on the CPU backend. Only flat patterns share Kleene bursts today
(docs/architecture.md section 3), so sharing changes the flat rows only.
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

WINDOW = "GROUPBY g WITHIN 60 s SLIDE 30 s"


def workload(patterns: list[str], attr_type: str) -> str:
    return ";\n".join(
        f"q{i + 1}: RETURN g, COUNT(*), AVG({attr_type}.y) PATTERN {p} {WINDOW}"
        for i, p in enumerate(patterns)
    )


def orders(n: int, seed: int = 7, districts: int = 8) -> pa.Table:
    """Orders: an optional AppOrder (A), a Request (R), Pickup-Travel pairs (P T, mean 3 pairs),
    then a Delivery (D) or a Cancel (C); one district `g` per order, one event per second."""
    rng = np.random.default_rng(seed)
    types: list[str] = []
    groups: list[int] = []
    while len(types) < n:
        order = (["A"] if rng.random() < 0.5 else []) + ["R"]
        order += ["P", "T"] * int(rng.geometric(1 / 3))
        order.append("D" if rng.random() < 0.8 else "C")
        types += order
        groups += [int(rng.integers(districts))] * len(order)
    return pa.table(
        {
            "type": types[:n],
            "time": np.arange(n, dtype=np.int64),
            "g": np.asarray(groups[:n], np.int64),
            "y": rng.uniform(0, 100, n),
        }
    )


CASES = [
    (
        "HAMLET Example 10",
        lambda n: kleene_stream(n, seed=3, types=("A", "B", "C", "D"), mean_burst=5, n_groups=8),
        ["(SEQ(A, B+))+", "(SEQ(C, B+))+"],
        ["SEQ(A, B+)", "SEQ(C, B+)"],
        "B",
    ),
    (
        "GLORIA Figure 1",
        orders,
        ["SEQ(R, SEQ(P, T)+, D)", "SEQ(A, R, SEQ(P, T)+, D)", "SEQ(A, R, SEQ(P, T)+, C)"],
        ["SEQ(R, P+, D)", "SEQ(A, R, P+, D)", "SEQ(A, R, P+, C)"],
        "R",
    ),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; {args.events:,} events; "
        f"float mode, CPU backend, best of {args.repeat}"
    )
    rows = []
    for name, stream, general, flat, attr_type in CASES:
        events = stream(args.events)
        for kind, patterns in (("general", general), ("flat", flat)):
            wl = workload(patterns, attr_type)
            for sharing in ("dynamic", "none"):

                def once(wl: str = wl, sharing: str = sharing) -> None:
                    gpu_hamlet.aggregate(
                        events,
                        wl,
                        backend="cpu",
                        sharing=sharing,
                        numeric="float",
                        on_overflow="null",
                    )

                seconds = best_time(once, args.repeat)
                rate = args.events / seconds / 1e6
                rows.append(
                    {
                        "case": name,
                        "patterns": kind,
                        "sharing": sharing,
                        "seconds": seconds,
                        "M_events_per_s": rate,
                    }
                )
                print(
                    f"{name:>18} {kind:>8} sharing={sharing:<8} {seconds:7.3f} s "
                    f"{rate:6.2f} M events/s   {'; '.join(patterns)}"
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"events": args.events, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

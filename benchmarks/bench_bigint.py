"""bigint at the HAMLET authors' scale (issue 21, part 1): the engine against a plain Python loop.

    python benchmarks/bench_bigint.py [--events 20000 100000] [--repeat 3] [--json OUT.json]

The authors' own workload (../shared/data/hamlet-synthetic): the 50 COUNT(*) queries of
HAMLET_DEFAULT_WORKLOAD.txt over the first N events of Stream_shared_10.txt, one window holding
them all, so counts reach hundreds of digits. Per N it times `aggregate(numeric="bigint")` (warm,
best of `--repeat`) and an independent loop written here from the files alone: per event and
query, Python integers updated position by position (skip-till-any-match, every trend counted).
Both must give the same 50 counts, or the benchmark stops. It also prints how many primes the
residues need (the count's bits over 31, or over 50 for the 32-lane passes of primes below 2^50)
and the passes the engine runs per query.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
from pathlib import Path
from typing import cast

import pyarrow as pa
from harness import best_time

import gpu_hamlet
from gpu_hamlet.core.numeric import primes_for_bits
from gpu_hamlet.core.rings import LANE_PRIME_BITS, residue_passes
from gpu_hamlet.datagen import load_hamlet_stream, load_hamlet_workload

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "hamlet-synthetic"
STREAM, WORKLOAD = "Stream_shared_10.txt", "HAMLET_DEFAULT_WORKLOAD.txt"


def python_loop(types: list[str], patterns: list[list[tuple[str, bool]]]) -> list[int]:
    """COUNT(*) of each SEQ pattern (element: type, Kleene plus) over all events, in Python ints.

    s[i] counts the partial trends ending at pattern position i. An event of position i's type
    starts a trend (i = 0) or extends those ending at i - 1, and with a Kleene plus also those
    ending at i itself. Positions are updated last to first, so each reads the counts from
    before the event (events have distinct times here)."""
    out = []
    for pattern in patterns:
        at: dict[str, list[int]] = {}
        for i, (typ, _) in enumerate(pattern):
            at.setdefault(typ, []).insert(0, i)
        plus = [k for _, k in pattern]
        s = [0] * len(pattern)
        for typ in types:
            for i in at.get(typ, ()):
                s[i] += (s[i - 1] if i else 1) + (s[i] if plus[i] else 0)
        out.append(s[-1])
    return out


def read_authors(data: Path, n: int) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """The first n event types of the stream and the workload's patterns, read with csv."""
    with open(data / STREAM, newline="") as fh:
        types = [row[1].strip() for _, row in zip(range(n), csv.reader(fh))]
    with open(data / WORKLOAD) as fh:
        patterns = [
            [(item.strip().rstrip("+"), item.strip().endswith("+")) for item in line.split(",")]
            for line in fh
            if line.strip()
        ]
    return types, patterns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--events", type=int, nargs="+", default=[20_000, 100_000])
    ap.add_argument("--repeat", type=int, default=3, help="engine calls per size (best counts)")
    ap.add_argument("--loop-repeat", type=int, default=1, help="Python loop runs per size")
    ap.add_argument("--data", type=Path, default=DATA, help="folder with the authors' files")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    stream: pa.Table = load_hamlet_stream(args.data / STREAM)
    workload = load_hamlet_workload(args.data / WORKLOAD)
    gpu_hamlet.aggregate(stream.slice(0, 200), workload, numeric="bigint")  # compile or load
    queries = len(workload.splitlines())
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"{queries} queries of {WORKLOAD} over the first N events of {STREAM}")  # fmt: skip
    print(f"{'N':>8} {'digits':>6} {'primes':>6} {'passes':>6} {'engine s':>9} "
          f"{'loop s':>8} {'loop/engine':>11}")  # fmt: skip
    rows = []
    for n in args.events:
        events = stream.slice(0, n)
        got: dict[str, object] = {}

        def engine(events: pa.Table = events) -> None:
            got["tables"] = gpu_hamlet.aggregate(events, workload, numeric="bigint")

        t_engine = best_time(engine, args.repeat)
        types, patterns = read_authors(args.data, n)
        t_loop = best_time(
            lambda: got.update(counts=python_loop(types, patterns)), args.loop_repeat
        )
        tables, counts = cast(dict[str, pa.Table], got["tables"]), cast(list[int], got["counts"])
        exact = [int(t["count"][0].as_py()) if t.num_rows else 0 for t in tables.values()]
        if exact != counts:
            wrong = [f"q{i + 1}" for i, (a, b) in enumerate(zip(exact, counts)) if a != b]
            raise SystemExit(f"N={n}: the engine and the Python loop differ on {wrong}")
        bits = max(c.bit_length() for c in counts)
        runs = residue_passes(bits + 2.0)
        n_primes = primes_for_bits(bits + 2.0, LANE_PRIME_BITS.get(runs[0][0], 31))
        passes = len(runs)
        digits = max(len(str(c)) for c in counts)
        rows.append(
            {"events": n, "digits": digits, "primes": n_primes, "passes": passes,
             "engine_s": t_engine, "loop_s": t_loop, "loop/engine": t_loop / t_engine}
        )  # fmt: skip
        print(f"{n:>8,} {digits:>6} {n_primes:>6} {passes:>6} {t_engine:>9.3f} {t_loop:>8.3f} "
              f"{t_loop / t_engine:>11.2f}", flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()

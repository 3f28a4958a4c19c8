"""Conditions between adjacent events (`S.p < NEXT(S).p`, issue 19): the engine's segment trees,
O(n log n) per window, against GRETA's predecessor scan, O(n^2), as one window grows from 10^3
to 10^6 events; in one run on one machine.

    python benchmarks/bench_adjacent.py [--sizes 1000 10000 100000 1000000] [--max-scan 100000]
        [--repeat 2] [--streams NASDAQ ridesharing] [--out benchmarks/results/adjacent]
    python benchmarks/bench_adjacent.py --sliding 200000

`--sliding N` instead times N NASDAQ-like ticks (one a second) under WITHIN 1 h with slides of
60, 30, 10 and 5 minutes: such windows run whole, each event copied into its WITHIN / SLIDE
windows, and the time should grow by that factor.

Two streams, one window holding all n events (one event per second):
- *NASDAQ*: closing prices as a random walk whose steps are drawn from the real close-to-close
  returns of every ticker of `../shared/data/NASDAQ_*.txt` (the files hold about 10^4 ticks; the
  walk reaches 10^6), pattern `S+ WHERE S.close < NEXT(S).close` (runs of rising prices);
- *ridesharing*: the Travel events of `gpu_hamlet.datagen.ridesharing`, pattern
  `T+ WHERE T.speed <= NEXT(T).speed` (trips whose speed never drops).

The engine runs `RETURN COUNT(*)` in float mode on the CPU backend (the count is beyond
float64 from about 10^4 events: `on_overflow='null'`; its own numbers carry an exponent). The
scan is written here only, for comparison: numba-compiled, each event summing the counts of all
earlier events with a smaller value, in float64, COUNT(*) only. Both agree (relative 1e-9) where
the count fits float64; scans beyond `--max-scan` events are not run but extrapolated as
c * n^2 from the largest measured one, and marked so.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from numba import njit
from report import Panel, line_panels, markdown_table

import gpu_hamlet
from gpu_hamlet.datagen import load_nasdaq, ridesharing

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"


@njit(cache=True)
def scan_count(t: np.ndarray, v: np.ndarray, strict: bool) -> float:
    """Trends of `S+` whose values rise (strictly or not) from each event to the next, by
    scanning every earlier event: c[i] = 1 + sum of c[j] over j < i, t[j] < t[i], v[j] < v[i]."""
    n = t.shape[0]
    c = np.empty(n)
    total = 0.0
    for i in range(n):
        s = 1.0
        for j in range(i):
            if t[j] < t[i] and (v[j] < v[i] if strict else v[j] <= v[i]):
                s += c[j]
        c[i] = s
        total += s
    return total


def nasdaq_walk(n: int, seed: int = 0) -> np.ndarray:
    """n closing prices: a walk from the first real close whose relative steps are drawn from
    the real close-to-close returns of every ticker."""
    returns = []
    first = None
    paths = sorted(glob.glob(str(DATA / "NASDAQ_*.txt")))
    if not paths:
        raise SystemExit(f"no NASDAQ_*.txt in {DATA}: use --streams ridesharing")
    for path in paths:
        table = load_nasdaq(path)
        types = np.asarray(table.column("type").to_pylist())
        close = table.column("close").to_numpy()
        for ticker in np.unique(types):
            c = close[types == ticker]
            first = first or float(c[0])
            returns.append(c[1:] / c[:-1] - 1.0)
    steps = np.concatenate(returns)
    rng = np.random.default_rng(seed)
    assert first is not None, "every NASDAQ file holds ticks"
    return np.round(first * np.cumprod(1.0 + rng.choice(steps, n)), 2)


def ridesharing_speeds(n: int) -> np.ndarray:
    """The speeds of n Travel events of the ridesharing generator, in stream order."""
    speeds: list[np.ndarray] = []
    got = 0
    seed = 0
    while got < n:
        table = ridesharing(max(2 * n, 10_000), seed=seed)
        travel = np.asarray(table.column("type").to_pylist()) == "Travel"
        speeds.append(table.column("speed").to_numpy()[travel])
        got += int(travel.sum())
        seed += 1
    return np.concatenate(speeds)[:n]


STREAMS = {
    "NASDAQ": (nasdaq_walk, "close", "<"),
    "ridesharing": (ridesharing_speeds, "speed", "<="),
}


def engine_run(values: np.ndarray, attr: str, op: str) -> tuple[float, float | None]:
    """(seconds, count) of the engine over one window of the values, one event per second."""
    n = values.shape[0]
    table = pa.table({"time": np.arange(n, dtype=np.int64), "type": np.full(n, "S"), attr: values})
    query = f"RETURN COUNT(*) PATTERN S+ WHERE S.{attr} {op} NEXT(S).{attr} WITHIN {n + 1} s"
    started = time.perf_counter()
    out = gpu_hamlet.aggregate(table, query, backend="cpu", numeric="float", on_overflow="null")
    seconds = time.perf_counter() - started
    return seconds, out["q1"].column("count")[0].as_py()


def best(fn, repeat: int):
    runs = [fn() for _ in range(repeat)]
    return min(runs, key=lambda r: r[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000, 1_000_000])
    ap.add_argument("--max-scan", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--streams", nargs="+", choices=list(STREAMS), default=list(STREAMS))
    ap.add_argument("--out", default=None, help="folder for results.json, results.md, PNG")
    ap.add_argument("--sliding", type=int, default=0, help="time sliding windows over N events")
    args = ap.parse_args()
    if args.sliding:
        sliding(args.sliding, args.repeat)
        return
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; CPU backend, float mode, "
        f"best of {args.repeat}"
    )
    engine_run(np.arange(10.0), "p", "<")  # compile and load the kernels first
    scan_count(np.arange(3), np.arange(3.0), True)
    rows = []
    for name in args.streams:
        make, attr, op = STREAMS[name]
        values = make(max(args.sizes))
        fit = None  # seconds per n^2 of the largest scan run
        for n in args.sizes:
            v = values[:n]
            seconds, count = best(lambda v=v: engine_run(v, attr, op), args.repeat)
            if n <= args.max_scan:

                def scan(v=v):
                    started = time.perf_counter()
                    total = scan_count(np.arange(n, dtype=np.int64), v, op == "<")
                    return time.perf_counter() - started, total

                scan_s, scan_total = best(scan, 1 if n > 10_000 else args.repeat)
                fit = scan_s / n**2
                measured = True
                if count is not None and np.isfinite(scan_total):
                    assert abs(count - scan_total) <= 1e-9 * scan_total, (
                        name,
                        n,
                        count,
                        scan_total,
                    )
            else:
                assert fit is not None, "the smallest size must be scanned"
                scan_s, measured = fit * n**2, False
            rows.append(
                {
                    "stream": name,
                    "events": n,
                    "engine_s": seconds,
                    "scan_s": scan_s,
                    "scan_measured": measured,
                    "ratio": scan_s / seconds,
                    "count": count,
                }
            )
            print(
                f"{name:>12} n={n:>9,} engine {seconds:8.3f} s ({n / seconds / 1e6:6.2f} M ev/s)"
                f"  scan {scan_s:10.2f} s{'' if measured else ' (extrapolated)'}"
                f"  scan/engine {scan_s / seconds:9.1f}"
            )
    if args.out:
        write(Path(args.out), rows, args)


def sliding(n: int, repeat: int) -> None:
    """Seconds per slide, and the ratio to tumbling windows against the copies per event."""
    values = nasdaq_walk(n)
    table = pa.table(
        {"time": np.arange(n, dtype=np.int64), "type": np.full(n, "S"), "close": values}
    )
    base = None
    for slide in (60, 30, 10, 5):
        query = "RETURN COUNT(*) PATTERN S+ WHERE S.close < NEXT(S).close WITHIN 1 h"
        query += f" SLIDE {slide} min"

        def once(query: str = query) -> tuple[float, None]:
            started = time.perf_counter()
            gpu_hamlet.aggregate(table, query, backend="cpu", numeric="float", on_overflow="null")
            return time.perf_counter() - started, None

        once()
        seconds = best(once, repeat)[0]
        base = base or seconds
        print(
            f"WITHIN 1 h SLIDE {slide:>2} min: {seconds:6.3f} s, {seconds / base:5.1f}x tumbling "
            f"({60 // slide} copies per event)"
        )


def write(out: Path, rows: list[dict], args: argparse.Namespace) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    table = markdown_table(
        ["stream", "events per window", "engine (s)", "scan (s)", "scan / engine"],
        [
            [
                r["stream"],
                f"{r['events']:,}",
                f"{r['engine_s']:.3f}",
                f"{r['scan_s']:.2f}" + ("" if r["scan_measured"] else " (extrapolated)"),
                f"{r['ratio']:.1f}",
            ]
            for r in rows
        ],
    )
    command = "python benchmarks/bench_adjacent.py " + " ".join(
        [f"--sizes {' '.join(map(str, args.sizes))}", f"--max-scan {args.max_scan}"]
        + [f"--streams {' '.join(args.streams)}"]
        + [f"--repeat {args.repeat}", f"--out {args.out}"]
    )
    (out / "results.md").write_text(
        f"# NEXT conditions: segment trees against the predecessor scan\n\n    {command}\n\n"
        f"Machine: {platform.machine()}, {os.cpu_count()} cores.\n\n{table}\n"
    )
    panels = []
    for name in args.streams:
        mine = [r for r in rows if r["stream"] == name]
        ns = [r["events"] for r in mine]
        panels.append(
            Panel(
                f"{name}: one window of n events",
                "events per window",
                "seconds",
                {
                    "segment trees (engine)": (ns, [r["engine_s"] for r in mine]),
                    "scan (measured)": (
                        ns,
                        [r["scan_s"] if r["scan_measured"] else None for r in mine],
                    ),
                    "scan (extrapolated)": (
                        ns,
                        [None if r["scan_measured"] else r["scan_s"] for r in mine],
                    ),
                },
                logy=True,
                logx=True,
            )
        )
    line_panels(
        out / "adjacent.png", "S+ WHERE S.x op NEXT(S).x: engine against O(n^2) scan", panels
    )


if __name__ == "__main__":
    main()

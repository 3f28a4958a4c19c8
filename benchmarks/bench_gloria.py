"""GLORIA's execution (issue 20): sharing='dynamic' (GLORIA's plan of shared SEQ transitions and
Kleene cycles, plus HAMLET's bursts) against 'none', 'static' and 'hamlet', on GLORIA's three
workload kinds over three streams; throughput and optimisation time against the number of
queries, as in GLORIA's Figures 10 to 13.

    python benchmarks/bench_gloria.py [--events 100000] [--queries 20 50 100] [--lengths 2 4]
        [--repeat 2] [--seconds S] [--streams ridesharing bursty NASDAQ] [--backend cpu]
        [--out benchmarks/results/gloria]

Streams of `--events` events:
- *ridesharing*: the HAMLET paper's generator. Its types are interleaved, so runs of a
  sub-pattern's events are short and little sharing pays there;
- *bursty*: runs of 40 events cycling through the body types T_0 .. T_(L-1), each between one
  of 5 prefix types A_i and one of 5 suffix types C_j, 10 ms apart;
- *runs*: types A to D in runs of 10 (`type_runs`), where queries SEQ(X, B+, Y) with COUNT and
  SUM share one-type pools start(X) and tran(B+, Y) by thirds, and prune a third of their events
  (not in the default `--streams`);
- *NASDAQ*: the real ticks of `../shared/data/NASDAQ_*.txt` (about 3,500 ticks of 7 tickers on
  1 Feb 2008, one per ticker and minute), merged and repeated one day later until `--events`.
Workloads (GLORIA section 8.1): *SEQ*, *Kleene* (a sub-pattern of `--lengths` types, flat and
nested) and *mixed* (one Kleene query per two SEQ queries). On ridesharing and NASDAQ they are
bench_plan_search.py's generators (prefixes, suffixes, GROUPBY and filters varied); on the
bursty stream SEQ(A_i, T_0, T_1, C_j), SEQ(A_i, SEQ(T_0, .., T_(L-1))+, C_j) and the two
mixed 2:1, COUNT(*), each over the stream of L body types (column L); off it, SEQ and mixed
(Kleene length 4) take no L. Windows of 30 min sliding by 10 min (1 min by 30 s on the
bursty stream); float mode (`--numeric exact` for the engine's default) with on_overflow='null'
(counts leave float64's range; the work is the same). Each cell: the best of `--repeat` warm
runs of `aggregate` on `--backend` (the CPU's by default; more for short cases: about 4 s of
rounds, up to 30; `--seconds S`: about S seconds of rounds per row, however many), each round
running the four modes in turn and `none` once more: "A/A" is that control's best time over
`none`'s, how far apart two best times of the same work land;
"opt ms" is GLORIA's search alone (template and plan, statistics of the stream's first 100,000
events), the best of 3, and "pools" the pools it may share (stage_sharing.py's SEARCH_S);
"plan ms" what `dynamic` decides on top of `hamlet` in a warm call (`stage_plan`: the gate,
the search where it passes, the chains cut), the best of 3. Writes
`results.json` and `throughput.png`, `optimisation.png` to `--out`; the table goes to stdout.
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
import os
import platform
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from bench_plan_search import RIDES, Vocabulary, kleene_workload, mixed_workload, seq_workload
from harness import best_in_turn, best_time
from report import Panel, line_panels

import gpu_hamlet
from gpu_hamlet.datagen import load_nasdaq, ridesharing
from gpu_hamlet.engine.evaluate import Context, planned_stages
from gpu_hamlet.engine.optimizer import COST_MODELS
from gpu_hamlet.engine.options import Options
from gpu_hamlet.engine.plan_search import StreamStats, find_plan
from gpu_hamlet.engine.sharing import RunStats
from gpu_hamlet.engine.stage_sharing import SAMPLE, shareable_stages
from gpu_hamlet.engine.transitions import TransitionTemplate

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
MODES = ("none", "static", "hamlet", "dynamic")
#: `none` once more in every round: its best time over `none`'s ("A/A") is how far apart two
#: best times of the same work land in the run.
CONTROL = "none again"
Workload = Callable[[int, int], str]  # (queries, length) -> workload text


def bursty(n: int, length: int, run: int = 40, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    body = [f"T{j}" for j in range(length)]
    types: list[str] = []
    while len(types) < n:
        types.append(f"A{rng.integers(5)}")
        types += [body[j % length] for j in range(run)]
        types.append(f"C{rng.integers(5)}")
    types = types[:n]
    return pa.table(
        {"time": pa.array(np.arange(n) * 10, pa.timestamp("ms")), "type": types, "x": rng.random(n)}
    )


def bursty_workload(n: int, length: int, kleene: bool, returns: str = "COUNT(*)") -> str:
    """Query i: SEQ(A{i % 5}, body, C{(i // 5) % 5}), the body a SEQ of `length` types (under
    Kleene plus if `kleene`); queries 25 and on keep the A events whose x is below 0.9, 0.8, 0.7
    (i // 25 = 1, 2, 3), so up to 100 queries are distinct: equal ones run once (`run_as`), and
    four copies of 25 measured 25 queries."""
    body = ", ".join(f"T{j}" for j in range(length))
    mid = f"SEQ({body})+" if kleene else body

    def where(i: int) -> str:
        return f" WHERE A{i % 5}.x < {1 - (i // 25) / 10:g}" if i >= 25 else ""

    return ";\n".join(
        f"{'k' if kleene else 's'}{i}: RETURN {returns} PATTERN SEQ(A{i % 5}, {mid}, "
        f"C{(i // 5) % 5}){where(i)} WITHIN 1 min SLIDE 30 s"
        for i in range(n)
    )


def type_runs(n: int, run: int = 10, seed: int = 0) -> pa.Table:
    """Types A to D in runs of `run` events, each run's type drawn at random (so runs of one
    type often meet), at random times about 5 s apart, in one partition."""
    rng = np.random.default_rng(seed)
    codes = np.repeat(rng.integers(0, 4, -(-n // run)), run)[:n]
    t = np.sort(rng.uniform(0, 5.0 * n, n))
    return pa.table(
        {
            "time": pa.array((t * 1000).astype(np.int64), pa.timestamp("ms")),
            "type": np.array(list("ABCD"))[codes],
            "x": rng.uniform(0, 10, n),
        }
    )


def type_runs_workload(n: int, returns: str = "COUNT(*), SUM(B.x)") -> str:
    """SEQ(X, B+, Y) for three pairs (X, Y) in turn: GLORIA's pools start(X) and tran(B+, Y)
    each have a class of a third of the queries (a performance cliff of `dynamic` before its
    stage gate weighed pruning and channels: 1.2-3.8x the best fixed mode)."""
    first, last = "ACD", "CDA"
    return ";\n".join(
        f"r{i}: RETURN {returns} PATTERN SEQ({first[i % 3]}, B+, {last[i % 3]}) WITHIN 10 min"
        for i in range(n)
    )


def nasdaq(n: int) -> pa.Table:
    """The real ticks, merged in time order, repeated a day later until n events."""
    paths = sorted(glob.glob(str(DATA / "NASDAQ_*.txt")))
    if not paths:
        raise SystemExit(f"no NASDAQ_*.txt in {DATA}: leave NASDAQ out of --streams")
    day = pa.concat_tables([load_nasdaq(p) for p in paths])
    day = day.take(pc.sort_indices(day, [("time", "ascending")]))
    copies = []
    for d in range(-(-n // day.num_rows)):
        shifted = pc.add(day.column("time"), pa.scalar(d * 86_400, pa.duration("s")))
        copies.append(day.set_column(day.schema.get_field_index("time"), "time", shifted))
    return pa.concat_tables(copies).slice(0, n)


def tickers(table: pa.Table) -> Vocabulary:
    types = tuple(sorted(set(table.column("type").to_pylist())))
    return Vocabulary(types, ("",), ("", " WHERE {t}.close > 40", " WHERE {t}.volume < 20000"))


def workloads(stream: str, v: Vocabulary) -> dict[str, Workload]:
    if stream == "runs":
        return {"X B+ Y": lambda n, L: type_runs_workload(n)}
    if stream == "bursty":
        return {
            "SEQ": lambda n, L: bursty_workload(n, 2, False),
            "Kleene": lambda n, L: bursty_workload(n, L, True),
            "mixed 1:2": lambda n, L: ";\n".join(
                [bursty_workload(n - n // 3, 2, False), bursty_workload(n // 3, L, True)]
            ),
        }
    return {
        "SEQ": lambda n, L: seq_workload(n, 0, v),
        "Kleene": lambda n, L: kleene_workload(n, L, 0, v),
        "mixed 1:2": lambda n, L: mixed_workload(n, 2, 0, v),
    }


def timed(
    events: pa.Table,
    text: str,
    repeat: int,
    numeric: str = "float",
    seconds: float | None = None,
    backend: str = "cpu",
) -> tuple[dict[str, float], RunStats]:
    """Each mode's best of at least `repeat` rounds that run the modes in turn, and `none` once
    more as CONTROL (harness.py `best_in_turn`; `seconds`: about that long in rounds, however
    many), after a warm-up call per mode; and the statistics of one more, untimed, run of
    `dynamic`."""

    def once(mode: str, stats: RunStats | None = None) -> None:
        gpu_hamlet.aggregate(
            events,
            text,
            sharing=mode,
            numeric=numeric,
            on_overflow="null",
            backend=backend,
            stats=stats,
        )

    for mode in MODES:
        gpu_hamlet.aggregate(
            events.slice(0, 2000),
            text,
            sharing=mode,
            numeric=numeric,
            on_overflow="null",
            backend=backend,
        )
    calls = {mode: functools.partial(once, mode) for mode in MODES}
    calls[CONTROL] = calls["none"]
    best = best_in_turn(calls, repeat, seconds)
    stats = RunStats()
    once("dynamic", stats)  # untimed: recording every snapshot costs a few percent
    return best, stats


def search_ms(text: str, stats: StreamStats) -> float:
    workload = gpu_hamlet.parse_workload(text)
    return best_time(lambda: find_plan(TransitionTemplate.of(workload), stats), 3) * 1e3


def plan_ms(events: pa.Table, text: str, backend: str = "cpu", rounds: int = 3) -> float:
    """What `dynamic` decides on top of `hamlet`, warm: `planned_stages` (the gate with the
    queries' pruning, the search when it passes, the chains cut to what pays, with the
    backend's cost model), best of `rounds`."""
    options = Options(backend, "dynamic", "float", "null", "time", "type")
    ctx = Context.of(events, text, options)
    # (rounds + 1: the first call fills shareable_stages' cache, as a warm call)
    return best_time(lambda: planned_stages(ctx, COST_MODELS[backend]), rounds + 1) * 1e3


def plots(out: Path, points: list[dict], events: int) -> None:
    keys = sorted({(p["stream"], p["kind"], p["L"]) for p in points}, key=str)
    panels = []
    for stream, kind, L in keys:
        cell = sorted(
            (p for p in points if (p["stream"], p["kind"], p["L"]) == (stream, kind, L)),
            key=lambda p: p["Q"],
        )
        series = {
            m: ([p["Q"] for p in cell], [events / p["seconds"][m] / 1e3 for p in cell])
            for m in MODES
        }
        title = f"{stream}, {kind}" + (f" (L = {L})" if L is not None else "")
        panels.append(Panel(title, "queries", "thousand events/s", series))
    line_panels(out / "throughput.png", "Throughput against the number of queries", panels)
    opt = []
    for stream in sorted({p["stream"] for p in points}):
        series = {}
        cells = {(p["kind"], p["L"]) for p in points if p["stream"] == stream}
        for kind, L in sorted(cells, key=str):
            cell = sorted(
                (p for p in points if (p["stream"], p["kind"], p["L"]) == (stream, kind, L)),
                key=lambda p: p["Q"],
            )
            label = kind + (f" L={L}" if L is not None else "")
            series[label] = ([p["Q"] for p in cell], [p["search_ms"] for p in cell])
        opt.append(Panel(stream, "queries", "GLORIA search, ms", series))
    line_panels(out / "optimisation.png", "Optimisation time against the number of queries", opt)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--queries", type=int, nargs="+", default=[20, 50, 100])
    ap.add_argument("--lengths", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--streams", nargs="+", default=["ridesharing", "bursty", "NASDAQ"])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "gloria")
    ap.add_argument("--numeric", default="float", choices=["float", "exact"])
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument(
        "--plans-only",
        action="store_true",
        help="no mode is run: each row's opt ms and plan ms only (plan ms the best of 30)",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"# {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
    print(
        f"# {args.events:,} events per stream; numeric={args.numeric}; {args.backend.upper()} "
        f"backend; seconds, best of {args.repeat}"
    )
    head = " ".join(f"{m:>8}" for m in MODES)
    if args.plans_only:
        print(f"{'stream':<12} {'workload':<10} {'Q':>4} {'L':>3} {'opt ms':>7} {'plan ms':>7}")
    else:
        print(
            f"{'stream':<12} {'workload':<10} {'Q':>4} {'L':>3} {head} {'dyn/best':>9} {'A/A':>5} "
            f"{'none/dyn':>9} {'opt ms':>7} {'pools':>5} {'plan ms':>7} shared runs"
        )
    points = []
    for stream in args.streams:
        vocab = RIDES
        if stream == "NASDAQ":
            table = nasdaq(args.events)
            vocab = tickers(table)
        elif stream == "ridesharing":
            table = ridesharing(args.events, seed=1)
        elif stream == "runs":
            table = type_runs(args.events)
        for kind, make in workloads(stream, vocab).items():
            # Off the bursty stream (whose runs cycle through L body types), the SEQ and mixed
            # workloads take no length (mixed: Kleene length 4): one row each.
            takes_length = kind == "Kleene" or stream == "bursty"
            for L in args.lengths if takes_length else args.lengths[:1]:
                if stream != "bursty" and kind == "Kleene" and L + 3 > len(vocab.types):
                    print(
                        f"# {stream} Kleene L={L}: its {len(vocab.types)} types hold bodies of "
                        f"at most {len(vocab.types) - 3} (a prefix, a suffix and a nesting type "
                        "besides)"
                    )
                    continue
                if stream == "bursty":
                    table = bursty(args.events, L)
                sample = table.column("type").slice(0, SAMPLE).to_pylist()
                stats = StreamStats.of(sample)
                for n in args.queries:
                    text = make(n, L)
                    shown = f"{L:3d}" if takes_length else "  -"
                    if args.plans_only:
                        opt, decide = search_ms(text, stats), plan_ms(table, text, args.backend, 30)
                        print(f"{stream:<12} {kind:<10} {n:4d} {shown} {opt:7.1f} {decide:7.2f}")
                        continue
                    secs, rs = timed(
                        table, text, args.repeat, args.numeric, args.seconds, args.backend
                    )
                    st = [s for s in rs.sets if s.stage]
                    runs = f"{sum(s.shared for s in st)}/{sum(s.bursts for s in st)}"
                    opt, decide = search_ms(text, stats), plan_ms(table, text, args.backend)
                    pools = len(shareable_stages(gpu_hamlet.parse_workload(text))[1])
                    best = min(secs[m] for m in MODES if m != "dynamic")
                    cells = " ".join(f"{secs[m]:8.3f}" for m in MODES)
                    print(
                        f"{stream:<12} {kind:<10} {n:4d} {shown} {cells} "
                        f"{secs['dynamic'] / best:9.2f} {secs[CONTROL] / secs['none']:5.2f} "
                        f"{secs['none'] / secs['dynamic']:9.2f} "
                        f"{opt:7.1f} {pools:5d} {decide:7.1f} {runs}",
                        flush=True,
                    )
                    points.append(
                        {"stream": stream, "kind": kind, "Q": n, "seconds": secs}
                        | {"L": L if takes_length else None}
                        | {"search_ms": opt, "pools": pools, "plan_ms": decide}
                        | {"shared_runs": runs}
                    )
    if args.plans_only:
        return
    (args.out / "results.json").write_text(json.dumps(points, indent=1) + "\n")
    plots(args.out, points, args.events)


if __name__ == "__main__":
    main()

"""Calibrate the optimizer's cost model (gpu_hamlet/engine/optimizer.py, EngineCostModel) on a
backend.

    python benchmarks/calibrate_costs.py [--backend cpu] [--events 400000]

Measures, on the backend's own kernels:
- base_s, event_s: segment kernel seconds per event, and per event and state channel (vector
  mode, a line fitted over 1 to 4 channels: intercept and slope);
- coef_s: burst-coefficient kernel seconds per burst event per channel;
- macro: the cost of a macro row (a shared burst applied to one query) in events;
- class_s: seconds of bookkeeping per shared (burst, class), measured end to end: static sharing
  over bursts of one event (nothing to gain) minus no sharing, per shared class, for ten queries
  in five filter groups;
- set_s, query_s: the fixed costs of sharing in a call (analysing a set; a query's kernel run
  reading it), measured end to end: static sharing minus no sharing over 300 events (nothing to
  gain), for 10 and 50 of bench_engine.py's queries: the difference grows by query_s per run of
  a query reading a set, and set_s per set;
- set_row_s, set_run_s: the analysis of a set (`SharedBursts`: burst ids, extents, the
  collapsed stream) per sorted row and per run of its Kleene type, fitted over two sizes and two
  burst lengths;
- stream_row_s: a filter group's own stream of the set's rows (where it shares some bursts and
  not others) per row of the set, fitted over two sizes;
- the engine's cost of a query row end to end (`row_cost`): how `aggregate` with no sharing
  grows with the events, 50 queries less 10, per row their kernels run.
Prints an `EngineCostModel(...)` line to paste into optimizer.py with this command and machine.
On the GPU base_s and event_s are scaled so that a row costs what it costs end to end: a lone
call's kernel time per event is its launch and transfers spread over its events, while the
engine launches the runs of all queries at once (BENCHMARKS.md, cost model calibration). The CPU
line keeps the kernel's figures, and prints the end-to-end ratio beside them.
"""

from __future__ import annotations

import argparse
import functools
import platform
import time

import numpy as np
from bench_engine import TYPES, kleene_queries
from harness import best_time

import gpu_hamlet
from gpu_hamlet.datagen import kleene_sharing_workload, kleene_stream
from gpu_hamlet.engine.backend import select_backend
from gpu_hamlet.engine.burst_slots import run_lengths
from gpu_hamlet.engine.evaluate import Context
from gpu_hamlet.engine.optimizer import COST_MODELS
from gpu_hamlet.engine.options import Options
from gpu_hamlet.engine.sharing import (
    RunStats,
    SharableSet,
    SharedBursts,
    analyze,
    kleene_roles,
    query_runs,
)
from gpu_hamlet.query.pattern import PatternElement, Seq
from gpu_hamlet.query.plan import Template


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--events", type=int, default=400_000)
    args = ap.parse_args()
    be = select_backend(args.backend)
    n = args.events
    rng = np.random.default_rng(0)
    tpl = Template.of(Seq((PatternElement("A"), PatternElement("B", True), PatternElement("C"))))
    pid = np.zeros(n, np.int64)
    seg = np.arange(n, dtype=np.int64) // 1000
    t = np.arange(n, dtype=np.int64)
    pos = rng.choice([0, 1, 1, 1, 2], n).astype(np.int32)
    mseg = np.full(n, -1, np.int64)
    per_channel = []
    for nch in (1, 2, 3, 4):
        W = np.zeros((nch, n, 2))
        W[:, :, 0] = 0.5
        MU, K = np.zeros((0, 1, 2)), np.zeros((0, nch, 2))
        snap = np.zeros((n, 1, 2))
        be.segment_maps("xfloat", pid, seg, t, pos, W, MU, K, mseg, tpl, False, snap)
        per_channel.append(
            best_time(
                lambda: be.segment_maps(
                    "xfloat", pid, seg, t, pos, W, MU, K, mseg, tpl, False, snap
                ),
                5,
            )
        )
    # The same events as macro rows (each its own coefficients): their cost relative to events.
    W = np.zeros((2, n, 2))
    W[:, :, 0] = 0.5
    MU, K = np.full((n, 1, 2), 0.5), np.full((n, 2, 2), 0.5)
    snap = np.zeros((n, 1, 2))
    every = np.arange(n, dtype=np.int64)
    be.segment_maps("xfloat", pid, seg, t, pos, W, MU, K, every, tpl, False, snap)
    macro = (
        best_time(
            lambda: be.segment_maps("xfloat", pid, seg, t, pos, W, MU, K, every, tpl, False, snap),
            5,
        )
        / per_channel[1]
    )
    slope, intercept = np.polyfit([1, 2, 3, 4], per_channel, 1)
    event_s, base_s = float(slope) / n, float(intercept) / n
    burst = np.repeat(np.arange(n // 20), 20)[:n].astype(np.int64)
    coef = []
    for nch in (1, 3):
        W = np.zeros((nch, burst.shape[0], 2))
        W[:, :, 0] = 0.5
        nseg = int(burst[-1]) + 1
        be.burst_coefficients("xfloat", burst, t[: burst.shape[0]], W, nseg)
        coef.append(
            best_time(
                lambda: be.burst_coefficients("xfloat", burst, t[: burst.shape[0]], W, nseg), 5
            )
        )
    coef_s = (coef[1] - coef[0]) / 2 / burst.shape[0]
    # Bookkeeping per shared class: bursts of one B event (nothing to gain), ten queries in five
    # filter groups, so that bursts split into several classes as with per-query predicates.
    ev = kleene_stream(n, seed=1, types=("A", "B"), mean_burst=1.0, mean_other_run=1.0)
    wl = ";".join(
        f"RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.x < {2 + i % 5} WITHIN 1 min"
        for i in range(10)
    )
    stats = RunStats()
    gpu_hamlet.aggregate(
        ev, wl, sharing="static", numeric="float", backend=args.backend, stats=stats
    )
    shared = best_time(
        lambda: gpu_hamlet.aggregate(
            ev, wl, sharing="static", numeric="float", backend=args.backend
        ),
        3,
    )
    alone = best_time(
        lambda: gpu_hamlet.aggregate(ev, wl, sharing="none", numeric="float", backend=args.backend),
        3,
    )
    classes = sum(s.graphlet_snapshots + s.event_snapshots for s in stats.sets)
    # With one-event bursts the per-event work is the same both ways; what remains is the
    # coefficient pass (count channel) and the bookkeeping.
    class_s = max((shared - alone) / max(classes, 1) - coef_s, 0.0)
    set_s, query_s = fixed_costs(args.backend)
    set_row_s, set_run_s = analysis_cost(args.backend, n)
    stream_row_s = stream_cost(args.backend, n)
    row_s, width = row_cost(args.backend, n)
    scale = row_s / (base_s + width * event_s)
    print(f"machine: {platform.machine()}, backend {be.name}, {n:,} events")
    print(f"segment kernel s per event by channels 1..4: {[f'{x / n:.2e}' for x in per_channel]}")
    print(
        f"end to end, sharing='none': {row_s:.2e} s per query row of {width:.2f} channels, "
        f"{scale:.3f}x what the kernel's figures give it"
    )
    if be.name == "gpu":
        base_s, event_s = base_s * scale, event_s * scale
    print(
        f"EngineCostModel(base_s={base_s:.2e}, event_s={event_s:.2e}, coef_s={coef_s:.2e}, "
        f"class_s={class_s:.2e}, macro={macro:.2f}, set_s={set_s:.2e}, query_s={query_s:.2e}, "
        f"set_row_s={set_row_s:.2e}, set_run_s={set_run_s:.2e}, stream_row_s={stream_row_s:.2e})"
    )


def fixed_costs(backend: str) -> tuple[float, float]:
    """(set_s, query_s): static minus none over 300 events for 10 and 50 queries, as a line in
    the kernel runs of the queries that read a set (`query_runs`; best of 30 calls each, so
    that the small calls' noise drops)."""
    ev = kleene_stream(300, seed=7, types=TYPES, mean_burst=20.0, n_groups=8)
    points = []
    for k in (10, 50):
        wl = kleene_queries(k)
        stats = RunStats()
        gpu_hamlet.aggregate(
            ev, wl, sharing="static", numeric="float", backend=backend, stats=stats
        )

        def call(mode: str, wl: str = wl) -> None:
            gpu_hamlet.aggregate(
                ev, wl, sharing=mode, numeric="float", backend=backend, on_overflow="null"
            )

        diff = [best_time(functools.partial(call, mode), 30) for mode in ("static", "none")]
        options = Options(backend, "static", "float", "null", "time", "type")
        plans = Context.of(ev, wl, options).plans
        runs = sum(query_runs(plans[n]) for s in stats.sets for n in s.queries)
        points.append((len(stats.sets), runs, diff[0] - diff[1]))
    (s1, q1, d1), (s2, q2, d2) = points
    assert s1 == s2, "the same sets at both sizes"
    query_s = (d2 - d1) / (q2 - q1)
    return max((d1 - query_s * q1) / s1, 0.0), max(query_s, 0.0)


def analysis_cost(backend: str, n: int) -> tuple[float, float]:
    """(set_row_s, set_run_s): seconds of analysing a set (constructing `SharedBursts`) per
    sorted row and per run of its Kleene type (`run_lengths`: burst ids, extents and slots grow
    with both), a plane fitted to the best of five at n / 4 and n events of five queries of
    HAMLET's Kleene-sharing workload over bursts of mean 5 and 50."""
    points = []
    for burst in (5.0, 50.0):
        for size in (n // 4, n):
            ev = kleene_stream(size, seed=3, types=TYPES, mean_burst=burst, mean_other_run=3.0)
            wl = kleene_sharing_workload(5, "B", [t for t in TYPES if t != "B"])
            options = Options(backend, "static", "float", "null", "time", "type")
            ctx = Context.of(ev, wl, options)
            sset = analyze(ctx.runs).sets[0]
            q0 = sset.queries[0]
            keys = ctx.parts.keys(q0.partition_attrs, len(q0.groupby))
            role = kleene_roles(sset, ctx.ev, ctx.matcher)
            assert role is not None, "the stream has B events"
            kleene_runs = int(run_lengths(keys.codes, keys.pid, role).sum())

            def analyse(ctx: Context = ctx, sset: SharableSet = sset, keys=keys) -> None:
                SharedBursts(
                    ctx.ev, ctx.attrs, ctx.be, sset, keys, ctx.plans, ctx.matcher, "static",
                    COST_MODELS[ctx.be.name],
                )  # fmt: skip

            analyse()
            points.append((keys.codes.shape[0], kleene_runs, best_time(analyse, 5)))
    rows, runs, seconds = (np.asarray(x, np.float64) for x in zip(*points))
    fit = np.linalg.lstsq(np.stack([np.ones_like(rows), rows, runs], 1), seconds, rcond=None)[0]
    return max(float(fit[1]), 0.0), max(float(fit[2]), 0.0)


def stream_cost(backend: str, n: int) -> float:
    """stream_row_s: seconds per row of a set for each filter group that reads a stream of its
    own (`SharedBursts._group_stream`, with its slots by type and its filters' drops). A set
    that shares no burst gives every group one; the first query of a group to read its slots
    (`compressed`) makes them, a second one reuses them: the difference, a group's mean, grows
    with the set's rows from n / 4 to n events (bench_sharing.py's short bursts, 18 queries in
    9 filter groups; best of 3)."""
    per_size = []
    for size in (n // 4, n):
        ev = kleene_stream(size, seed=4, types=TYPES, mean_burst=1.5, mean_other_run=3.0)
        wl = kleene_sharing_workload(
            18,
            "B",
            [t for t in TYPES if t != "B"],
            returns="COUNT(*), SUM(B.x)",
            per_query_where=[f"B.x < {1 + j}" for j in range(9)],
        )
        ctx = Context.of(ev, wl, Options(backend, "dynamic", "float", "null", "time", "type"))
        sset = analyze(ctx.runs).sets[0]
        keys = ctx.parts.keys(sset.queries[0].partition_attrs, len(sset.queries[0].groupby))
        best = float("inf")
        for _ in range(3):
            sb = SharedBursts(
                ctx.ev, ctx.attrs, ctx.be, sset, keys, ctx.plans, ctx.matcher, "none",
                COST_MODELS[ctx.be.name],
            )  # fmt: skip
            first: dict[int, float] = {}  # per group: its first query's read, and a second's
            again: dict[int, float] = {}
            for q in sset.queries:
                w = ctx.plans[q.name].windowing
                window = None if w.full else w.seg  # as QueryRows reads the slots
                t0 = time.perf_counter()
                sb.compressed(q, ctx.plans[q.name].template, ctx.matcher, w.within, window=window)
                g = int(sb.group[sb.index[q.name]])
                (again if g in first else first)[g] = time.perf_counter() - t0
            best = min(best, sum(first[g] - again[g] for g in first) / len(first))
        per_size.append((sb.set_idx.shape[0], best))
    (r1, c1), (r2, c2) = per_size
    return max((c2 - c1) / (r2 - r1), 0.0)


def row_cost(backend: str, n: int) -> tuple[float, float]:
    """(seconds per query row of `aggregate` with no sharing, the rows' mean channels): the
    growth of the best of three calls from n / 4 to n events, 50 queries less 10 (so
    that neither what each query pays per call nor what a call pays at all counts), over the
    growth of the rows their segment kernels run (recorded on the CPU backend)."""
    from cpu_fallback import CpuBackend
    from gpu_hamlet.core.weights import as_array
    from gpu_hamlet.engine.backend import RecordingBackend

    seconds, rows, weighted = {}, {}, {}
    small = n // 4
    for size in (small, n):
        ev = kleene_stream(size, seed=7, types=TYPES, mean_burst=20.0, n_groups=8)
        for k in (10, 50):
            wl = kleene_queries(k)
            rec = RecordingBackend(CpuBackend())
            gpu_hamlet.aggregate(ev, wl, sharing="none", numeric="float", backend=rec)
            calls = [a for step, a in rec.calls if step == "segment_maps"]
            rows[size, k] = sum(a[1].shape[0] for a in calls)
            weighted[size, k] = sum(a[1].shape[0] * as_array(a[5]).shape[0] for a in calls)

            def call(ev=ev, wl=wl) -> None:
                gpu_hamlet.aggregate(ev, wl, sharing="none", numeric="float", backend=backend)

            call()
            seconds[size, k] = best_time(call, 3)
    grow = {k: (seconds[n, k] - seconds[small, k], rows[n, k] - rows[small, k]) for k in (10, 50)}
    row_s = (grow[50][0] - grow[10][0]) / (grow[50][1] - grow[10][1])
    return row_s, weighted[n, 50] / rows[n, 50]


if __name__ == "__main__":
    main()

"""Calibrate the bookkeeping of GLORIA's shared stages (gpu_hamlet/engine/stage_sharing.py) on
a backend: the costs a Q-set's runs must save, its cost model's stage_row_s, stage_stream_s,
stage_block_s and stage_fma_s (gpu_hamlet/engine/optimizer.py).

    python benchmarks/calibrate_stages.py [--backend cpu] [--events 50000] [--repeat 3]

Per case (bursty streams with runs of 3, 10 and 40 events, SEQ chains and Kleene cycles of 2 and
4 types, 10 and 40 queries, SEQ chains of 2 types over runs cycling through 6 and 10, a Kleene
cycle of 8 types, and one case of COUNT and SUM, whose block rows cost more; streams of type
runs, whose one-type pools queries `SEQ(X, B+, Y)` share and prune, with one channel and two;
ridesharing Kleene workloads, whose runs are short) it times
sharing="dynamic" with the gate open against sharing="hamlet" (the same, without GLORIA's
stages), float mode, best of `--repeat`. The gate open (`MIN_GAIN` at -inf) keeps the plan and
the cut's ranking but builds every stretch the cut ranks, paying or not, and lets each share
the runs that the per-run model says pay. The difference, less the plan's own time (measured
in the same calls, and paid by `dynamic` whatever it builds), is fitted by least squares, with
no coefficient below zero, as
    -alpha * saved + per_row * sum of nq * slots + per_event * sum of stream
    + per_block * sum of nq * copies * shared runs + per_fma * sum of their multiply-adds,
over the Q-sets built: saved what the per-run model (`SharedStages.saved_per_run`) says their
shared runs save, nq a Q-set's queries, slots the rows each reads (events outside shared runs,
one per shared run), stream the events of its stream (cut into runs whether or not any is
shared), copies its queries' mean windows holding a pane (a block row runs in each). A Q-set
pays when alpha * saved exceeds its costs, so stage_row_s = per_row / alpha and
stage_stream_s = per_event / alpha. stage_block_s = per_block / alpha is a block row's cost
per query and window beyond its multiply-adds, and stage_fma_s = per_fma / alpha the cost of
one of those (width^2 (L + 1) (L + 2) / 2 a block row); the timed runs use both at 0, and so
does `saved`.
Prints each case, the fit, and the fields to paste into the backend's EngineCostModel.
"""

from __future__ import annotations

import argparse
import math
import platform
import time
import warnings
from dataclasses import replace
from unittest.mock import patch

import numpy as np
import pyarrow as pa
from bench_gloria import bursty, bursty_workload, type_runs, type_runs_workload
from bench_plan_search import kleene_workload
from harness import best_time

import gpu_hamlet
from gpu_hamlet import AbsentTypeWarning
from gpu_hamlet.datagen import ridesharing
from gpu_hamlet.engine import evaluate, stage_sharing
from gpu_hamlet.engine.optimizer import COST_MODELS
from gpu_hamlet.engine.stage_sharing import SharedStages, block_multiply_adds


def cases(n: int) -> list[tuple[str, pa.Table, str]]:
    out = []
    for run in (3, 10, 40):
        for L in (2, 4):
            ev = bursty(n, L, run=run)
            for kleene in (False, True):
                for q in (10, 40):
                    kind = "Kleene" if kleene else "SEQ"
                    out.append(
                        (f"bursty run {run} {kind} L={L} Q={q}", ev, bursty_workload(q, L, kleene))
                    )
    # Runs that cycle through more types than the queries read: few events per shared run.
    for body, qs in ((10, (10, 40)), (6, (40,))):
        ev = bursty(n, body)
        for q in qs:
            out.append((f"bursty body {body} SEQ L=2 Q={q}", ev, bursty_workload(q, 2, False)))
    # A cycle of 8 types: block rows of many multiply-adds (stage_fma_s).
    out.append(
        ("bursty run 40 Kleene L=8 Q=40", bursty(n, 8, run=40), bursty_workload(40, 8, True))
    )
    # Queries of two channels (COUNT and SUM): a block row's cost grows with their square.
    ev = bursty(n, 4, run=10)
    two = "COUNT(*), SUM(T0.x)"
    out.append(("bursty run 10 SEQ L=4 Q=40 SUM", ev, bursty_workload(40, 4, False, two)))
    # Streams of type runs whose one-type pools GLORIA shares (the queries prune a third).
    for run in (10, 40):
        ev = type_runs(n, run)
        for label, returns in (("COUNT", "COUNT(*)"), ("SUM", "COUNT(*), SUM(B.x)")):
            case = f"type runs {run} X B+ Y Q=20 {label}"
            out.append((case, ev, type_runs_workload(20, returns)))
    rides = ridesharing(n, seed=1)
    for L in (2, 4):
        for q in (20, 100):
            out.append((f"ridesharing Kleene L={L} Q={q}", rides, kleene_workload(q, L, 0)))
    return out


def timed(events: pa.Table, text: str, mode: str, backend: str, repeat: int) -> float:
    def once() -> None:
        gpu_hamlet.aggregate(
            events, text, sharing=mode, numeric="float", on_overflow="null", backend=backend
        )

    once()
    return best_time(once, repeat)


def gate_open(events: pa.Table, text: str, backend: str, repeat: int) -> tuple[float, float, list]:
    """dynamic's time with the gate open and stage_block_s and stage_fma_s at 0 (which are fitted
    here), the plan's time in it (the least of its calls), and (model savings, nq * slots,
    stream events, nq * copies * shared runs, their block rows' multiply-adds) per Q-set
    built."""
    sets: list[SharedStages] = []
    plan_s: list[float] = []
    init = SharedStages.__init__
    plan = evaluate.stage_plan

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        sets.append(self)

    def timed_plan(*args, **kwargs):
        t0 = time.perf_counter()
        out = plan(*args, **kwargs)
        plan_s.append(time.perf_counter() - t0)
        return out

    with (
        patch.object(stage_sharing, "MIN_GAIN", -np.inf),
        patch.dict(
            COST_MODELS,
            {backend: replace(COST_MODELS[backend], stage_block_s=0.0, stage_fma_s=0.0)},
        ),
        patch.object(SharedStages, "__init__", spy),
        patch.object(evaluate, "stage_plan", timed_plan),
    ):
        t = timed(events, text, "dynamic", backend, repeat)
        sets.clear()  # once more, to read one call's sets
        gpu_hamlet.aggregate(
            events, text, sharing="dynamic", numeric="float", on_overflow="null", backend=backend
        )
        model = COST_MODELS[backend]
        out = []
        for s in sets:
            if s.nruns == 0 or s.slots is None:  # the stream was cut into runs, none shared
                out.append((0.0, 0, s.events, 0.0, 0.0))
                continue
            nq = len(s.stats.queries)
            length = np.bincount(s.ev_run, minlength=s.nruns).astype(np.float64)
            saved = s._saved(length, nq, model)
            blocks = nq * s.copies * s.nruns
            fmas = blocks * float(block_multiply_adds(len(s.types), s.width))
            out.append((saved, nq * s.slots.idx.size, s.events, blocks, fmas))
    return t, min(plan_s, default=0.0), out


def nonnegative_fit(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with no negative coefficient (a cost below zero means nothing): a column
    whose coefficient comes out negative is fixed at 0 and the others fitted again."""
    free = list(range(X.shape[1]))
    coef = np.zeros(X.shape[1])
    while free:
        sol, *_ = np.linalg.lstsq(X[:, free], y, rcond=None)
        if (sol >= 0).all():
            coef[free] = sol
            break
        free.pop(int(np.argmin(sol)))
    return coef


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    warnings.simplefilter("ignore", AbsentTypeWarning)  # bursty runs of 3 never reach T3
    print(
        f"# {platform.machine()} {platform.processor() or ''}, backend {args.backend}, "
        f"{args.events} events, best of {args.repeat}"
    )
    head = (
        *("case", "hamlet s", "open s", "plan s", "Q-sets"),
        *("saved s", "nq slots", "stream", "blocks", "fmas"),
    )
    print("{:36s} {:>9s} {:>9s} {:>7s} {:>6s} {:>8s} {:>9s} {:>8s} {:>8s} {:>9s}".format(*head))
    rows, ys, names = [], [], []
    for name, ev, text in cases(args.events):
        base = timed(ev, text, "hamlet", args.backend, args.repeat)
        t, plan_s, sets = gate_open(ev, text, args.backend, args.repeat)
        row = [-sum(c[0] for c in sets), *(sum(c[i] for c in sets) for i in (1, 2, 3, 4))]
        rows.append(row)
        ys.append(t - plan_s - base)
        names.append(name)
        print(
            f"{name:36s} {base:9.4f} {t:9.4f} {plan_s:7.4f} {len(sets):6d} {-row[0]:8.4f} "
            f"{row[1]:9.0f} {row[2]:8.0f} {row[3]:8.0f} {row[4]:9.0f}"
        )
    X, y = np.asarray(rows, np.float64), np.asarray(ys)
    alpha, per_row, per_event, per_block, per_fma = coef = nonnegative_fit(X, y)
    fit = X @ coef
    print(f"\n{'case (open - plan - hamlet)':36s} {'measured s':>10s} {'fitted s':>9s}")
    for name, got, want in zip(names, y, fit, strict=True):
        print(f"{name:36s} {got:10.4f} {want:9.4f}")
    # A Q-set pays when alpha * saved exceeds its costs: the thresholds in the model's terms.
    print(f"\nalpha = {alpha:.3g} (measured seconds saved per modelled second)")
    if alpha <= 0.0:  # small or noisy streams: no saving measured, so none would pay
        print("# no Q-set saved measurable time: every threshold is infinite; take more events")
    for name, cost in (
        ("stage_row_s", per_row),
        ("stage_stream_s", per_event),
        ("stage_block_s", per_block),
        ("stage_fma_s", per_fma),
    ):
        print(f"{name} = {cost / alpha if alpha > 0.0 else math.inf:.2g}")


if __name__ == "__main__":
    main()

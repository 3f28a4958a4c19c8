"""Calibrate how sliding windows are formed on the CPU backend: composing pane maps, or copying
each event into its windows and running each window from zero (gpu_hamlet/engine/window_copies.py
`WindowRouteCosts`, docs/architecture.md section 2).

    MALLOC_ARENA_MAX=1 python benchmarks/calibrate_windows.py [--events 200000] [--repeat 2]
        [--json OUT.json]
    python benchmarks/calibrate_windows.py --sweep [--events 200000]

(One malloc arena, as Spark's workers run: gpu_hamlet/engine/host_memory.py.)

Per case (`--events` random events in partitions of 1 to 3,000 values of an equivalence
attribute, so from dense panes to about one event per pane; four patterns of 3 or 4 states with
1 to 4 aggregates and SEQs of 7 and 10 types, float and exact; windows with 2 to 60 panes and
slides of 1 to 5 panes; and bench_small.py's sliding queries over its 2,100 events, where the
composing step's own call decides) it times `aggregate` with each route forced, the two in
turn, best of `--repeat`, and records what the choice reads: the query's rows, its non-empty
(partition, pane) runs `nseg`, the windows holding an event `W`, the map size D, the states k
and the copies per event r = ceil(n / a).
The difference of the two times is fitted by least squares, with no coefficient below zero, as
    copy_s * rows * r - pane_s * nseg * D * (k + 1) - window_s * W - maps_s,
then searched around for the constants that choose the faster route best (`fit`). The script
prints each case, how often the engine's choice (its constants now) and the fitted ones pick
the faster route (and what they lose where they do not), and the constants to paste.

`--sweep` times the engine's own choice instead, on one dense partition under 10-minute windows
sliding by 60 s down to 1 s (`sweep`): the seconds should grow with the windows.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
from unittest.mock import patch

import numpy as np
import pyarrow as pa
from bench_engine import TYPES, kleene_queries
from calibrate_stages import nonnegative_fit
from harness import best_in_turn

import gpu_hamlet
from gpu_hamlet.datagen import kleene_stream
from gpu_hamlet.engine.query_rows import QueryRows

PATTERNS = (
    ("SEQ(A, B+, C)", "COUNT(*)"),
    ("SEQ(A, B+, C)", "COUNT(*), SUM(B.x)"),
    ("SEQ(A, B+, C)", "COUNT(*), SUM(B.x), SUM(B.y), SUM(C.x)"),
    ("SEQ(A, B+, C, D+)", "COUNT(*)"),
)
#: (WITHIN, SLIDE) in seconds: 2, 10 and 60 panes of the slide, and panes of 5 slides.
WINDOWS = ((600, 300), (600, 60), (600, 10), (3600, 1500))
GROUPS = (1, 30, 300, 3000)
#: Exact mode's maps are larger (an exact sum takes more channels than a float one).
NUMERICS = ("float", "exact")
#: Long patterns (7 and 10 states) over ten types, where maps grow with the states, not channels.
LONG = ("SEQ(A, B, C, D, E, F, G)", "SEQ(A, B, C, D, E, F, G, H, I, J)")


def events(n: int, groups: int, types: str = "ABCD", seed: int = 0) -> pa.Table:
    """n events of `types` over 10^6 s, in `groups` partitions."""
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "time": np.sort(rng.integers(0, 10**6, n)),
            "type": rng.choice(list(types), n).tolist(),
            "g": rng.integers(0, groups, n),
            "x": rng.integers(0, 100, n),
            "y": rng.integers(0, 100, n),
        }
    )


def cases(n: int) -> list[tuple[str, pa.Table, str, str]]:
    """(label, events, one query, numeric mode): the matrix over n random events, then each
    sliding query of bench_small.py's 50 over its 2,100 events (a small call: the composing
    step's own cost, `maps_s`, decides there)."""
    out = []
    for groups in GROUPS:
        table = events(n, groups)
        for (pattern, returns), (within, slide), numeric in itertools.product(
            PATTERNS, WINDOWS, NUMERICS
        ):
            text = f"RETURN {returns} PATTERN {pattern} WHERE [g] WITHIN {within} s SLIDE {slide} s"
            out.append((f"{n:,} events, {groups} groups, {numeric}: {text}", table, text, numeric))
    for groups in GROUPS[:3]:
        table = events(n, groups, "ABCDEFGHIJ")
        for pattern, slide, numeric in itertools.product(LONG, (60, 200), NUMERICS):
            text = f"RETURN COUNT(*), SUM(A.x) PATTERN {pattern} WHERE [g] WITHIN 600 s"
            text += f" SLIDE {slide} s"
            out.append((f"{n:,} events, {groups} groups, {numeric}: {text}", table, text, numeric))
    small = kleene_stream(
        2_100, seed=7, types=TYPES, mean_burst=20.0, n_groups=8, duplicate_time_fraction=0.1
    )
    for query in kleene_queries(50).split(";"):
        if "SLIDE" in query:
            out.append((f"bench_small.py {query.split(':')[0].strip()}", small, query, "float"))
    return out


def sweep(n: int, repeat: int) -> None:
    """The engine's seconds (best of `repeat`) for SLIDEs from 60 s to 1 s over n events in one
    partition, float: with the route chosen well, more windows never run faster."""
    table = events(n, 1)
    print(f"machine: {platform.machine()}; {n:,} events, one partition; float, best of {repeat}")
    for slide in (60, 30, 20, 15, 12, 10, 8, 6, 5, 2, 1):
        text = f"RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 min SLIDE {slide} s"
        gpu_hamlet.aggregate(table, text, backend="cpu", numeric="float")
        best = best_in_turn(
            {"engine": lambda: gpu_hamlet.aggregate(table, text, backend="cpu", numeric="float")},
            repeat,
        )["engine"]
        print(f"SLIDE {slide:>2} s: {best:.4f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--sweep", action="store_true")
    args = ap.parse_args()
    if args.sweep:  # (before any name the engine gained with the calibrated choice: the sweep
        sweep(args.events, max(args.repeat, 3))  # runs on older trees too, for a before)
        return
    from gpu_hamlet.engine.window_copies import windows_holding

    seen: dict = {}
    route = {"copies": False}
    choose = QueryRows._copies_cheaper

    def forced(self: QueryRows, nseg_starts: np.ndarray) -> bool:
        w, tpl = self.plan.windowing, self.tpl
        assert self.seg is not None
        seen.update(
            rows=int(self.pos.shape[0]),
            nseg=int(nseg_starts.shape[0]),
            W=windows_holding(self.pid, self.seg, nseg_starts, w.a, w.n),
            D=len(self.plan.linear) * (tpl.k + 1) + 1,
            k=int(tpl.k),
            r=-(-w.n // w.a),
            chosen="copies" if choose(self, nseg_starts) else "maps",
        )
        return route["copies"]

    print(f"machine: {platform.machine()}; best of {args.repeat}")
    rows = []
    with patch.object(QueryRows, "_copies_cheaper", forced):
        for label, table, text, numeric in cases(args.events):

            def call(copies: bool, text: str = text, table: pa.Table = table, m: str = numeric):
                route["copies"] = copies
                gpu_hamlet.aggregate(table, text, backend="cpu", numeric=m, on_overflow="null")

            t = best_in_turn(
                {"maps": lambda: call(False), "copies": lambda: call(True)}, args.repeat
            )
            rows.append({"case": label, **seen, **t})
            print(
                f"{label}\n    rows {seen['rows']} nseg {seen['nseg']} W {seen['W']} D {seen['D']} "
                f"r {seen['r']}: maps {t['maps']:.5f} s, copies {t['copies']:.5f} s "
                f"(chosen: {seen['chosen']})",
                flush=True,
            )
    fit(rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


def fit(rows: list[dict]) -> None:
    """Constants that choose the faster route best. Least squares of copies - maps on the four
    terms (each case weighed by its faster route's time) is only the start, since it weighs the
    errors and not the choices; a grid from a quarter to four times each of its constants is
    searched for the smallest loss (the worst case's time against its faster route's, then the
    mean), ties going to the constants nearest the start."""
    terms = np.array(
        [[r["rows"] * r["r"], r["nseg"] * r["D"] * (r["k"] + 1), r["W"], 1] for r in rows]
    )
    copies = np.array([r["copies"] for r in rows])
    maps = np.array([r["maps"] for r in rows])
    fastest = np.minimum(copies, maps)
    signs = np.array([1, -1, -1, -1])
    start = nonnegative_fit(terms * signs / fastest[:, None], (copies - maps) / fastest)
    start = np.maximum(start, 1e-12)  # (a constant fitted at 0: searched from a tiny one)

    def picks(c: np.ndarray) -> np.ndarray:
        return terms[:, 0] * c[0] < terms[:, 1:] @ c[1:]

    def loss(chosen: np.ndarray) -> tuple[float, float]:
        lost = np.where(chosen, copies, maps) / fastest
        return round(float(lost.max()), 3), round(float(lost.mean()), 4)

    steps = np.geomspace(0.25, 4, 9)
    grid = [start * np.array(f) for f in itertools.product(steps, repeat=4)]
    best = min(grid, key=lambda c: (loss(picks(c)), float(np.abs(np.log(c / start)).sum())))
    engine = np.array([r["chosen"] == "copies" for r in rows])
    for name, chosen in (
        ("engine", engine),
        ("least squares", picks(start)),
        ("searched", picks(best)),
    ):
        worst, _ = loss(chosen)
        right = int((chosen == (copies < maps)).sum())
        taken = np.where(chosen, copies, maps).sum()
        print(
            f"{name}: the faster route in {right} of {len(rows)} cases, at worst {worst:.2f}x "
            f"the faster; {taken:.2f} s in all against {fastest.sum():.2f} s"
        )
    names = ("copy_s", "pane_s", "window_s", "maps_s")
    print("least squares: " + ", ".join(f"{k} {v:.2g}" for k, v in zip(names, start)))
    print("paste: WindowRouteCosts(" + ", ".join(f"{k}={v:.2g}" for k, v in zip(names, best)) + ")")


if __name__ == "__main__":
    main()

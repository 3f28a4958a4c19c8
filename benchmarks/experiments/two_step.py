"""gpu-hamlet vs a two-step approach that builds every trend and then aggregates (as MCEP does;
HAMLET Fig. 9), on the small settings where the two-step approach finishes.

The two-step approach is the test suite's brute-force enumerator (tests/oracle.py, the ground
truth of every correctness test), imported as it is: a depth-first search that lists each trend
and adds up its aggregates. It is pure Python while the engine runs compiled kernels, so part of
the gap is the language; the growth of the gap with the events per window is the algorithm's.
Each point runs it in a forked child under a time budget; after the first point over budget the
larger ones are not tried. Ridesharing without bursts in one partition (one driver, one district),
5 Kleene-sharing queries, 1-minute windows, 20 minutes of events.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import TypedDict

from harness import Settings
from report import Panel, line_panels, markdown_table, ratio, secs
from workloads import RIDESHARING_OTHERS, rides

from gpu_hamlet import parse_workload
from gpu_hamlet.datagen import kleene_sharing_workload

NAME = "two_step"
PAPER = "Fig. 9 (MCEP)"
QUERIES = 5
MINUTES = 20
ORACLE = Path(__file__).resolve().parents[2] / "tests" / "oracle.py"


class Size(TypedDict):
    rates: list[int]
    budget_s: float


FULL: Size = {"rates": [10, 20, 30, 40, 50, 60, 70, 80, 100, 150, 200], "budget_s": 10.0}
QUICK: Size = {"rates": [10, 20, 30, 40, 50], "budget_s": 2.0}


def load_oracle() -> ModuleType:
    """tests/oracle.py as a module (the tests import it from their own folder)."""
    if "oracle" not in sys.modules:
        spec = importlib.util.spec_from_file_location("oracle", ORACLE)
        assert spec is not None and spec.loader is not None, f"cannot load {ORACLE}"
        module = importlib.util.module_from_spec(spec)
        sys.modules["oracle"] = module  # dataclasses look their module up while it loads
        spec.loader.exec_module(module)
    return sys.modules["oracle"]


def _totals(results: dict[str, list]) -> dict[str, float]:
    return {name: float(sum(r["count"] for r in rows)) for name, rows in results.items()}


def _enumerate(rows: list[dict], workload, conn) -> None:
    t0 = time.perf_counter()
    results = load_oracle().oracle(rows, workload)
    conn.send((time.perf_counter() - t0, _totals(results)))


def two_step(rows: list[dict], workload, budget_s: float) -> tuple[float, dict] | None:
    """(seconds, COUNT(*) total per query) of the enumerator, or None past the budget."""
    load_oracle()  # imported before the fork, outside the child's clock
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_enumerate, args=(rows, workload, send))
    child.start()
    send.close()
    try:
        out = recv.recv() if recv.poll(budget_s) else None
    except EOFError:  # the child ended without an answer: it failed, it was not slow
        child.join()
        raise RuntimeError(f"the two-step enumerator failed (exit code {child.exitcode})") from None
    child.kill()
    child.join()
    return out


def run(s: Settings) -> dict:
    size = QUICK if s.quick else FULL
    text = kleene_sharing_workload(QUERIES, "Travel", RIDESHARING_OTHERS, within="1 min")
    workload = parse_workload(text)
    points, over = [], None
    for epm in size["rates"]:
        events = rides(MINUTES * epm, epm, seed=2, burstiness=0.0, n_drivers=1, n_districts=1)
        dyn = s.engine.compare(events, text, s.repeat, modes=("dynamic",))["dynamic"]
        tables = s.engine.run(events, text, "dynamic")
        engine_totals = {q: float(sum(t["count"].to_pylist())) for q, t in tables.items()}
        point = {
            "events_per_minute": epm,
            "events": events.num_rows,
            "trends": sum(engine_totals.values()),
            "dynamic": dyn,
        }
        if over is not None:
            point["two_step"] = {"status": f"not run: {over:,} events per minute was over budget"}
        else:
            done = two_step(events.to_pylist(), workload, size["budget_s"])
            if done is None:
                over = epm
                point["two_step"] = {"status": f"over the {size['budget_s']:g} s budget"}
            else:
                seconds, totals = done
                diff = max(abs(totals[q] - v) / max(v, 1.0) for q, v in engine_totals.items())
                point["two_step"] = {
                    "status": "ok",
                    "seconds": seconds,
                    "events_per_s": events.num_rows / seconds,
                    "max_relative_difference": diff,
                }
                point["two_step/dynamic"] = ratio(seconds, dyn["seconds"])
        points.append(point)
    return {
        "experiment": NAME,
        "paper": PAPER,
        "stream": f"ridesharing, burstiness 0, one driver and district, {MINUTES} minutes",
        "workload": f"Kleene-sharing, {QUERIES} queries over Travel+, WITHIN 1 min",
        "budget_s": size["budget_s"],
        "points": points,
    }


def plot(result: dict, path: Path) -> None:
    pts = result["points"]
    xs = [p["events_per_minute"] for p in pts]
    line_panels(
        path,
        f"gpu-hamlet vs two-step trend construction ({result['paper']})",
        [
            Panel(
                "time",
                "events per minute (1-minute windows)",
                "seconds",
                {
                    "dynamic": (xs, [p["dynamic"]["seconds"] for p in pts]),
                    "two-step": (xs, [p["two_step"].get("seconds") for p in pts]),
                },
                logy=True,
            ),
            Panel(
                "trends (COUNT(*) over all queries and windows)",
                "events per minute",
                "trends",
                {"trends": (xs, [p["trends"] or None for p in pts])},
                logy=True,
            ),
        ],
    )


def table(result: dict) -> str:
    rows = []
    for p in result["points"]:
        ts = p["two_step"]
        rows.append(
            [
                p["events_per_minute"],
                p["events"],
                f"{p['trends']:,.0f}",
                secs(p["dynamic"]["seconds"]),
                secs(ts["seconds"]) if ts["status"] == "ok" else ts["status"],
                f"{p['two_step/dynamic']:,.1f}x" if "two_step/dynamic" in p else "-",
            ]
        )
    return markdown_table(
        [
            "events/min",
            "events",
            "trends",
            "gpu-hamlet (dynamic)",
            "two-step",
            "two-step / gpu-hamlet",
        ],
        rows,
    )


def headline(result: dict) -> dict:
    done = [p for p in result["points"] if "two_step/dynamic" in p]
    over = [p["events_per_minute"] for p in result["points"] if p["two_step"]["status"] != "ok"]
    return {
        "two-step/dynamic at the largest finished point": done[-1]["two_step/dynamic"]
        if done
        else None,
        "first events/min over budget": over[0] if over else None,
    }

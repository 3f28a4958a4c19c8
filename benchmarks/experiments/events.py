"""Throughput vs events per minute (HAMLET Fig. 9(c), 11(c-d)): dynamic vs static vs none.

The same number of ridesharing events arrives at a growing rate, so each 10-minute window holds
more of them (the paper's speed-up factor); 50 Kleene-sharing queries. `none` is GRETA's
strategy (every query alone) on this engine's kernels.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from harness import MODES, Settings
from report import (
    MODE_HEADERS,
    Panel,
    line_panels,
    markdown_table,
    mode_cells,
    mode_ratios,
    mode_series,
)
from workloads import rides, rides_kleene_sharing

NAME = "events"
PAPER = "Fig. 9(c), 11(c-d)"
QUERIES = 50


class Size(TypedDict):
    events: int
    rates: list[int]


FULL: Size = {"events": 400_000, "rates": [2_500, 5_000, 10_000, 20_000, 40_000]}
QUICK: Size = {"events": 40_000, "rates": [5_000, 20_000]}


def run(s: Settings) -> dict:
    size = QUICK if s.quick else FULL
    workload = rides_kleene_sharing(QUERIES)
    points = []
    for epm in size["rates"]:
        events = rides(size["events"], epm)
        modes = s.engine.compare(events, workload, s.repeat)
        points.append(
            {
                "events_per_minute": epm,
                "events": events.num_rows,
                "queries": QUERIES,
                "modes": modes,
                **mode_ratios(modes),
            }
        )
    return {
        "experiment": NAME,
        "paper": PAPER,
        "stream": "ridesharing, burstiness 0.5 (mean Travel burst 26)",
        "workload": f"Kleene-sharing, {QUERIES} queries over Travel+, [driver], GROUPBY "
        "district, WITHIN 10 min",
        "points": points,
    }


def plot(result: dict, path: Path) -> None:
    pts = result["points"]
    line_panels(
        path,
        f"Throughput vs events per minute ({result['paper']}; ridesharing)",
        [
            Panel(
                "throughput",
                "events per minute",
                "events / s",
                mode_series(pts, "events_per_minute", "events_per_s", MODES),
                logx=True,
            ),
            Panel(
                "peak memory",
                "events per minute",
                "MiB",
                mode_series(pts, "events_per_minute", "peak_mib", MODES),
                logx=True,
            ),
        ],
    )


def table(result: dict) -> str:
    rows = [
        [f"{p['events_per_minute']:,}", f"{p['events']:,}", *mode_cells(p)]
        for p in result["points"]
    ]
    return markdown_table(["events/min", "events", *MODE_HEADERS], rows)


def headline(result: dict) -> dict:
    ratios = [p["none/dynamic"] for p in result["points"]]
    return {"none/dynamic": [min(ratios), max(ratios)]}

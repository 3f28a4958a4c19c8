"""Throughput vs number of queries (HAMLET Fig. 9(d), 11(h)): dynamic vs static vs none.

Ridesharing events at 10,000 per minute; both workload kinds of HAMLET 6.1, from 5 to 100
queries: Kleene-sharing (one sharable set) and diverse (six sharable sets: two Kleene types by
three groupings, with filters that split bursts into several classes).
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
from workloads import rides, rides_diverse, rides_kleene_sharing

NAME = "queries"
PAPER = "Fig. 9(d), 11(h)"
EVENTS_PER_MINUTE = 10_000
WORKLOADS = {"kleene-sharing": rides_kleene_sharing, "diverse": rides_diverse}


class Size(TypedDict):
    events: int
    queries: list[int]


FULL: Size = {"events": 300_000, "queries": [5, 10, 25, 50, 75, 100]}
QUICK: Size = {"events": 30_000, "queries": [5, 25, 100]}


def run(s: Settings) -> dict:
    size = QUICK if s.quick else FULL
    events = rides(size["events"], EVENTS_PER_MINUTE)
    points = []
    for kind, make in WORKLOADS.items():
        for n in size["queries"]:
            modes = s.engine.compare(events, make(n), s.repeat)
            points.append(
                {
                    "workload": kind,
                    "queries": n,
                    "events": events.num_rows,
                    "modes": modes,
                    **mode_ratios(modes),
                }
            )
    return {
        "experiment": NAME,
        "paper": PAPER,
        "stream": f"ridesharing, {EVENTS_PER_MINUTE:,} events per minute, burstiness 0.5",
        "workload": "Kleene-sharing (Travel+, [driver], GROUPBY district, 10 min) and "
        "diverse (Travel+ / LocationUpdate+, 5-20 min, groupings, filters)",
        "points": points,
    }


def plot(result: dict, path: Path) -> None:
    panels = []
    for kind in WORKLOADS:
        pts = [p for p in result["points"] if p["workload"] == kind]
        panels.append(
            Panel(
                f"{kind}: throughput",
                "queries",
                "events / s",
                mode_series(pts, "queries", "events_per_s", MODES),
                logy=True,
            )
        )
    line_panels(path, f"Throughput vs number of queries ({result['paper']}; ridesharing)", panels)


def table(result: dict) -> str:
    rows = [[p["workload"], p["queries"], *mode_cells(p)] for p in result["points"]]
    return markdown_table(["workload", "queries", *MODE_HEADERS], rows)


def headline(result: dict) -> dict:
    out = {}
    for kind in WORKLOADS:
        pts = [p for p in result["points"] if p["workload"] == kind]
        out[f"{kind}: none/dynamic at {pts[-1]['queries']} queries"] = pts[-1]["none/dynamic"]
    return out

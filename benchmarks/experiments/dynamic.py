"""Dynamic vs static vs no sharing (HAMLET Fig. 12 and 13): time, throughput, share rate,
snapshots, splits and merges, peak memory.

Stock ticks (four tickers, runs of mean length 8) and the diverse workload over GOOG+ with four
volume thresholds: queries that filter GOOG differently match different events of a burst, so a
shared burst needs event-level snapshots (HAMLET Def. 9) and sharing does not always pay. Two
sweeps as in the paper: events per minute at 50 queries (Fig. 12(a, c), 13(a)) and queries at
3,000 events per minute (Fig. 12(b, d), 13(b)).
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
from workloads import stock_diverse, stocks

NAME = "dynamic"
PAPER = "Fig. 12, 13"
QUERIES = 50
EVENTS_PER_MINUTE = 3_000


class Size(TypedDict):
    events: int
    rates: list[int]
    queries: list[int]


FULL: Size = {"events": 300_000, "rates": [2_000, 3_000, 4_000], "queries": [20, 40, 60, 80, 100]}
QUICK: Size = {"events": 30_000, "rates": [2_000, 4_000], "queries": [20, 100]}


def run(s: Settings) -> dict:
    size = QUICK if s.quick else FULL
    points = []
    for epm in size["rates"]:
        modes = s.engine.compare(stocks(size["events"], epm), stock_diverse(QUERIES), s.repeat)
        points.append(
            {
                "sweep": "events_per_minute",
                "events_per_minute": epm,
                "queries": QUERIES,
                "events": size["events"],
                "modes": modes,
                **mode_ratios(modes),
            }
        )
    events = stocks(size["events"], EVENTS_PER_MINUTE)
    for n in size["queries"]:
        modes = s.engine.compare(events, stock_diverse(n), s.repeat)
        points.append(
            {
                "sweep": "queries",
                "events_per_minute": EVENTS_PER_MINUTE,
                "queries": n,
                "events": events.num_rows,
                "modes": modes,
                **mode_ratios(modes),
            }
        )
    return {
        "experiment": NAME,
        "paper": PAPER,
        "stream": "stock ticks, 4 tickers, mean run 8, exact times",
        "workload": "diverse over GOOG+: lengths 1-3, windows 5-20 min, COUNT/SUM/AVG/MIN/"
        "MAX, GOOG.volume thresholds (none, 200, 500, 1000), price filters",
        "points": points,
    }


def _snapshot_series(pts: list[dict], x: str) -> dict:
    out = {}
    for mode in ("dynamic", "static"):
        ys = [p["modes"][mode]["sharing"] for p in pts]
        out[mode] = (
            [p[x] for p in pts],
            [None if y is None else y["graphlet_snapshots"] + y["event_snapshots"] for y in ys],
        )
    return out


def plot(result: dict, path: Path) -> None:
    panels = []
    for x, label in (("events_per_minute", "events per minute"), ("queries", "queries")):
        pts = [p for p in result["points"] if p["sweep"] == x]
        panels += [
            Panel(
                f"throughput vs {label}",
                label,
                "events / s",
                mode_series(pts, x, "events_per_s", MODES),
            ),
            Panel(
                f"snapshots vs {label}",
                label,
                "graphlet + event snapshots",
                _snapshot_series(pts, x),
            ),
            Panel(f"peak memory vs {label}", label, "MiB", mode_series(pts, x, "peak_mib", MODES)),
        ]
    line_panels(path, f"Dynamic vs static vs no sharing ({result['paper']}; stock)", panels)


def table(result: dict) -> str:
    rows = []
    for p in result["points"]:
        dyn = p["modes"]["dynamic"]["sharing"] or {}
        rows.append(
            [
                f"{p['events_per_minute']:,}",
                p["queries"],
                *mode_cells(p),
                f"{dyn.get('splits', 0):,} / {dyn.get('merges', 0):,}",
            ]
        )
    return markdown_table(
        ["events/min", "queries", *MODE_HEADERS, "splits / merges (dynamic)"], rows
    )


def headline(result: dict) -> dict:
    st = [p["static/dynamic"] for p in result["points"]]
    nd = [p["none/dynamic"] for p in result["points"]]
    return {"static/dynamic": [min(st), max(st)], "none/dynamic": [min(nd), max(nd)]}

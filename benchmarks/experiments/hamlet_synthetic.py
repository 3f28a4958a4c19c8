"""The HAMLET authors' own synthetic benchmark: their 50-query workload over the first N events of
`Stream_shared_10` (../shared/data/hamlet-synthetic), in bigint and float mode.

Every query is SEQ(..., T2+, ...) with COUNT(*) over one window holding all N events; bursts of
T2 are exactly 10 events long. Counts reach hundreds of decimal digits: bigint gives them
exactly (its cost grows with the digits: one residue pass per 31-bit prime), float gives null
once they pass 10^308. Needs the authors' files: without them the experiment says so and skips.
"""

from __future__ import annotations

from pathlib import Path

from harness import MODES, Engine, Settings
from report import (
    MODE_HEADERS,
    Panel,
    line_panels,
    markdown_table,
    mode_cells,
    mode_ratios,
    mode_series,
)

from gpu_hamlet.datagen import load_hamlet_stream, load_hamlet_workload

NAME = "hamlet_synthetic"
PAPER = "the authors' Stream_shared_10 and HAMLET_DEFAULT_WORKLOAD"
STREAM = Path("hamlet-synthetic") / "Stream_shared_10.txt"
WORKLOAD = Path("hamlet-synthetic") / "HAMLET_DEFAULT_WORKLOAD.txt"
FULL = {
    "float": [2_000, 5_000, 10_000, 20_000, 50_000, 100_000],
    "bigint": [2_000, 5_000, 10_000, 20_000],
}
QUICK = {"float": [2_000, 5_000], "bigint": [2_000, 5_000]}


def run(s: Settings) -> dict:
    size = QUICK if s.quick else FULL
    out = {"experiment": NAME, "paper": PAPER, "stream": str(STREAM), "workload": str(WORKLOAD)}
    missing = [str(s.data_dir / p) for p in (STREAM, WORKLOAD) if not (s.data_dir / p).is_file()]
    if missing:
        return {
            **out,
            "skipped": f"the authors' data is not here: {', '.join(missing)} "
            "(pass --data DIR where DIR/hamlet-synthetic holds it)",
            "points": [],
        }
    stream = load_hamlet_stream(s.data_dir / STREAM)
    workload = load_hamlet_workload(s.data_dir / WORKLOAD)
    points = []
    for numeric, sizes in size.items():
        engine = Engine(s.engine.backend, numeric)
        for n in sizes:
            events = stream.slice(0, n)
            modes = engine.compare(events, workload, s.repeat)
            counts = [
                t["count"][0].as_py() if t.num_rows else None
                for t in engine.run(events, workload, "dynamic").values()
            ]
            point = {"numeric": numeric, "events": n, "modes": modes, **mode_ratios(modes)}
            if numeric == "bigint":
                point["max_count_digits"] = max(len(c) for c in counts if c is not None)
            else:
                point["null_counts"] = sum(c is None for c in counts)
            points.append(point)
    return {**out, "points": points}


def plot(result: dict, path: Path) -> None:
    panels = []
    for numeric in ("float", "bigint"):
        pts = [p for p in result["points"] if p["numeric"] == numeric]
        panels.append(
            Panel(
                f"{numeric}: throughput",
                "first N events",
                "events / s",
                mode_series(pts, "events", "events_per_s", MODES),
                logx=True,
                logy=True,
            )
        )
    line_panels(path, "HAMLET authors' synthetic workload (50 queries, Stream_shared_10)", panels)


def table(result: dict) -> str:
    if result.get("skipped"):
        return f"skipped: {result['skipped']}"
    rows = []
    for p in result["points"]:
        counts = (
            f"{p['max_count_digits']} digits"
            if p["numeric"] == "bigint"
            else f"{p['null_counts']} of 50 null"
        )
        rows.append([p["numeric"], f"{p['events']:,}", counts, *mode_cells(p)])
    return markdown_table(["numeric", "first N events", "COUNT(*)", *MODE_HEADERS], rows)


def headline(result: dict) -> dict:
    if result.get("skipped"):
        return {"skipped": result["skipped"]}
    out = {}
    for numeric in ("float", "bigint"):
        pts = [p for p in result["points"] if p["numeric"] == numeric]
        out[f"{numeric}: none/dynamic at {pts[-1]['events']:,} events"] = pts[-1]["none/dynamic"]
    return out

"""Markdown tables and PNG line plots of experiment results (what BENCHMARKS.md shows)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402

#: One colour and marker per compared method, the same in every plot.
STYLE = {
    "dynamic": ("tab:blue", "o"),
    "static": ("tab:orange", "s"),
    "none": ("tab:green", "^"),
    "hamlet": ("tab:purple", "d"),
    "two-step": ("tab:red", "x"),
}


@dataclass
class Panel:
    """One subplot: series of (x, y) points by label; points with y None are left out."""

    title: str
    xlabel: str
    ylabel: str
    series: Mapping[str, tuple[Sequence[float], Sequence[float | None]]] = field(
        default_factory=dict
    )
    logy: bool = False
    logx: bool = False


def line_panels(path: Path, title: str, panels: Sequence[Panel]) -> None:
    """Write the panels side by side (wrapping after three) as one PNG."""
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    for ax in axes.ravel()[len(panels) :]:
        ax.set_visible(False)
    for ax, panel in zip(axes.ravel(), panels):
        for label, (xs, ys) in panel.series.items():
            pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
            colour, marker = STYLE.get(label, (None, "."))
            ax.plot(
                [p[0] for p in pts], [p[1] for p in pts], marker=marker, color=colour, label=label
            )
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.ylabel)
        if panel.logy:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)  # ratios between lines read true
        if panel.logx:
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def mode_series(
    points: Sequence[dict], x: str, metric: str, modes: Sequence[str]
) -> dict[str, tuple[list, list]]:
    """Per mode, (x values, point["modes"][mode][metric]) over the points."""
    return {m: ([p[x] for p in points], [p["modes"][m][metric] for p in points]) for m in modes}


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def rate(events_per_s: float | None) -> str:
    """Events per second, short: '1.23 M/s', '45.6 k/s'."""
    if events_per_s is None:
        return "-"
    if events_per_s >= 1e6:
        return f"{events_per_s / 1e6:.2f} M/s"
    return f"{events_per_s / 1e3:.1f} k/s"


def secs(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.3f} s"


def ratio(a: float, b: float) -> float:
    """a / b rounded for JSON and tables."""
    return round(a / b, 3)


def mode_ratios(modes: dict[str, dict]) -> dict[str, float]:
    """Time of none and of static over time of dynamic (above 1: dynamic is faster)."""
    dyn = modes["dynamic"]["seconds"]
    return {
        "none/dynamic": ratio(modes["none"]["seconds"], dyn),
        "static/dynamic": ratio(modes["static"]["seconds"], dyn),
    }


#: Columns `mode_cells` fills: throughput per mode, time ratios, sharing decisions, peak memory.
MODE_HEADERS = [
    "dynamic",
    "static",
    "none",
    "none/dynamic",
    "static/dynamic",
    "bursts shared (dynamic)",
    "snapshots dynamic / static",
    "peak MiB dyn / static / none",
]


def _snapshots(sharing: dict | None) -> int:
    return 0 if sharing is None else int(sharing["graphlet_snapshots"] + sharing["event_snapshots"])


def mode_cells(point: dict) -> list[str]:
    """The MODE_HEADERS cells of one point measured by harness.Engine.compare."""
    m = point["modes"]
    dyn, sta = m["dynamic"]["sharing"], m["static"]["sharing"]
    peaks = " / ".join(
        "-" if m[x]["peak_mib"] is None else f"{m[x]['peak_mib']:.0f}"
        for x in ("dynamic", "static", "none")
    )
    return [rate(m[x]["events_per_s"]) for x in ("dynamic", "static", "none")] + [
        f"{point['none/dynamic']:.2f}x",
        f"{point['static/dynamic']:.2f}x",
        "-" if dyn is None else f"{dyn['share_rate']:.0%} of {dyn['bursts']:,}",
        f"{_snapshots(dyn):,} / {_snapshots(sta):,}",
        peaks,
    ]

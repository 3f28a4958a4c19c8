"""The HAMLET paper's experiments (section 6) on gpu-hamlet, every compared mode in one run.

    python benchmarks/run.py [--quick] [--out DIR] [--backend cpu|gpu|auto] [--only NAME ...]
        [--repeat N] [--data DIR]

Experiments (benchmarks/experiments/): events (throughput vs events per minute, Fig. 9(c),
11(c-d)), queries (throughput vs queries, Fig. 9(d), 11(h)), dynamic (dynamic vs static vs none:
share rate, snapshots, peak memory, Fig. 12-13), two_step (against building every trend first,
as MCEP), hamlet_synthetic (the authors' 50 queries over Stream_shared_10, bigint and float).

Writes DIR/NAME.json and DIR/NAME.png per experiment, DIR/tables.md (the Markdown tables) and
DIR/summary.json (machine, command, seconds and main ratios per experiment). DIR defaults to
benchmarks/results/paper-BACKEND (with -quick for --quick). --quick runs small sizes (about a
minute on two cores, once numba's cache is warm) to check that everything works, not to measure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from importlib.metadata import version
from pathlib import Path

from experiments import EXPERIMENTS
from harness import Engine, Settings

from gpu_hamlet.engine.backend import select_backend
from gpu_hamlet.errors import GpuHamletError

ROOT = Path(__file__).resolve().parents[1]


def machine() -> dict:
    """What the numbers were measured on (load average: other work on the same cores)."""
    return {
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        **{pkg: version(pkg) for pkg in ("numpy", "numba", "pyarrow")},
    }


def write_tables(out: Path) -> None:
    """tables.md from every experiment result in `out` (also those of earlier --only runs)."""
    parts = []
    for name, exp in EXPERIMENTS.items():
        path = out / f"{name}.json"
        if path.exists():
            parts.append(f"## {name} ({exp.PAPER})\n\n{exp.table(json.loads(path.read_text()))}\n")
    (out / "tables.md").write_text("\n".join(parts))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--backend", choices=["cpu", "gpu", "auto"], default="cpu")
    ap.add_argument("--only", nargs="+", choices=list(EXPERIMENTS), default=list(EXPERIMENTS))
    ap.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="runs per mode and point, best counts (default 3, quick 1)",
    )
    ap.add_argument(
        "--data",
        type=Path,
        default=ROOT.parent / "shared" / "data",
        help="folder holding hamlet-synthetic/ (default ../shared/data)",
    )
    args = ap.parse_args(argv)
    try:
        backend = select_backend(args.backend).name
    except GpuHamletError as exc:  # e.g. --backend gpu without a visible device
        ap.error(str(exc))
    out = args.out or ROOT / "benchmarks" / "results" / (
        f"paper-{backend}" + ("-quick" if args.quick else "")
    )
    out.mkdir(parents=True, exist_ok=True)
    settings = Settings(
        quick=args.quick,
        engine=Engine(backend),
        data_dir=args.data,
        repeat=args.repeat or (1 if args.quick else 3),
    )
    done = out / "summary.json"
    previous = json.loads(done.read_text())["experiments"] if done.exists() else {}
    summary = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "backend": backend,
        "quick": args.quick,
        "repeat": settings.repeat,
        **machine(),
        "experiments": previous,
    }
    for name in args.only:
        exp = EXPERIMENTS[name]
        print(f"== {name} ({exp.PAPER})", flush=True)
        t0 = time.perf_counter()
        result = {**exp.run(settings), "backend": backend, "quick": args.quick}
        seconds = time.perf_counter() - t0
        (out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
        if result["points"]:
            exp.plot(result, out / f"{name}.png")
        else:  # skipped: no plot, and none left from an earlier run
            (out / f"{name}.png").unlink(missing_ok=True)
        summary["experiments"][name] = {
            "seconds": round(seconds, 1),
            "headline": exp.headline(result),
        }
        print(exp.table(result), f"\n({seconds:.1f} s)", flush=True)
        done.write_text(json.dumps(summary, indent=1) + "\n")
    write_tables(out)
    print(f"results in {out}")


if __name__ == "__main__":
    main()

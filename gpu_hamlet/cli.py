"""The `gpu-hamlet` command line: demo, run and explain."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from gpu_hamlet.errors import GpuHamletError

DEMO_WORKLOAD = """
-- Per district and 30-minute window: rides with their travel legs, and the average speed.
rides: RETURN district, COUNT(*), COUNT(Travel), AVG(Travel.speed), MAX(Travel.speed)
       PATTERN SEQ(Request, Travel+, Dropoff)
       WHERE [driver] GROUPBY district WITHIN 30 min;
-- Premium pickups followed by travel legs, in 10-minute windows sliding every 5 minutes.
premium: RETURN COUNT(*) AS trends, SUM(Travel.price) AS revenue
         PATTERN SEQ(Pickup, Travel+) WHERE [driver] AND Pickup.request_type = 'premium'
         WITHIN 10 min SLIDE 5 min
"""


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"])
    p.add_argument("--sharing", default="dynamic", choices=["dynamic", "static", "none"])
    p.add_argument("--numeric", default="exact", choices=["exact", "bigint", "float"])
    p.add_argument("--on-overflow", default="error", choices=["error", "null"])


def _read_events(path: Path) -> pa.Table:
    if path.is_dir() or path.suffix in (".parquet", ".pq"):
        return pq.read_table(path)
    if path.suffix in (".csv", ".txt"):
        return pacsv.read_csv(path)
    if path.suffix in (".arrow", ".feather", ".ipc"):
        import pyarrow.feather as feather
        return feather.read_table(path)
    raise GpuHamletError(f"--events {path}: use Parquet (file or folder), CSV or Arrow IPC")


def _write_results(results: dict[str, pa.Table], out: Path, fmt: str) -> dict[str, int]:
    """Write all results into a temporary folder, then move it into place: no partial output."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name, table in results.items():
            (tmp / name).mkdir()
            if fmt == "parquet":
                pq.write_table(table, tmp / name / "part-00000.parquet")
            else:
                pacsv.write_csv(table, tmp / name / "part-00000.csv")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {name: t.num_rows for name, t in results.items()}


def cmd_run(args: argparse.Namespace) -> int:
    from gpu_hamlet import RunStats, aggregate, parse_workload

    t0 = time.perf_counter()
    workload = parse_workload(Path(args.workload).read_text())
    events = _read_events(Path(args.events))
    stats = RunStats() if args.stats else None
    results = aggregate(events, workload, backend=args.backend, sharing=args.sharing,
                        numeric=args.numeric, on_overflow=args.on_overflow,
                        time_col=args.time_col, type_col=args.type_col, stats=stats)
    rows = _write_results(results, Path(args.out), args.format)
    dt = time.perf_counter() - t0
    print(f"read {events.num_rows:,} events; wrote " +
          ", ".join(f"{n}: {r:,} rows" for n, r in rows.items()) + f" to {args.out} in {dt:.2f} s")
    if stats is not None:
        print(stats.describe())
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from gpu_hamlet import parse_workload
    from gpu_hamlet.sharing import analyze

    workload = parse_workload(Path(args.workload).read_text())
    for q in workload:
        print(f"{q.name}: PATTERN SEQ({', '.join(map(str, q.pattern))})")
        print(f"  aggregates : {', '.join(f'{a} AS {a.name}' for a in q.aggregates)}")
        print(f"  partitions : {', '.join(q.partition_attrs) or '(one)'}"
              f"  (GROUPBY {', '.join(q.groupby) or '-'})")
        if q.filters:
            print(f"  filters    : {' AND '.join(map(str, q.filters))}")
        print(f"  window     : {q.within_ms} ms, slide {q.slide_ms} ms")
    print()
    print(analyze(workload).describe())
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from gpu_hamlet import aggregate, parse_workload
    from gpu_hamlet.datagen import ridesharing

    events = ridesharing(args.events, seed=args.seed)
    print(f"generated {events.num_rows:,} ridesharing events "
          f"({events.column('time')[0]} .. {events.column('time')[-1]})")
    workload = parse_workload(DEMO_WORKLOAD)
    t0 = time.perf_counter()
    results = aggregate(events, workload, backend=args.backend, numeric=args.numeric)
    dt = time.perf_counter() - t0
    print(f"answered {len(workload)} queries in {dt:.2f} s "
          f"({events.num_rows / dt / 1e6:.2f} M events/s, in-process engine)\n")
    for name, table in results.items():
        print(f"== {name}: {table.num_rows} rows; first {min(args.rows, table.num_rows)}:")
        print(_format(table.slice(0, args.rows)))
        print()
    return 0


def _format(table: pa.Table) -> str:
    """A plain text table (pandas when installed, else Arrow's own rendering)."""
    try:
        return table.to_pandas().to_string(index=False)
    except ImportError:
        return str(table)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-hamlet", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="answer a workload over an events file, write one dataset per query")
    run.add_argument("--workload", required=True, help="workload file (query language)")
    run.add_argument("--events", required=True, help="Parquet file or folder, CSV, or Arrow IPC")
    run.add_argument("--out", required=True, help="output folder: OUT/<query name>/")
    run.add_argument("--format", default="parquet", choices=["parquet", "csv"])
    run.add_argument("--time-col", default="time")
    run.add_argument("--type-col", default="type")
    run.add_argument("--stats", action="store_true",
                     help="print the sharing decisions per sharable set")
    _options(run)
    run.set_defaults(func=cmd_run)
    explain = sub.add_parser("explain", help="show how a workload is compiled")
    explain.add_argument("--workload", required=True)
    explain.set_defaults(func=cmd_explain)
    demo = sub.add_parser("demo", help="generate a ridesharing stream and answer a sample workload")
    demo.add_argument("--events", type=int, default=200_000, help="number of events to generate")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--rows", type=int, default=8, help="result rows to print per query")
    _options(demo)
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except GpuHamletError as exc:
        print(f"gpu-hamlet: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

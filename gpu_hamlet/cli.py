"""The `gpu-hamlet` command line: demo, run and explain."""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

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


def _spark(master: str | None, app: str):
    """A SparkSession: the one spark-submit configured, or a new one on `master` (local[*])."""
    import os

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _read_events(spark, path: str):
    if path.endswith((".csv", ".txt")):
        return spark.read.option("header", True).option("inferSchema", True).csv(path)
    return spark.read.parquet(path)


def _write_results(results: dict, out: Path, fmt: str) -> dict[str, int]:
    """Write every query's dataset into a hidden folder beside `out`, then move it into place:
    a failed run leaves no partial results behind."""
    out = out.absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    def write(item) -> tuple[str, int]:
        name, df = item
        getattr(df.write.mode("overwrite"), fmt)(str(tmp / name))
        return name, df.count()

    try:
        # Each query's dataset is its own (small) Spark job over the checkpointed engine pass:
        # submitted from threads, they run side by side.
        with ThreadPoolExecutor(max_workers=8) as pool:
            rows = dict(pool.map(write, results.items()))
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return rows


def cmd_run(args: argparse.Namespace, spark=None) -> int:
    from gpu_hamlet import parse_workload
    from gpu_hamlet.spark import trend_aggregate

    t0 = time.perf_counter()
    workload = parse_workload(Path(args.workload).read_text())  # before Spark starts
    spark = spark or _spark(args.master, "gpu-hamlet run")
    events = _read_events(spark, args.events)
    results = trend_aggregate(events, workload, backend=args.backend, sharing=args.sharing,
                              numeric=args.numeric, on_overflow=args.on_overflow,
                              time_col=args.time_col, type_col=args.type_col)
    rows = _write_results(results, Path(args.out), args.format)
    dt = time.perf_counter() - t0
    print(f"read {events.count():,} events; wrote " +
          ", ".join(f"{n}: {r:,} rows" for n, r in rows.items()) + f" to {args.out} in {dt:.1f} s")
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
    if args.events:
        import pyarrow.csv as pacsv
        import pyarrow.parquet as pq

        from gpu_hamlet import RunStats, aggregate

        path = Path(args.events)
        events = pacsv.read_csv(path) if path.suffix in (".csv", ".txt") else \
            pq.read_table(path)
        stats = RunStats()
        aggregate(events, workload, backend=args.backend, sharing=args.sharing,
                  numeric="float", on_overflow="null", time_col=args.time_col,
                  type_col=args.type_col, stats=stats)
        print(f"\nsharing decisions over {events.num_rows:,} events (in-process, "
              f"sharing={args.sharing}):")
        print(stats.describe())
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Generate a ridesharing stream, answer DEMO_WORKLOAD over it on Spark, and say what each
    step is (the workload, the data, why the counts are huge, a first run's compile time)."""
    import pyarrow.parquet as pq

    from gpu_hamlet import parse_workload
    from gpu_hamlet.datagen import ridesharing
    from gpu_hamlet.demo import WHY_HUGE, demo_session, describe_data, warm_up_kernels
    from gpu_hamlet.spark import trend_aggregate

    workload = parse_workload(DEMO_WORKLOAD)
    print(f"The workload ({len(workload)} queries):\n{DEMO_WORKLOAD.strip()}\n")
    options = {"backend": args.backend, "sharing": args.sharing, "numeric": args.numeric,
               "on_overflow": args.on_overflow}
    with tempfile.TemporaryDirectory(prefix="gpu-hamlet-demo-") as tmp, \
            ThreadPoolExecutor(max_workers=1) as pool:
        path = Path(tmp) / "rides.parquet"
        events = ridesharing(args.events, seed=args.seed)
        pq.write_table(events, path)
        print(f"{describe_data(events)}; in {path}")
        print(WHY_HUGE + "\n")
        print("CPU kernels: loading (the first run compiles them, about 30 s on 2 cores, and "
              "numba caches them on disk) ...", flush=True)
        # The kernels warm up while the JVM starts: both take seconds, on different cores.
        warm = pool.submit(warm_up_kernels, events, workload,
                           {**options, "time_col": "time", "type_col": "type"})
        spark = demo_session(args.master)
        print(f"CPU kernels: {warm.result().describe()}", flush=True)
        t0 = time.perf_counter()
        results = trend_aggregate(spark.read.parquet(str(path)), workload, **options)
        # One small job per query: the results are a few rows per window and group.
        tables = {name: df.toArrow() for name, df in results.items()}
        dt = time.perf_counter() - t0
    print(f"answered {len(workload)} queries on Spark {spark.version} "
          f"({spark.sparkContext.master}) in {dt:.1f} s\n")
    for name, table in tables.items():
        keys = table.column_names[: table.column_names.index("window_end")]
        first = table.sort_by([(k, "ascending") for k in keys]).slice(0, args.rows)
        print(f"== {name}: {table.num_rows} rows; first {args.rows}:")
        print(_format(first))
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
    run = sub.add_parser("run", help="answer a workload over events on Spark, one dataset per query")
    run.add_argument("--workload", required=True, help="workload file (query language)")
    run.add_argument("--events", required=True, help="Parquet file or folder, or CSV with header")
    run.add_argument("--master", default=None,
                     help="Spark master (default: spark-submit's, else local[*])")
    run.add_argument("--out", required=True, help="output folder: OUT/<query name>/")
    run.add_argument("--format", default="parquet", choices=["parquet", "csv"])
    run.add_argument("--time-col", default="time")
    run.add_argument("--type-col", default="type")
    _options(run)
    run.set_defaults(func=cmd_run)
    explain = sub.add_parser("explain", help="show how a workload is compiled and shared")
    explain.add_argument("--workload", required=True)
    explain.add_argument("--events", default=None,
                         help="also run it in-process over this Parquet or CSV file and print "
                              "the optimizer's sharing decisions (bursts, snapshots, splits)")
    explain.add_argument("--time-col", default="time")
    explain.add_argument("--type-col", default="type")
    explain.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"])
    explain.add_argument("--sharing", default="dynamic", choices=["dynamic", "static", "none"])
    explain.set_defaults(func=cmd_explain)
    demo = sub.add_parser("demo", help="generate a ridesharing stream and answer a sample workload")
    demo.add_argument("--events", type=int, default=200_000, help="number of events to generate")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--rows", type=int, default=8, help="result rows to print per query")
    demo.add_argument("--master", default="local[*]")
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

"""The `gpu-hamlet` command line: run, explain and demo.

Errors are one line on stderr naming the file, query, line or column at fault, without Java or
Python tracebacks unless --verbose. Exit status: 0 done; 2 bad input or usage, which the user
must change (options, files, a workload error, events that do not fit, an exact result that
overflows); 1 a failure while running (anything else).
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import re
import select
import sys
import tempfile
import time
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from gpu_hamlet import __version__
from gpu_hamlet.cli_io import (
    RAISED,
    UsageError,
    check_names,
    check_output,
    check_time_flags,
    default_delimiter,
    input_format,
    null_error,
    read_events,
    write_results,
)
from gpu_hamlet.engine.options import (
    BACKEND_NAMES,
    DEFAULTS,
    NUMERIC_MODES,
    OVERFLOW_MODES,
    SHARING_MODES,
    Options,
)
from gpu_hamlet.engine.plan_search import SEARCHES
from gpu_hamlet.errors import EventDataError, GpuHamletError, WorkloadError
from gpu_hamlet.query.pattern import And, Pattern, show, sides
from gpu_hamlet.query.workload import Workload

log = logging.getLogger("gpu_hamlet")

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


@dataclass
class _Console:
    """What one invocation shows besides its results: Spark's progress bar, Spark's own log."""

    progress: bool = True
    verbose: bool = False


_console = _Console()


def _engine_options(p: argparse.ArgumentParser, numbers: bool = True) -> None:
    """--backend and --sharing, and with `numbers` --numeric and --on-overflow (Options)."""
    p.add_argument("--backend", default=DEFAULTS.backend, choices=BACKEND_NAMES)
    p.add_argument("--sharing", default=DEFAULTS.sharing, choices=SHARING_MODES)
    if numbers:
        p.add_argument("--numeric", default=DEFAULTS.numeric, choices=NUMERIC_MODES)
        p.add_argument("--on-overflow", default=DEFAULTS.on_overflow, choices=OVERFLOW_MODES)


def _options(args: argparse.Namespace, **fixed: str) -> Options:
    """The Options of the command's arguments (the input options name the columns); `fixed`
    gives those the command has no flag for."""
    given = {
        name: getattr(args, name)
        for name in ("backend", "sharing", "numeric", "on_overflow", "time_col", "type_col")
        if hasattr(args, name)
    }
    return Options(**{**given, **fixed})


def _spark(master: str | None, app: str):
    """A SparkSession: the one spark-submit configured, or a new one on `master` (local[*]).

    Spark's own log is off unless --verbose, from the JVM's start (gpu_hamlet/spark/jvm_log.py):
    a failed task would print its Java and Python traces there, and main() prints the one line
    that matters instead."""
    from pyspark.sql import SparkSession

    from gpu_hamlet.engine.host_memory import SPARK_WORKER_CONF
    from gpu_hamlet.spark.jvm_log import quiet_jvm_start

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if not _console.verbose:
        quiet_jvm_start()
    builder = SparkSession.builder.appName(app)
    for key, value in SPARK_WORKER_CONF.items():
        builder = builder.config(key, value)
    if master:
        builder = builder.master(master)
    if not _console.progress:
        builder = builder.config("spark.ui.showConsoleProgress", "false")
    try:
        spark = builder.getOrCreate()
    except Exception as exc:
        raise _master_error(exc, master) from None
    spark.sparkContext.setLogLevel("WARN" if _console.verbose else "OFF")
    # Names are case-sensitive in the workload language (docs/semantics.md section 4), as in
    # `aggregate`: columns `x` and `X` of the events, or results `count` and `Count`, are two.
    # Spark's default would rename such CSV header names (x2, X3), refuse such JSON keys, and
    # refuse to write such results.
    spark.conf.set("spark.sql.caseSensitive", "true")
    return spark


def _master_error(exc: Exception, master: str | None) -> Exception:
    """A session that did not start on --master `master`: the option and Spark's reason (deep
    in a Java trace, or only on stderr where the JVM exited), as a usage error."""
    if not master:
        return exc
    reason = re.search(r"SparkException: ([^\n]+)", str(exc))
    return UsageError(
        f"--master {master}: Spark could not start there"
        + (f" ({reason[1].strip()})" if reason else "")
        + "; use local[N] (N threads, N >= 1), local[*], spark://HOST:PORT, yarn or "
        "k8s://https://HOST:PORT, or leave it out under spark-submit"
    )


def _read_workload(path: str) -> Workload:
    """The parsed workload file; errors name the file."""
    from gpu_hamlet import parse_workload

    try:  # (utf-8-sig: editors on Windows start UTF-8 files with a byte order mark)
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise UsageError(f"workload file '{path}': {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"workload file '{path}' is not UTF-8 text: byte {exc.object[exc.start]:#04x} at "
            f"offset {exc.start}"
        ) from None
    try:
        return parse_workload(text)
    except WorkloadError as exc:
        raise WorkloadError(f"{path}: {exc}") from None


def _submitted() -> bool:
    """Whether spark-submit started this process (its JVM hands PySpark its gateway's port)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _check_gpu(backend: str, master: str | None) -> None:
    """`--backend gpu` on a local master needs a GPU here: say so before Spark starts. (On a
    cluster the executors' GPUs count, and a task without one fails with its own message.)"""
    from gpu_hamlet.devices import cuda_visible

    local = master.startswith("local") if master else not _submitted()
    if backend == "gpu" and local and not cuda_visible():
        raise UsageError(
            "--backend gpu, but no CUDA device is visible on this machine: "
            "use --backend auto or cpu"
        )


def _input_format(args: argparse.Namespace) -> str:
    """The events' format (`input_format`), and the CSV flags refused for other formats: given
    there, they were ignored without a word."""
    fmt = input_format(args.events, args.in_format)
    if args.delimiter == "":  # (read as the default, a comma)
        raise UsageError("--delimiter must be a character, such as ';' or '\\t', not empty")
    given = [f for f, v in (("--columns", args.columns), ("--delimiter", args.delimiter)) if v]
    if fmt != "csv" and given:
        verb = "applies" if len(given) == 1 else "apply"
        raise UsageError(f"{' and '.join(given)} {verb} to CSV events; {args.events} is {fmt}")
    return fmt


def _refuse_without_events(args: argparse.Namespace) -> None:
    """`explain`'s flags that only its run over --events reads (the backend and sharing it runs
    with, how the events are read), refused without --events: given there, they were ignored
    without a word."""
    unread = [
        flag
        for flag, value, default in (
            ("--backend", args.backend, DEFAULTS.backend),
            ("--sharing", args.sharing, DEFAULTS.sharing),
            ("--numeric", args.numeric, DEFAULTS.numeric),
            ("--in-format", args.in_format, None),
            ("--columns", args.columns, None),
            ("--delimiter", args.delimiter, None),
            ("--time-col", args.time_col, DEFAULTS.time_col),
            ("--type-col", args.type_col, DEFAULTS.type_col),
            ("--time-format", args.time_format, None),
            ("--time-unit", args.time_unit, None),
        )
        if value != default
    ]
    if unread:
        verb = "applies" if len(unread) == 1 else "apply"
        raise UsageError(
            f"{', '.join(unread)} {verb} to explain's run over --events, which was not given"
        )


def _numbers(workload: Workload) -> set[str]:
    """The columns `workload` adds up or compares with numbers: those of a CSV file of no rows
    are read as bigint (read_events), its other columns as text."""
    added = {a.attr for q in workload for a in q.aggregates if a.func in ("SUM", "AVG")}
    compared = {f.attr for q in workload for f in q.filters if not isinstance(f.value, str)}
    return {c for c in added | compared if c is not None}


def _events(spark, args: argparse.Namespace, fmt: str, workload: Workload):
    """The events of --events as a Spark DataFrame, read as the input options say."""
    log.info("reading %s events from %s", fmt, args.events)
    return read_events(
        spark,
        args.events,
        fmt,
        columns=args.columns,
        delimiter=args.delimiter or default_delimiter(args.events),  # (None: not given)
        time_col=args.time_col,
        type_col=args.type_col,
        time_format=args.time_format,
        time_unit=args.time_unit,
        numbers=_numbers(workload),
    )


def cmd_run(args: argparse.Namespace, spark=None) -> int:
    from gpu_hamlet import RunStats
    from gpu_hamlet.spark.job import run_job

    t0 = time.perf_counter()
    # Everything that can be checked without Spark is, before it starts.
    check_time_flags(args.time_format, args.time_unit)
    workload = _read_workload(args.workload)
    check_names(q.name for q in workload)
    options = _options(args)
    fmt = _input_format(args)
    out = Path(args.out).absolute()
    check_output(out, args.mode)
    if args.master and _submitted():  # (the session spark-submit configured has its master)
        raise UsageError("--master is spark-submit's own option here: give it to spark-submit")
    _check_gpu(args.backend, args.master)
    spark = spark or _spark(args.master, "gpu-hamlet run")
    events = _events(spark, args, fmt, workload)
    stats = RunStats() if args.stats else None
    try:
        results = run_job(events, workload, options, stats=stats)
    except (EventDataError, WorkloadError) as exc:
        raise _in_events(exc, events, args, fmt) from None
    # Counted before writing: --mode overwrite may replace the folder the events are read from.
    n_events = events.count()
    log.info("writing %d queries' results to %s", len(results), out)
    order = {q.name: (*q.groupby, "window_start") for q in workload}
    rows = write_results(results, order, out, args.out_format, args.mode, __version__)
    dt = time.perf_counter() - t0
    print(
        f"read {n_events:,} events; wrote "
        + ", ".join(f"{n}: {r:,} rows" for n, r in rows.items())
        + f" to {args.out} in {dt:.1f} s"
    )
    if stats is not None:
        print(stats.describe())
    return 0


_NULLS = re.compile(r"(time|type) column '.*' has (\d+) null value")


def _in_events(exc: Exception, events, args: argparse.Namespace, fmt: str) -> Exception:
    """`exc`, an error about the events (Spark's `events` read from --events), with where in
    the file when it can say: the row of the first null time or type, and for a CSV file of
    no rows that its columns are text for want of values (a workload that needs numbers
    there)."""
    nulls = _NULLS.match(str(exc))
    try:
        if nulls:
            what = nulls[1]
            col = args.time_col if what == "time" else args.type_col
            header = fmt == "csv" and args.columns is None
            return null_error(events, args.events, col, what, int(nulls[2]), header)
        if isinstance(exc, WorkloadError) and fmt == "csv" and events.isEmpty():
            return UsageError(
                f"{args.events} has no rows, so its columns have no values to tell their "
                f"types by and are read as text: {exc}"
            )
    except Exception:  # (the error as it was, rather than one from looking for its row)
        log.debug("locating %s in the events failed", exc, exc_info=True)
    return exc


def _print_automata(pattern: Pattern) -> None:
    """Each side's automaton: states, what enters them, what they extend, what negations block
    (docs/architecture.md section 3)."""
    from gpu_hamlet.query.automaton import Automaton

    parts = (pattern.left, pattern.right) if isinstance(pattern, And) else (pattern,)
    for part in parts:
        auto = Automaton.of(*sides(part))
        of = f" of {show(part)}" if len(parts) > 1 else ""
        print(f"  automaton{of}: {len(auto.states)} states")
        for line in auto.describe():
            print(f"    {line}")


def cmd_explain(args: argparse.Namespace) -> int:
    from gpu_hamlet.engine.backend import select_backend
    from gpu_hamlet.engine.conjunction import run_as, run_queries
    from gpu_hamlet.engine.optimizer import COST_MODELS
    from gpu_hamlet.engine.plan_search import PlanCosts, plan_workload
    from gpu_hamlet.engine.sharing import analyze
    from gpu_hamlet.names import quoted, quoted_list

    check_time_flags(args.time_format, args.time_unit)
    if not args.events:
        _refuse_without_events(args)
    workload = _read_workload(args.workload)
    # (its run over --events reports, whatever the counts: they are not printed)
    options = _options(args, on_overflow="null")
    fmt = _input_format(args) if args.events else None
    for q in workload:
        print(f"{quoted(q.name)}: PATTERN {q.pattern_text}")
        aggs = ", ".join(f"{a} AS {quoted(a.name)}" for a in q.aggregates)
        print(f"  aggregates : {aggs or '(none: rows are the groups and windows with a trend)'}")
        print(
            f"  partitions : {quoted_list(q.partition_attrs) or '(one)'}"
            f"  (GROUPBY {quoted_list(q.groupby) or '-'})"
        )
        if q.filters:
            print(f"  filters    : {' AND '.join(map(str, q.filters))}")
        if q.next_conditions:
            print(
                f"  adjacent   : {' AND '.join(map(str, q.next_conditions))} (segment trees; "
                "windows run whole)"
            )
        print(f"  window     : {q.window}")
        _print_automata(q.pattern)
    print()
    _, take = run_as([(q, options) for q in workload])
    together: dict[str, list[str]] = {}
    for name, run in take.items():
        together.setdefault(run, [run] if run in workload.names else []).append(name)
    if together:
        print(f"Queries run as one: {'; '.join(quoted_list(ns) for ns in together.values())}")
    read = _events(_spark(None, "gpu-hamlet explain"), args, fmt, workload) if fmt else None
    events = read.toArrow() if read is not None else None
    stats = None
    if events is not None:  # first: the engine checks the columns the plan's statistics read
        from gpu_hamlet import RunStats
        from gpu_hamlet.engine.evaluate import evaluate

        stats = RunStats()
        try:
            evaluate(events, workload, options, stats=stats)
        except (EventDataError, WorkloadError) as exc:
            raise _in_events(exc, read, args, fmt or "") from None
    # Over float times only queries of one pane share (sharing.analyze): the sets and Q-sets
    # `evaluate` builds are those.
    float_time = events is not None and pa.types.is_floating(
        events.schema.field(options.time_col).type
    )
    print(analyze(run_queries(workload), float_time).describe())  # (the sets `evaluate` finds)
    print()
    model = COST_MODELS[select_backend(options.backend).name]  # (the costs `dynamic` plans with)
    plan = plan_workload(
        workload, events, options.type_col, args.plan_search, costs=PlanCosts.of(model)
    )
    print(plan.describe())
    if float_time:
        print("(float times: a Q-set of queries of several panes runs as one per pane)")
    print("(estimates: sharing='dynamic' runs the plan's Q-sets of SEQ transitions and Kleene")
    print(" cycles where their runs pay, a Q-set's consecutive ones as one chain, Q-sets kept")
    print(" apart on one stretch as one where their classes agree there, and HAMLET's one-type")
    print(" bursts burst by burst: docs/architecture.md section 10)")
    if events is not None and stats is not None:
        print(
            f"\nsharing decisions over {events.num_rows:,} events (in-process, "
            f"sharing={args.sharing}, numeric={args.numeric}):"
        )
        print(stats.describe())
    return 0


def column_names(text: str) -> list[str]:
    """The names of --columns: separated by commas, spaces around a name dropped; a name in
    double quotes is kept as written, commas and spaces included, a doubled quote standing for
    one (as in a CSV header line). An empty name, a name given twice or an unclosed quote is a
    usage error."""
    names: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] == " ":
            i += 1
        if i < n and text[i] == '"':
            name, i = "", i + 1
            while True:
                end = text.find('"', i)
                if end < 0:
                    raise argparse.ArgumentTypeError(f"unclosed quote in {text!r}")
                name += text[i:end]
                if text.startswith('"', end + 1):
                    name, i = name + '"', end + 2
                    continue
                i = end + 1
                break
            while i < n and text[i] == " ":
                i += 1
        else:
            end = text.find(",", i)
            end = n if end < 0 else end
            name, i = text[i:end].strip(), end
        if not name:
            raise argparse.ArgumentTypeError(f"an empty column name in {text!r}")
        if name in names:  # (which of the two would a workload read?)
            raise argparse.ArgumentTypeError(f"column {name!r} named twice in {text!r}")
        names.append(name)
        if i >= n:
            return names
        if text[i] != ",":
            raise argparse.ArgumentTypeError(f"expected ',' after \"{name}\" in {text!r}")
        i += 1


#: The masters Spark starts on (SparkContext's own patterns, and SparkSubmit's check that any
#: other begins with spark, k8s or yarn): anything else printed a Java trace before the one-line
#: error, and `local[0]` Spark's log of the failed context.
_MASTERS = re.compile(
    r"local|local\[([0-9]+|\*)(\s*,\s*[0-9]+)?\]"
    r"|local-cluster\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\]"
    r"|spark://.+|k8s://.+|yarn"
)


def _master(text: str) -> str:
    """A Spark master URL Spark can start on, checked before the JVM starts (argparse turns the
    error into a usage error, exit 2); a master it cannot reach still fails in Spark."""
    match = _MASTERS.fullmatch(text)
    local = match is not None and text.startswith("local")
    numbers = [int(n) for n in re.findall(r"[0-9]+", text)] if local else []
    # (local[0]: no threads; Spark reads each number as a Java int)
    if not match or (match[1] or "*").strip("0") == "" or any(n > 2**31 - 1 for n in numbers):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Spark master: use local[N] (N threads, N >= 1), local[*], "
            "spark://HOST:PORT, yarn or k8s://https://HOST:PORT"
        )
    return text


def _positive(text: str) -> int:
    """A whole number of 1 or more (argparse turns the error into a usage error, exit 2)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more, not {text!r}")
    return n


def cmd_demo(args: argparse.Namespace) -> int:
    """Generate a ridesharing stream, answer DEMO_WORKLOAD over it on Spark, and say what each
    step is (the workload, the data, why the counts are huge, a first run's compile time)."""
    import pyarrow.parquet as pq

    from gpu_hamlet import parse_workload
    from gpu_hamlet.datagen import ridesharing
    from gpu_hamlet.demo import WHY_HUGE, demo_session, describe_data, warm_up_kernels
    from gpu_hamlet.spark.job import run_job

    _check_gpu(args.backend, args.master)  # (before the data and Spark, as `run` checks it)
    workload = parse_workload(DEMO_WORKLOAD)
    options = _options(args)
    print(f"The workload ({len(workload)} queries):\n{DEMO_WORKLOAD.strip()}\n")
    with (
        tempfile.TemporaryDirectory(prefix="gpu-hamlet-demo-") as tmp,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        path = Path(tmp) / "rides.parquet"
        events = ridesharing(args.events, seed=args.seed)
        pq.write_table(events, path)
        print(f"{describe_data(events)}; in {path}")
        print(WHY_HUGE + "\n")
        print(
            "CPU kernels: loading (the first run compiles them, about 30 s on 2 cores, and "
            "numba caches them on disk) ...",
            flush=True,
        )
        # The kernels warm up while the JVM starts: both take seconds, on different cores.
        warm = pool.submit(warm_up_kernels, events, workload, options)
        try:
            spark = demo_session(args.master)
        except Exception as exc:
            raise _master_error(exc, args.master) from None
        print(f"CPU kernels: {warm.result().describe()}", flush=True)
        t0 = time.perf_counter()
        results = run_job(spark.read.parquet(str(path)), workload, options)
        # One small job per query: the results are a few rows per window and group.
        tables = {name: df.toArrow() for name, df in results.items()}
        dt = time.perf_counter() - t0
    print(
        f"answered {len(workload)} queries on Spark {spark.version} "
        f"({spark.sparkContext.master}) in {dt:.1f} s\n"
    )
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


def _input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--in-format",
        choices=["csv", "json", "parquet"],
        default=None,
        help="format of --events (default: from the file names: .csv .txt .dat "
        ".tsv, .json .jsonl .ndjson, .parquet .pq)",
    )
    p.add_argument(
        "--columns",
        type=column_names,
        default=None,
        metavar="NAME,...",
        help="names of every column of a CSV file without a "
        'header line (default: the file\'s header); "a, b" in double quotes is one name',
    )
    p.add_argument(
        "--delimiter", default=None, help="CSV field delimiter (default , or a tab for .tsv)"
    )
    p.add_argument("--time-col", default=DEFAULTS.time_col, help="time column (default time)")
    p.add_argument("--type-col", default=DEFAULTS.type_col, help="event type column (default type)")
    p.add_argument(
        "--time-format",
        default=None,
        metavar="PATTERN",
        help="times are text in this Spark datetime pattern, e.g. yyyyMMddHHmm or "
        "'MM/dd/yyyy HH:mm:ss' (read in the Spark session's time zone)",
    )
    p.add_argument(
        "--time-unit",
        choices=["s", "ms", "us", "ns"],
        default=None,
        help="times are numbers since the epoch in this unit: read as timestamps "
        "(default: numbers of seconds, as they are)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-hamlet", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"gpu-hamlet {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--log-level",
        type=str.upper,
        default=None,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="gpu-hamlet's messages on stderr (default INFO: progress; WARNING with --quiet)",
    )
    common.add_argument(
        "--quiet",
        action="store_true",
        help="no progress: neither gpu-hamlet's nor Spark's progress bar",
    )
    common.add_argument(
        "--verbose", action="store_true", help="tracebacks of errors, and Spark's own log at WARN"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        parents=[common],
        help="answer a workload over events on Spark, one dataset per query",
    )
    run.add_argument("--workload", required=True, help="workload file (query language)")
    run.add_argument(
        "--events", required=True, help="events: CSV, JSON lines or Parquet, a file or a folder"
    )
    run.add_argument(
        "--master",
        type=_master,
        default=None,
        help="Spark master (default: spark-submit's, else local[*])",
    )
    run.add_argument("--out", required=True, help="output folder: OUT/<query name>/")
    run.add_argument(
        "--out-format",
        default="parquet",
        choices=["parquet", "csv", "json"],
        help="format of each query's dataset (CSV with a header line)",
    )
    run.add_argument(
        "--mode",
        default="error",
        choices=["error", "overwrite"],
        help="if OUT exists and is not empty: fail (default), or replace it when "
        "it is a previous gpu-hamlet result",
    )
    run.add_argument(
        "--stats",
        action="store_true",
        help="print the sharing decisions of the engine tasks after the run",
    )
    _input_options(run)
    _engine_options(run)
    run.set_defaults(func=cmd_run)
    explain = sub.add_parser(
        "explain", parents=[common], help="show how a workload is compiled and shared"
    )
    explain.add_argument("--workload", required=True)
    explain.add_argument(
        "--events",
        default=None,
        help="also run it in-process over these events (read with local "
        "Spark) and print the optimizer's sharing decisions (bursts, "
        "snapshots, splits)",
    )
    explain.add_argument(
        "--plan-search",
        default="gloria",
        choices=SEARCHES,
        help="how GLORIA's sharing plan is searched: GLORIA's pruned search (default), its "
        "Greedy baseline, or the search without pruning",
    )
    _input_options(explain)
    _engine_options(explain, numbers=False)
    explain.add_argument(  # (the costs of sharing differ by mode: its decisions are the run's)
        "--numeric",
        default=DEFAULTS.numeric,
        choices=NUMERIC_MODES,
        help="the numeric mode of the run over --events (its counts are not printed)",
    )
    explain.set_defaults(func=cmd_explain)
    demo = sub.add_parser(
        "demo", parents=[common], help="generate a ridesharing stream and answer a sample workload"
    )
    demo.add_argument(
        "--events", type=_positive, default=200_000, help="number of events to generate"
    )
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--rows", type=_positive, default=8, help="result rows to print per query")
    demo.add_argument("--master", type=_master, default="local[*]")
    _engine_options(demo)
    demo.set_defaults(func=cmd_demo)
    return parser


_KEYWORD_ADVICE = re.compile(
    r"\b(numeric|on_overflow|backend|sharing|time_col|type_col)=(['\"])([^'\"]*)\2"
)


def cli_advice(message: str) -> str:
    """Engine messages advise Python keywords (`numeric='bigint'`); on the command line the same
    advice is a flag (`--numeric bigint`). Only the keywords that are flags: other advice
    (`coerce_timestamps='us'` for pyarrow) stays as written."""
    return _KEYWORD_ADVICE.sub(lambda m: f"--{m[1].replace('_', '-')} {m[3]}", message)


def error_message(exc: Exception) -> tuple[str, int]:
    """The one line to print for `exc`, and the exit status: 2 for bad input or usage, 1 for a
    failure while running. Errors from Spark tasks arrive wrapped in Java and Python traces:
    the gpu-hamlet error inside, or the input error raised by a job (cli_io), is what counts."""
    from gpu_hamlet.spark.job import _task_error

    exc = _task_error(exc)
    if isinstance(exc, GpuHamletError):
        return str(exc), 2
    text = str(exc)
    raised = re.search(re.escape(RAISED) + r"(.*?)(?: SQLSTATE: \w+)?$", text, re.MULTILINE)
    if raised:
        return raised[1], 2
    # A file Spark fails to read (Parquet files of a folder whose column types differ): the
    # file and column, not 'Py4JJavaError: An error occurred while calling o3714...'
    unread = re.search(r"\[FAILED_READ_FILE[\w.]*\] (.*?)(?: SQLSTATE: \w+)?$", text, re.MULTILINE)
    if unread:
        return unread[1], 2
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    from pyspark.errors import AnalysisException

    if isinstance(exc, AnalysisException):  # e.g. a file Spark cannot read as its format
        return first, 2
    return f"{type(exc).__name__}: {first}", 1


def _log_to_stderr(level: str) -> None:
    """gpu-hamlet's messages on stderr, one prefix per line: a handler of its own logger that
    does not pass records on to the root logger's (which would print each line again)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("gpu-hamlet: %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings (a pattern type absent from the data, say) as one line, like errors."""
    print(f"gpu-hamlet: warning: {cli_advice(str(message))}", file=sys.stderr)


def _stdout_gone() -> bool:
    """Whether the reader of stdout has gone (`explain | head -1`: its end of the pipe shows an
    error), not a socket of Spark's; then stdout is pointed at the null device, for Python
    flushes it once more at exit, and printed a traceback."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):  # (a stream of no file)
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    if not any(events & select.POLLERR for _, events in poller.poll(0)):
        return False
    os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
    return True


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # usage errors (2), --help and --version (0)
        return int(exc.code or 0)
    saved = (log.handlers[:], log.level, log.propagate)
    _console.progress, _console.verbose = not args.quiet, args.verbose
    _log_to_stderr(args.log_level or ("WARNING" if args.quiet else "INFO"))
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            status = args.func(args)
            sys.stdout.flush()  # (here, not at exit: a reader that has gone fails it)
            return status
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_gone():
            return 141  # quietly, as a shell's SIGPIPE ends a command (128 + 13)
        message, status = error_message(exc)
        if args.verbose:
            traceback.print_exc()
        print(f"gpu-hamlet: error: {cli_advice(message)}", file=sys.stderr)
        return status
    finally:  # main() may run inside a larger program (or the tests): leave its logging be
        log.handlers[:], log.propagate = saved[0], saved[2]
        log.setLevel(saved[1])


if __name__ == "__main__":
    sys.exit(main())

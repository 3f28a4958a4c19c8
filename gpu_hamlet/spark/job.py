"""`trend_aggregate(df, workload)`: the whole workload in one shared pass over a Spark DataFrame.

1. Validation without a Spark job: the workload is parsed and checked against the DataFrame's
   schema (every column, type, filter and duration), which also gives each query's exact result
   schema (gpu_hamlet/query/schema.py).
2. One statistics job: null times or types, the size and time span of each group of the shard
   key (the GROUPBY attributes all queries share), and how many events of each pattern type it
   holds (a second job lists the types present only to word the warning when one is missing).
3. Groups larger than one task's fair share (all events, when the queries share no GROUPBY) are cut
   into time slices, as many as their share of tasks, whatever the window lengths. Groups and
   slices are packed onto tasks by size.
4. Each group, or slice, gets a shard label that Spark's hash partitioning sends to its planned
   task (gpu_hamlet/spark/placement.py): `repartition` and `sortWithinPartitions` on the label
   and time, `mapInArrow` running the engine (the plan the RAPIDS Accelerator runs on the GPU)
   into one wide intermediate table, checkpointed once. A slice answers the windows inside it and
   adds pane summaries of its boundary segments (gpu_hamlet/engine/summaries.py).
5. A second, small stage: the summaries grouped by query and group (`applyInArrow`) are composed
   into the windows that cross the cuts, so every window is counted once, by one task. Each
   query's DataFrame selects its rows and columns from the union.

Queries with NEXT conditions (docs/semantics.md section 2) have no pane summaries: their windows
run whole. They run in passes of their own (steps 2 to 5 again), one per GROUPBY, whose groups
are never cut: each group goes whole to one task, groups still spread across tasks. The costs:
a NEXT query with no GROUPBY runs in one task, whatever `num_tasks`; the windows of NEXT queries
are evaluated window by window, so a sliding window copies each event into every window holding
it (WITHIN / SLIDE copies); and each pass reads the DataFrame again (twice: its statistics and
its engine pass), so cache an expensive `df` first.
"""

from __future__ import annotations

import functools
import heapq
import logging
import math
import re
import time
from typing import Any

from gpu_hamlet import errors
from gpu_hamlet.engine.evaluate import result_schemas
from gpu_hamlet.engine.events import require_column, used_columns, warn_absent_types
from gpu_hamlet.engine.options import Options
from gpu_hamlet.engine.sharing import RunStats, start_stats
from gpu_hamlet.errors import EventDataError
from gpu_hamlet.names import quoted, quoted_list
from gpu_hamlet.query.parser import as_workload
from gpu_hamlet.query.workload import Workload
from gpu_hamlet.spark.placement import shard_labels
from gpu_hamlet.spark.worker import (
    GROUP_COL,
    QUERY_COL,
    SHARD_COL,
    SUMMARY_COL,
    ShardJob,
    StatsParam,
    compose_group,
)

SHARDS_COL = "__shards"
log = logging.getLogger("gpu_hamlet")


def trend_aggregate(
    df: Any,
    workload: Workload | str,
    *,
    backend: str = "auto",
    sharing: str = "dynamic",
    numeric: str = "exact",
    on_overflow: str = "error",
    time_col: str = "time",
    type_col: str = "type",
    num_tasks: int | None = None,
    stats: RunStats | None = None,
) -> dict[str, Any]:
    """Answer every query of `workload` over the Spark DataFrame `df`; one DataFrame per query.

    Options are those of `gpu_hamlet.aggregate`. `num_tasks` is the number of engine tasks, and
    so of Spark partitions of the engine pass (default: the context's default parallelism).
    `stats`, a `RunStats()`, receives the sharing decisions of all engine tasks, summed per
    sharable set (brought back by a Spark accumulator). The engine pass runs once (once per pass
    when NEXT queries need passes of their own), here."""
    options = Options(backend, sharing, numeric, on_overflow, time_col, type_col)
    start_stats(stats)
    workload = as_workload(workload)  # (its errors first: they need no events)
    if not hasattr(df, "sparkSession"):  # (else an AttributeError from inside)
        raise TypeError(
            f"trend_aggregate takes a Spark DataFrame, not {type(df).__name__}: for pyarrow or "
            f"pandas events, use gpu_hamlet.aggregate"
        )
    if num_tasks is not None and (
        not isinstance(num_tasks, int) or isinstance(num_tasks, bool) or num_tasks < 1
    ):  # (0 meant the default; a string failed in a comparison inside)
        raise ValueError(f"num_tasks must be a positive int or None, got {num_tasks!r}")
    return run_job(df, workload, options, num_tasks=num_tasks, stats=stats)


def run_job(
    df: Any,
    workload: Workload | str,
    options: Options,
    *,
    num_tasks: int | None = None,
    stats: RunStats | None = None,
) -> dict[str, Any]:
    """`trend_aggregate` with its options checked already (the command line's entry).

    A workload mixing queries with and without NEXT conditions runs as several passes (see the
    module's docstring), each a `run_job` of its sub-workload, after the whole workload has been
    validated; the results come back in the workload's query order."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
    from pyspark.sql.types import (
        DoubleType,
        FloatType,
        IntegralType,
        LongType,
        StringType,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    wl = as_workload(workload)
    time_col, type_col = options.time_col, options.type_col
    used = used_columns(wl)
    columns = [time_col, type_col] + list(used)
    require_column(df.columns, time_col, "time")
    require_column(df.columns, type_col, "type")
    for name, q in used.items():  # (the first query that reads it: as `aggregate`)
        require_column(df.columns, name, "attribute", q)
    # Spark reads the columns under names of the job's own, `__e0`, `__e1`, ... (`safe`): a
    # user's name is never parsed by Spark, where a dot or backtick in it reads as a path (in
    # mapInArrow's own column references too), names that differ in case alone are one name
    # to Spark's case-insensitive resolution, and a column could be named like one of the job's
    # (`__n`, `__t0`, `__shard`, ...). toDF renames by position, resolving no name. The engine
    # tasks give the columns their names back (ShardJob.event_columns).
    raw = df.toDF(*[f"__d{i}" for i in range(len(df.columns))])
    safe = {c: f"__e{i}" for i, c in enumerate(dict.fromkeys(columns))}

    # A column of Spark's void type (all nulls, no type: a Parquet column of Arrow's null type)
    # is read as strings: grouped by void keys, the job's rows vanished (0 result rows, silently)
    def read(c: str) -> Any:
        col = F.col(f"__d{df.columns.index(c)}")
        return col.cast("string") if _void(df, c) else col

    events = raw.select(*(read(c).alias(e) for c, e in safe.items()))
    named = StructType([replace_name(events.schema[e], c) for c, e in safe.items()])
    ttype = named[time_col].dataType
    if not isinstance(
        ttype, (TimestampType, TimestampNTZType, IntegralType, DoubleType, FloatType)
    ):
        raise EventDataError(
            f"time column '{time_col}' has unsupported type "
            f"{ttype.simpleString()}: use a timestamp, or int or float seconds"
        )
    if not isinstance(named[type_col].dataType, StringType):
        raise EventDataError(
            f"type column '{type_col}' must hold strings, not "
            f"{named[type_col].dataType.simpleString()}"
        )
    schemas = result_schemas(to_arrow_schema(named), wl, options)
    passes = _passes(wl)
    if len(passes) > 1:  # every query validated above, before any pass's Spark job
        out: dict[str, Any] = {}
        for i, sub in enumerate(passes):
            by = sub.queries[0].groupby
            if not any(q.next_conditions for q in sub):
                kind = "without NEXT conditions"
            elif by:
                grouped = ", ".join(map(quoted, by))
                kind = f"NEXT conditions, GROUPBY {grouped}: each group whole in one task"
            else:
                kind = "NEXT conditions, no GROUPBY: all events in one task"
            log.info("pass %d of %d (%s): %s", i + 1, len(passes), quoted_list(sub.names), kind)
            out.update(run_job(df, sub, options, num_tasks=num_tasks, stats=stats))
        return {q.name: out[q.name] for q in wl}
    cut = not any(q.next_conditions for q in wl)  # NEXT: no pane summaries, windows run whole

    spark = df.sparkSession
    tasks = num_tasks or spark.sparkContext.defaultParallelism
    started = time.perf_counter()
    keys = [a for a in wl.queries[0].groupby if all(a in q.groupby for q in wl)]
    skeys, tcol, ycol = [safe[k] for k in keys], safe[time_col], safe[type_col]
    integral = not isinstance(ttype, (DoubleType, FloatType))
    # Ticks as the engine sees them: microseconds since the epoch (wall clock for TIMESTAMP_NTZ,
    # as Arrow hands it over), or the numeric seconds themselves.
    if isinstance(ttype, TimestampType):
        ticks = "unix_micros({})"
    elif isinstance(ttype, TimestampNTZType):
        ticks = "timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {})"
    else:
        ticks = "CAST({} AS %s)" % ("BIGINT" if integral else "DOUBLE")

    # 2. the statistics: per shard-key group its size, time span and nulls (times are converted
    # after min and max, once per group), and how many events of each pattern type it holds;
    # grouping by type first costs one hash per row, where a count per pattern type would cost
    # a string comparison per type and row.
    type_names = tuple(sorted({t for q in wl for t in q.event_types}))
    # A timestamp key travels through the driver as its microseconds, cast back in Spark (the
    # plan, step 3): PySpark hands a timestamp to Python as a naive local datetime and reads it
    # back with mktime, which ignores `fold`, so where the driver's zone has daylight saving the
    # two instants of a fall-back hour (01:30 EDT and 01:30 EST) were one key: the plan held it
    # twice, its events went to the engine twice and the other group's were lost.
    stamps = {k for k in skeys if isinstance(events.schema[k].dataType, TimestampType)}
    exact = [F.unix_micros(k).alias(k) if k in stamps else k for k in skeys]
    per_type = events.groupBy(*exact, ycol).agg(
        F.count(F.lit(1)).alias("__n"),
        F.min(tcol).alias("__lo"),
        F.max(tcol).alias("__hi"),
        F.count(tcol).alias("__times"),
    )

    def sum0(col: Any) -> Any:  # 0, not null, over no rows (no keys and no events)
        return F.coalesce(F.sum(col), F.lit(0))

    def of_type(cond: Any) -> Any:
        return sum0(F.when(cond, F.col("__n")).otherwise(0))

    groups = (
        per_type.groupBy(*skeys)
        .agg(
            sum0("__n").alias("__n"),
            F.expr(ticks.format("min(__lo)")).alias("__lo"),
            F.expr(ticks.format("max(__hi)")).alias("__hi"),
            sum0("__times").alias("__times"),
            of_type(F.col(ycol).isNull()).alias("__null_types"),
            *[of_type(F.col(ycol) == t).alias(f"__type{i}") for i, t in enumerate(type_names)],
        )
        .collect()
    )
    null_time = sum(r["__n"] - r["__times"] for r in groups)
    null_type = sum(r["__null_types"] for r in groups)
    if null_time:
        raise EventDataError(f"time column '{time_col}' has {null_time} null value(s)")
    if null_type:
        raise EventDataError(f"type column '{type_col}' has {null_type} null value(s)")
    total = sum(r["__n"] for r in groups)
    missing = [t for i, t in enumerate(type_names) if not sum(r[f"__type{i}"] for r in groups)]
    if total and missing:  # no error: those queries have no trends (warned once, here)
        present = [r[0] for r in events.select(ycol).distinct().limit(1000).collect()]
        warn_absent_types(wl, present, type_col)
    plan = assign_tasks(groups, skeys, total, tasks, integral, cut=cut)
    log.info(
        "statistics of %d events in %d group(s): %.1f s; %d task(s), %d split group(s)",
        total,
        len(groups),
        time.perf_counter() - started,
        tasks,
        sum(1 for p in plan if p[-1] is not None),
    )
    started = time.perf_counter()

    # 3. a shard label per group, and per time slice of a cut group, that hashes to its task.
    from pyspark.sql.types import ArrayType, StructField

    nk = len(keys)
    labels = iter(shard_labels([t for row in plan for t in row[nk]], tasks))
    rows, cuts = [], {}
    for row in plan:
        t0, R, rmax = row[nk + 1 :]
        shards = [next(labels) for _ in row[nk]]
        if rmax is not None:
            cuts.update({label: (r, t0, R, rmax) for r, label in enumerate(shards)})
        rows.append(row[:nk] + (shards, t0, R, rmax))
    tick_type = LongType() if integral else DoubleType()
    pschema = StructType(
        [
            StructField(f"__key{i}", LongType() if k in stamps else events.schema[k].dataType)
            for i, k in enumerate(skeys)
        ]
        + [
            StructField(SHARDS_COL, ArrayType(LongType())),
            StructField("__t0", tick_type),
            StructField("__R", tick_type),
            StructField("__rmax", LongType()),
        ]
    )
    micros = {
        f"__key{i}": F.timestamp_micros(f"__key{i}") for i, k in enumerate(skeys) if k in stamps
    }
    pdf = F.broadcast(spark.createDataFrame(rows, pschema).withColumns(micros))
    # Null-safe: a null GROUPBY value is a group like any other.
    on = [F.col(k).eqNullSafe(F.col(f"__key{i}")) for i, k in enumerate(skeys)]
    # The engine's first step, before the shuffle: events of types no pattern uses are in no
    # trend (gpu_hamlet/engine/events.py drops them too).
    used = events.filter(F.col(ycol).isin(*type_names))
    used = used.withColumn(ycol, type_codes(F.col(ycol), type_names))
    typed = used.join(pdf, on=on, how="inner") if keys else used.crossJoin(pdf)
    # Cut.slice_of() of gpu_hamlet/engine/summaries.py: floor((t - t0) / R) clamped to [0, rmax];
    # only evaluated for the rows of cut groups.
    since = f"({ticks.format(tcol)} - __t0)"
    r = F.expr(f"{since} div __R" if integral else f"floor({since} / __R)")
    r = F.least(F.greatest(r.cast("long"), F.lit(0)), F.col("__rmax"))
    r = F.when(F.col("__R").isNull(), F.lit(0).cast("long")).otherwise(r)
    typed = typed.select(
        *safe.values(), F.element_at(F.col(SHARDS_COL), (r + 1).cast("int")).alias(SHARD_COL)
    )
    names = tuple(q.name for q in wl)
    acc = None if stats is None else spark.sparkContext.accumulator(RunStats(), StatsParam())
    job = ShardJob(
        wl,
        names,
        tuple(schemas[n] for n in names),
        tuple(keys),
        options,
        cuts,
        type_names,
        acc,
        tuple(safe),
    )
    # Time order within each shard is all the engine's sort needs (gpu_hamlet/engine/partitions.py):
    # sorting by the other partition attributes as well costs Spark more than it saves there.
    wide = (
        typed.repartition(tasks, SHARD_COL)
        .sortWithinPartitions(SHARD_COL, tcol)
        .mapInArrow(job, from_arrow_schema(job.wide_schema, prefer_timestamp_ntz=True))
    )
    try:
        wide = wide.localCheckpoint(eager=True)
    except Exception as exc:  # a task's error arrives wrapped in Spark's PythonException
        raise _task_error(exc) from None
    if stats is not None:
        assert acc is not None  # made above whenever stats is given
        stats.add(acc.value)
    log.info(
        "engine pass (shuffle, sort, %d queries): %.1f s", len(wl), time.perf_counter() - started
    )

    if any(p[-1] is not None for p in plan):
        # 5. the crossing windows of cut groups, from their slices' summaries.
        started = time.perf_counter()
        summaries = wide.filter(F.col(SUMMARY_COL).isNotNull())
        crossing = summaries.groupBy(QUERY_COL, GROUP_COL).applyInArrow(
            functools.partial(compose_group, job),
            from_arrow_schema(job.result_schema, prefer_timestamp_ntz=True),
        )
        wide = (
            wide.filter(F.col(SUMMARY_COL).isNull())
            .drop(GROUP_COL, SUMMARY_COL)
            .unionByName(crossing)
        )
        try:
            wide = wide.localCheckpoint(eager=True)
        except Exception as exc:
            raise _task_error(exc) from None
        log.info("windows across cuts from pane summaries: %.1f s", time.perf_counter() - started)

    # SQL strings: two py4j calls per query, where Column objects take a few per column.
    return {
        name: wide.where(f"{QUERY_COL} = {i}").selectExpr(
            *[f"{slot} AS {sql_name(col)}" for slot, col in job.columns(i)]
        )
        for i, name in enumerate(names)
    }


def type_codes(col: Any, type_names: tuple[str, ...]) -> Any:
    """The type column as int codes into `type_names` (-1 for others), the form the engine
    tasks receive: ints shuffle and convert to Arrow more cheaply than strings."""
    from pyspark.sql import functions as F

    code = F.array_position(F.array(*[F.lit(t) for t in type_names]), col) - 1
    return code.cast("int")


def replace_name(field: Any, name: str) -> Any:
    """The Spark StructField `field` named `name`."""
    from pyspark.sql.types import StructField

    return StructField(name, field.dataType, field.nullable, field.metadata)


def _void(df: Any, name: str) -> bool:
    """Whether column `name` of `df` has Spark's void type (NullType)."""
    from pyspark.sql.types import NullType

    return isinstance(df.schema[name].dataType, NullType)


def sql_name(name: str) -> str:
    """A column name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def _task_error(exc: Exception) -> Exception:
    """The gpu-hamlet error a Spark task raised, rebuilt on the driver with its own message (the
    query, group and window at fault), or the original exception."""
    found = re.findall(r"gpu_hamlet\.errors\.(\w+): (.+)", str(exc))
    if found:
        name, message = found[-1]
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, errors.GpuHamletError):
            return cls(message.strip())
    return exc


def _passes(wl: Workload) -> list[Workload]:
    """The workload's passes: the queries without NEXT conditions together, and those with them
    by GROUPBY (their groups are never cut, so each pass shards by its own GROUPBY; the order of
    the GROUPBY attributes does not matter to the shards), in the order they first occur."""
    by: dict[frozenset[str] | None, list] = {}
    for q in wl:
        by.setdefault(frozenset(q.groupby) if q.next_conditions else None, []).append(q)
    return [Workload(tuple(qs)) for qs in by.values()]


def assign_tasks(
    groups: list, keys: list[str], total: int, tasks: int, integral: bool, cut: bool = True
) -> list[tuple]:
    """A plan row per group of the shard key: (key values..., task per slice, t0, R, last slice).

    Groups holding more than one task's fair share of the events are cut into time slices of R
    ticks, as many as their share of tasks (at most one per tick of their span: equal times stay
    together); others stay whole (t0, R, last slice are None). Groups and slices go to tasks
    largest first, each to the least loaded task. `groups` are rows with the key columns, `__n`
    (events), `__lo` and `__hi` (first and last tick). Without `cut` every group stays whole."""
    fair = max(total / max(tasks, 1), 1.0)
    units = []  # (estimated events, group index, slice)
    cuts = {}
    for gi, row in enumerate(groups):
        if not row["__n"]:  # no events at all: nothing to plan (its times are null)
            continue
        span = row["__hi"] - row["__lo"]
        m = 1
        # Slices are found from t - t0 (here and in Cut.slice_of): a group spanning more than
        # int64 ticks (times at both ends of the type) would overflow it, so it stays whole; so
        # does a float group whose span is infinite or whose slices would be 0 wide (a span of
        # a subnormal halves to 0.0: Spark divided by zero).
        if cut and tasks > 1 and row["__n"] > fair and 0 < span < (2**63 if integral else math.inf):
            m = min(math.ceil(row["__n"] / fair), tasks)
            if integral:
                m = min(m, int(span) + 1)
            elif not span / m > 0:
                m = 1
        if m >= 2:
            R = max(1, math.ceil((span + 1) / m)) if integral else span / m
            cuts[gi] = (row["__lo"], R, m - 1)
            units += [(row["__n"] / m, gi, r) for r in range(m)]
        else:
            units.append((row["__n"], gi, 0))
    load = [(0.0, t) for t in range(max(tasks, 1))]
    heapq.heapify(load)
    task_of: dict[tuple[int, int], int] = {}
    for size, gi, r in sorted(units, key=lambda u: -u[0]):
        used, t = heapq.heappop(load)
        task_of[(gi, r)] = t
        heapq.heappush(load, (used + size, t))
    plan = []
    for gi, row in enumerate(groups):
        if not row["__n"]:
            continue
        t0, R, rmax = cuts.get(gi, (None, None, None))
        n_ranges = 1 if rmax is None else rmax + 1
        plan.append(
            tuple(row[k] for k in keys) + ([task_of[(gi, r)] for r in range(n_ranges)], t0, R, rmax)
        )
    return plan


__all__ = ["assign_tasks", "run_job", "sql_name", "trend_aggregate", "type_codes"]

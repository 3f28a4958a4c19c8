"""The Spark job: same results as the in-process engine and the oracle, whatever the number of
tasks; skewed groups split across tasks; errors before any engine task; GPU choice in tasks."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap
import types

import numpy as np
import pyarrow as pa
import pytest
from compare import assert_matches_oracle, events_to_table, sorted_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import oracle
from strategies import event_streams, workload_cases, workload_types

import gpu_hamlet
from gpu_hamlet.datagen import kleene_stream
from gpu_hamlet.devices import choose_device
from gpu_hamlet.engine.options import Options
from gpu_hamlet.errors import AbsentTypeWarning, EventDataError, GpuHamletError, WorkloadError
from gpu_hamlet.spark import trend_aggregate
from gpu_hamlet.spark.job import assign_tasks
from gpu_hamlet.spark.worker import packed_columns

WORKLOAD = (
    "grouped: RETURN g, COUNT(*), SUM(B.x), MAX(B.y) PATTERN SEQ(A, B+, C) GROUPBY g "
    "WITHIN 30 s SLIDE 10 s;"
    "alone: RETURN COUNT(*), AVG(B.y), MIN(B.x) PATTERN SEQ(A, B+) WITHIN 20 s;"
    "equiv: RETURN COUNT(B) PATTERN SEQ(C, B+) WHERE [g] AND B.x > 2 WITHIN 15 s"
)


def _assert_same(spark_results: dict, local: dict[str, pa.Table]) -> None:
    """Same schema and rows; float columns to 1e-9 (equal timestamps in another input order add
    floats in another order), every other column exactly."""
    assert set(spark_results) == set(local)
    for name, df in spark_results.items():
        got = df if isinstance(df, pa.Table) else df.toArrow()
        want = local[name]
        assert got.schema.equals(want.schema), (name, got.schema, want.schema)
        got, want = sorted_rows(got), sorted_rows(want)
        for col in want.column_names:
            a, b = got.column(col).to_pylist(), want.column(col).to_pylist()
            if pa.types.is_floating(want.schema.field(col).type):
                np.testing.assert_allclose(
                    np.array(a, float), np.array(b, float), rtol=1e-9, err_msg=f"{name}.{col}"
                )
            else:
                assert a == b, (name, col)


@pytest.fixture(scope="module")
def stream():
    return kleene_stream(
        30_000, seed=5, types=("A", "B", "C"), n_groups=3, duplicate_time_fraction=0.2
    )


def test_a_task_without_a_gpu_raises_what_aggregate_raises(spark, stream, monkeypatch):
    """backend='gpu' in a task given no GPU raised a RuntimeError, which came to the driver as
    a PythonException holding the worker's traceback."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    df = spark.createDataFrame(stream.slice(0, 100).to_pandas())
    with pytest.raises(GpuHamletError, match="backend='gpu', but this Spark task has no GPU"):
        trend_aggregate(df, WORKLOAD, backend="gpu", num_tasks=1)


@pytest.mark.parametrize("tasks", [1, 2, 7])
def test_same_as_engine_for_1_2_7_tasks(spark, stream, tasks):
    df = spark.createDataFrame(stream.to_pandas()).repartition(3)
    _assert_same(
        trend_aggregate(df, WORKLOAD, num_tasks=tasks), gpu_hamlet.aggregate(stream, WORKLOAD)
    )


def test_float_and_bigint_modes(spark, stream):
    df = spark.createDataFrame(stream.to_pandas())
    for numeric in ("float", "bigint"):
        _assert_same(
            trend_aggregate(df, WORKLOAD, numeric=numeric, num_tasks=3),
            gpu_hamlet.aggregate(stream, WORKLOAD, numeric=numeric),
        )


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.data())
def test_random_cases_match_oracle(spark, data):
    text, wl = data.draw(workload_cases(max_queries=3))
    events = data.draw(event_streams(workload_types(wl)))
    table = events_to_table(events)
    df = (
        spark.createDataFrame(table.to_pandas(), schema=None)
        if events
        else spark.createDataFrame(
            [], "time long, type string, g string, k long, x long, y double, s string"
        )
    )
    results = trend_aggregate(df, text, num_tasks=3)
    got = {name: sorted_rows(r.toArrow()) for name, r in results.items()}  # Spark has no row order
    assert_matches_oracle(got, oracle(events, wl, with_magnitudes=True), wl, "exact")


def test_skewed_group_is_split_and_exact(spark):
    """One group holds 90% of the events: it is cut into at least 4 time ranges (tasks), and
    the results equal one task's."""
    rng = np.random.default_rng(3)
    base = kleene_stream(40_000, seed=9, types=("A", "B", "C"), mean_burst=8)
    g = np.where(rng.random(base.num_rows) < 0.9, 0, rng.integers(1, 10, base.num_rows))
    table = base.set_column(base.column_names.index("g"), "g", pa.array(g))
    df = spark.createDataFrame(table.to_pandas())
    wl = (  # (the third RETURNs its group alone: keys, no aggregate)
        "RETURN g, COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) GROUPBY g WITHIN 40 s SLIDE 20 s;"
        "RETURN g, COUNT(B) PATTERN SEQ(A, B+) GROUPBY g WITHIN 60 s;"
        "RETURN g PATTERN SEQ(A, B+, C) GROUPBY g WITHIN 40 s SLIDE 20 s"
    )
    from pyspark.sql import functions as F

    groups = (
        df.groupBy("g")
        .agg(
            F.count(F.lit(1)).alias("__n"), F.min("time").alias("__lo"), F.max("time").alias("__hi")
        )
        .collect()
    )
    plan = {row[0]: row[1:] for row in assign_tasks(groups, ["g"], table.num_rows, 4, True)}
    tasks, t0, R, rmax = plan[0]
    assert rmax + 1 >= 4 and len(set(tasks)) == 4  # the big group: 4+ ranges on 4 tasks
    assert all(p[3] is None for g, p in plan.items() if g != 0)  # the others stay whole
    one_task = {k: v.toArrow() for k, v in trend_aggregate(df, wl, num_tasks=1).items()}
    _assert_same(trend_aggregate(df, wl, num_tasks=4), one_task)
    keys = one_task["q1"].select(["g", "window_start", "window_end"])
    assert one_task["q3"].num_rows > 0 and sorted_rows(one_task["q3"]).equals(sorted_rows(keys))


def test_hot_group_shorter_than_a_window_is_split(spark):
    """A group whose events all fall inside one window still spreads over several tasks: its
    slices are shorter than the window, and every window is composed from pane summaries."""
    events = kleene_stream(6000, seed=4, types=("A", "B", "C"), mean_burst=5)
    t = events.column("time").to_numpy()
    t = 0.25 + 50.0 * (t - t.min()) / max(1, t.max() - t.min())  # float seconds in [0.25, 50.25]
    events = events.set_column(events.column_names.index("time"), "time", pa.array(t))
    events = events.set_column(
        events.column_names.index("g"), "g", pa.array(np.zeros(events.num_rows, np.int64))
    )
    text = (
        "RETURN g, COUNT(*), SUM(B.x), MIN(B.y) PATTERN SEQ(A, B+, C) GROUPBY g "
        "WITHIN 60 s SLIDE 20 s; RETURN g, COUNT(B) PATTERN SEQ(A, B+) GROUPBY g WITHIN 90 s"
    )
    df = spark.createDataFrame(events.to_pandas())
    plan = assign_tasks(
        [{"g": 0, "__n": events.num_rows, "__lo": 0.25, "__hi": 50.25}],
        ["g"],
        events.num_rows,
        4,
        False,
    )
    assert plan[0][-1] == 3 and plan[0][-2] < 60  # four slices, each shorter than a window
    _assert_same(
        trend_aggregate(df, text, num_tasks=4, numeric="bigint"),
        gpu_hamlet.aggregate(events, text, numeric="bigint"),
    )


def test_timestamp_time_column(spark, stream):
    ts = stream.set_column(
        stream.column_names.index("time"),
        "time",
        stream.column("time")
        .cast(pa.int64())
        .cast(pa.timestamp("s"))
        .cast(pa.timestamp("us", tz="UTC")),
    )
    df = spark.createDataFrame(ts.to_pandas())
    _assert_same(trend_aggregate(df, WORKLOAD, num_tasks=2), gpu_hamlet.aggregate(ts, WORKLOAD))


def test_bad_input_fails_before_the_engine_runs(spark, stream):
    sc = spark.sparkContext
    df = spark.createDataFrame(stream.to_pandas())
    sc.setJobGroup("bad-input", "validation")
    # (the query that reads it named, as `aggregate` names it)
    with pytest.raises(EventDataError, match="query q1: attribute column 'speed' is missing"):
        trend_aggregate(df, "RETURN AVG(B.speed) PATTERN SEQ(A, B+) WITHIN 1 min")
    with pytest.raises(EventDataError, match="^type column 'kind' is missing"):
        trend_aggregate(df, "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min", type_col="kind")
    with pytest.raises(EventDataError, match="type column 'g' must hold strings"):
        trend_aggregate(df, "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min", type_col="g")
    with pytest.raises(EventDataError, match="time column 'type' has unsupported type"):
        trend_aggregate(
            df, "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min", time_col="type", type_col="g"
        )
    with pytest.raises(ValueError, match="time_col and type_col must be two columns"):
        trend_aggregate(df, "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min", time_col="type")
    assert list(sc.statusTracker().getJobIdsForGroup("bad-input")) == []
    with pytest.raises(WorkloadError, match="line 1, column 17"):
        trend_aggregate(None, "RETURN COUNT(*) PATERN SEQ(A) WITHIN 1 min")
    ok = "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min"
    with pytest.raises(TypeError, match="not DataFrame: for pyarrow or pandas events, use"):
        trend_aggregate(stream.to_pandas(), ok)  # (was an AttributeError: no .schema)
    with pytest.raises(EventDataError, match="a Spark DataFrame: run the workload on Spark with"):
        gpu_hamlet.aggregate(df, ok, backend="cpu")  # (and the other way round)
    from pyspark.sql import Row

    with pytest.raises(EventDataError, match="or a pandas DataFrame, not Row"):  # (no frame)
        gpu_hamlet.aggregate(Row(time=1, type="A"), ok, backend="cpu")
    for bad in (0, -1, "3", 2.0):  # (0 was the default; "3" a TypeError from a comparison)
        with pytest.raises(ValueError, match="num_tasks must be a positive int"):
            trend_aggregate(df, ok, num_tasks=bad)
    nulls = spark.createDataFrame([(1, "A"), (None, "B")], "time long, type string")
    with pytest.raises(EventDataError, match="time column 'time' has 1 null"):
        trend_aggregate(nulls, "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min")
    nulls = spark.createDataFrame([(1, "A"), (2, None)], "time long, type string")
    with pytest.raises(EventDataError, match="type column 'type' has 1 null"):
        trend_aggregate(nulls, "RETURN COUNT(*) PATTERN SEQ(A) WITHIN 1 min")
    with pytest.warns(
        AbsentTypeWarning,
        match=r"query q2: event type 'D' of its pattern never "
        r"occurs in column 'type'.*types present: A, B, C",
    ):
        trend_aggregate(
            df,
            "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min; "
            "RETURN COUNT(*) PATTERN SEQ(A, D) WITHIN 1 min",
        )


def test_choose_device_rules():
    assert choose_device(env={"CUDA_VISIBLE_DEVICES": "2"}, addresses=["5"]) == 0
    assert choose_device(env={}, addresses=["5", "6"]) == 5
    assert choose_device(env={"CUDA_VISIBLE_DEVICES": ""}, addresses=[]) is None
    assert choose_device(env={}, addresses=[]) is None


def test_a_task_without_a_named_gpu_uses_a_visible_one(monkeypatch, caplog):
    """A local master schedules no GPUs: a task that sees a device but is given none (no
    CUDA_VISIBLE_DEVICES, no 'gpu' resource) runs on it; `auto` ran on the CPU and `gpu` failed
    there (`docker run --gpus all`). Without a visible device `auto` says once that it uses
    the CPU, and `gpu` is an error naming the ways to give a task one."""
    from gpu_hamlet.engine import backend as engine_backend
    from gpu_hamlet.spark import worker

    monkeypatch.setattr(worker, "choose_device", lambda: None)
    monkeypatch.setattr(engine_backend, "_said", set())  # (said once a process)
    for visible in (True, False):
        monkeypatch.setattr(worker, "cuda_visible", lambda visible=visible: visible)
        for backend in ("auto", "gpu"):
            job = types.SimpleNamespace(options=Options(backend=backend))  # (all it reads)

            def options(job=job):
                return worker.ShardJob.task_options(job)  # type: ignore[arg-type]

            if visible:
                assert options().backend == backend
            elif backend == "gpu":
                with pytest.raises(GpuHamletError, match="no CUDA device is visible to it"):
                    options()
            else:
                with caplog.at_level(logging.INFO, logger="gpu_hamlet"):
                    assert options().backend == "cpu"
                assert "a Spark task sees no CUDA device; its tasks use the CPU" in caplog.text


@pytest.mark.spark
@pytest.mark.gpu
def test_gpu_resource_reaches_tasks_on_local_cluster(tmp_path):
    """Spark's local-cluster master with a fake discovery script: each task picks the GPU
    address Spark assigned it (no CUDA_VISIBLE_DEVICES), and the engine's GPU backend runs on
    it (numba's simulator has one device, 0: a real one is selected the same way)."""
    script = tmp_path / "fake_gpus.sh"
    script.write_text('#!/usr/bin/env bash\necho \'{"name": "gpu", "addresses": ["0"]}\'\n')
    script.chmod(0o755)
    code = textwrap.dedent(f"""
        import os, sys
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        import pyarrow as pa
        from pyspark.sql import SparkSession
        from gpu_hamlet import RunStats
        from gpu_hamlet.datagen import kleene_stream
        from gpu_hamlet.devices import choose_device
        from gpu_hamlet.spark import trend_aggregate
        spark = (SparkSession.builder.master("local-cluster[1,2,1024]")
                 .config("spark.ui.enabled", "false")
                 .config("spark.executorEnv.NUMBA_ENABLE_CUDASIM", "1")
                 .config("spark.worker.resource.gpu.amount", "1")
                 .config("spark.worker.resource.gpu.discoveryScript", "{script}")
                 .config("spark.executor.resource.gpu.amount", "1")
                 .config("spark.executor.resource.gpu.discoveryScript", "{script}")
                 .config("spark.task.resource.gpu.amount", "0.5")
                 .getOrCreate())
        def pick(batches):
            device = choose_device()
            for _ in batches:
                yield pa.RecordBatch.from_pydict({{"d": [-1 if device is None else device]}})
        print("DEVICES", sorted(r.d for r in spark.range(4).repartition(2)
                                .mapInArrow(pick, "d long").collect()))
        events = kleene_stream(300, seed=2, types=("A", "B", "C"), mean_burst=4)
        stats = RunStats()
        out = trend_aggregate(spark.createDataFrame(events),
                              "RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 50 s",
                              backend="gpu", numeric="float", num_tasks=2, stats=stats)
        [df.collect() for df in out.values()]
        print("RAN", sorted(stats.devices.items()))
        spark.stop()
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
    )
    assert "DEVICES [0, 0]" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
    ran = re.search(r"RAN \[\('gpu:0', (\d+)\)\]", out.stdout)
    assert ran and int(ran.group(1)) >= 1, out.stdout[-2000:] + out.stderr[-2000:]


def test_timestamp_ntz_from_parquet(spark, stream, tmp_path):
    """Parquet timestamps without a time zone arrive as TIMESTAMP_NTZ: wall-clock times, windows
    aligned to the epoch, exactly as the in-process engine reads the same file."""
    import pyarrow.parquet as pq

    naive = stream.set_column(
        stream.column_names.index("time"),
        "time",
        stream.column("time").cast(pa.timestamp("s")).cast(pa.timestamp("us")),
    )
    pq.write_table(naive, tmp_path / "events.parquet")
    df = spark.read.parquet(str(tmp_path / "events.parquet"))
    assert df.schema["time"].dataType.simpleString() == "timestamp_ntz"
    _assert_same(trend_aggregate(df, WORKLOAD, num_tasks=3), gpu_hamlet.aggregate(naive, WORKLOAD))


def test_overflow_in_a_task_reaches_the_driver_as_itself(spark):
    """A decimal(38) overflow inside a task surfaces as NumericOverflowError naming the query,
    group and window; on_overflow="null" gives null, bigint the exact digits."""
    from gpu_hamlet.errors import NumericOverflowError

    rows = [(0, "A", "g1")] + [(i, "B", "g1") for i in range(1, 140)]
    df = spark.createDataFrame(rows, "time long, type string, g string")
    text = "big: RETURN g, COUNT(*) PATTERN SEQ(A, B+) GROUPBY g WITHIN 1000 s"
    with pytest.raises(
        NumericOverflowError,
        match=r"query big: COUNT\(\*\) for group \(g='g1'\) "
        r"in window \[0, 1000\)",
    ):
        trend_aggregate(df, text, num_tasks=2)
    nulls = trend_aggregate(df, text, on_overflow="null", num_tasks=2)["big"].collect()
    assert [r["count"] for r in nulls] == [None]
    digits = trend_aggregate(df, text, numeric="bigint", num_tasks=2)["big"].collect()
    assert [r["count"] for r in digits] == [str(2**139 - 1)]


def test_bigint_counts_of_hundreds_of_digits_across_tasks(spark):
    """One group of 2^3000 - 1 trends cut over three tasks: each slice's boundary maps (about
    1,000 bits, beyond 744) take the 'modps' passes of primes below 2^50 in the workers, and
    the driver composes them exactly (gpu_hamlet/core/rings.py `residue_passes`)."""
    n = 3000
    rows = [(0, "A", 0)] + [(i, "B", i % 7 - 3) for i in range(1, n + 1)] + [(n + 1, "C", 0)]
    df = spark.createDataFrame(rows, "time long, type string, x long")
    text = "big: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 10000 s"
    (row,) = trend_aggregate(df, text, numeric="bigint", num_tasks=3)["big"].collect()
    assert row["count"] == str(2**n - 1)
    assert row["sum_B_x"] == str(2 ** (n - 1) * sum(i % 7 - 3 for i in range(1, n + 1)))


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    within=st.integers(3, 40),
    slide_div=st.integers(1, 4),
    tasks=st.integers(3, 6),
    float_time=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_time_range_split_matches_engine(spark, within, slide_div, tasks, float_time, seed):
    """All events in one group, cut into time slices over several tasks (each answering the
    windows inside it; the second stage composes the crossing ones from pane summaries): same
    results as in-process, for random windows, slides and int or float times."""
    events = kleene_stream(
        2000, seed=seed, types=("A", "B", "C"), mean_burst=6, duplicate_time_fraction=0.3
    )
    if float_time:
        t = events.column("time").to_numpy() * 0.5 + 0.25
        events = events.set_column(events.column_names.index("time"), "time", pa.array(t))
    slide = max(1, within // slide_div)
    text = (
        f"RETURN COUNT(*), SUM(B.x), MAX(B.y) PATTERN SEQ(A, B+, C) WITHIN {within} s "
        f"SLIDE {slide} s;"
        f"RETURN COUNT(B) PATTERN SEQ(A, B+) WITHIN {2 * within} s"
    )
    df = spark.createDataFrame(events.to_pandas())
    _assert_same(
        trend_aggregate(df, text, num_tasks=tasks, numeric="bigint"),
        gpu_hamlet.aggregate(events, text, numeric="bigint"),
    )


def test_empty_events_give_empty_results(spark):
    empty = spark.createDataFrame([], "time long, type string, x long")
    for tasks in (1, 3):
        res = trend_aggregate(
            empty, "RETURN COUNT(*), SUM(A.x) PATTERN SEQ(A) WITHIN 60 s", num_tasks=tasks
        )
        got = res["q1"].toArrow()
        assert got.num_rows == 0
        assert got.column_names == ["window_start", "window_end", "count", "sum_A_x"]


def test_a_void_column_is_read_as_strings(spark, tmp_path):
    """A column of Spark's void type (a Parquet column of Arrow's null type: all nulls) is read
    as strings. Grouped by it, the job returned no rows, silently (a helper's hunt found it
    through `gpu-hamlet run`)."""
    import pyarrow.parquet as pq

    path = tmp_path / "e.parquet"
    table = pa.table({"type": ["A", "B"], "time": pa.array([1, 2], pa.int64()), "g": pa.nulls(2)})
    pq.write_table(table, path)
    text = "RETURN COUNT(*) PATTERN SEQ(A, B) GROUPBY g WITHIN 10 s"
    got = trend_aggregate(spark.read.parquet(str(path)), text, num_tasks=2)["q1"].toArrow()
    assert got.schema.field("g").type == pa.string()
    assert got.to_pylist() == [{"g": None, "window_start": 0, "window_end": 10, "count": 1}]


def test_shard_labels_hash_to_their_tasks(spark):
    """placement.py computes Spark's hash partitioning itself: every label lands on its task."""
    from pyspark.sql import functions as F

    from gpu_hamlet.spark.placement import partition_of, shard_labels

    rng = np.random.default_rng(0)
    for tasks in (1, 3, 7):
        want = rng.integers(0, tasks, 200).tolist()
        labels = shard_labels(want, tasks)
        assert len(set(labels)) == len(labels)
        df = spark.createDataFrame([(v, t) for v, t in zip(labels, want)], "v long, t long")
        got = df.repartition(tasks, "v").select("t", F.spark_partition_id().alias("p")).collect()
        assert all(r.t == r.p for r in got)
    edge = np.asarray([0, -1, 2**63 - 1, -(2**63), 2**40 + 7], np.int64)
    rows = (
        spark.createDataFrame([(int(v),) for v in edge], "v long")
        .select(F.pmod(F.hash("v"), F.lit(5)).alias("p"))
        .collect()
    )
    assert partition_of(edge, 5).tolist() == [r.p for r in rows]


def test_null_group_values_are_a_group(spark, stream):
    g = stream.column("g").to_numpy(zero_copy_only=False).astype(object)
    g[::7] = None
    events = stream.set_column(stream.column_names.index("g"), "g", pa.array(g.tolist()))
    text = "RETURN g, COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) GROUPBY g WITHIN 30 s"
    df = spark.createDataFrame(events)  # from Arrow: pandas would turn g into floats
    local = gpu_hamlet.aggregate(events, text)
    assert None in local["q1"].column("g").to_pylist()
    _assert_same(trend_aggregate(df, text, num_tasks=2), local)


@pytest.fixture
def new_york(spark, monkeypatch):
    """The driver's process and the Spark session in America/New_York, both restored after.
    PySpark turns timestamps into Python rows and back in this process, by its C library's zone,
    which TZ and time.tzset() change at once (a subprocess would cost a JVM of its own); the
    JVM's default zone plays no part: Spark SQL uses the session's zone, a runtime setting of
    the shared session, which also gives the tasks' Arrow timestamps their zone."""
    import time

    before = spark.conf.get("spark.sql.session.timeZone")
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        yield spark
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
        monkeypatch.undo()
        time.tzset()


def test_timestamp_keys_in_a_daylight_saving_fold(spark, new_york):
    """GROUPBY and [equivalence] on a timestamp column holding the two instants of a fall-back
    hour, 01:30 EDT and 01:30 EST, with the driver in that zone. The plan's keys went through
    Python rows, whose naive local datetimes PySpark reads back with mktime (blind to `fold`):
    both became the first, whose events ran twice while the other's vanished. The pane summaries
    of a cut group keyed partitions by aware datetimes, equal when they differ in `fold` alone."""
    import datetime as dt

    e1 = int(dt.datetime(2021, 11, 7, 5, 30, tzinfo=dt.UTC).timestamp()) * 10**6
    e2 = e1 + 3600 * 10**6
    assert dt.datetime.fromtimestamp(e2 // 10**6).fold == 1  # the driver is in the zone
    g = pa.array([e1, e1, e1, e1, e2, e2, e2, e1, e2, e1], pa.int64())
    events = pa.table(
        {
            "time": pa.array([1, 2, 3, 4, 5, 6, 7, 12, 13, 14], pa.int64()),
            "type": ["A", "B", "B", "C", "A", "B", "C", "A", "B", "C"],
            "g": g.cast(pa.timestamp("us", "UTC")),
        }
    )
    df = spark.createDataFrame(events)
    for text in (
        "RETURN g, COUNT(*) PATTERN SEQ(A, B+, C) GROUPBY g WITHIN 10 s",
        "RETURN COUNT(*), COUNT(B) PATTERN SEQ(A, B+, C) WHERE [g] WITHIN 10 s",  # cut: 3 tasks
    ):
        local = gpu_hamlet.aggregate(events, text, backend="cpu")
        for tasks in (1, 3):
            _assert_same(trend_aggregate(df, text, backend="cpu", num_tasks=tasks), local)


def test_result_columns_are_packed_into_typed_slots():
    """Every query's columns get distinct slots of their own type, and the intermediate table is
    as wide as the most columns of each type any one query has, not the sum over queries."""
    f64, i64, dec = pa.float64(), pa.int64(), pa.decimal128(38, 2)
    schemas = (
        pa.schema([("g", i64), ("a", f64), ("b", f64)]),
        pa.schema([("x", dec), ("y", f64)]),
        pa.schema([("g", i64), ("h", i64), ("c", f64), ("d", dec), ("e", dec)]),
    )
    types, slots = packed_columns(schemas)
    assert sorted(map(str, types)) == sorted(map(str, [i64, i64, f64, f64, dec, dec]))
    for schema, mine in zip(schemas, slots):
        assert len(set(mine)) == len(mine)
        assert [types[s] for s in mine] == [f.type for f in schema]


@pytest.mark.parametrize("middle", ["SEQ(P, T)+", "P, T"])
def test_shared_stages_through_spark_equal_sharing_nothing(spark, middle):
    """GLORIA's shared stages run in the Spark tasks too: 20 queries around SEQ(P, T)+ (a
    Kleene cycle) or P, T (SEQ transitions) over long runs share them (the tasks' stats say
    so), with the results of sharing='none' in process."""
    text = ";\n".join(
        f"q{i}: RETURN COUNT(*), SUM(T.x) PATTERN SEQ({'AD'[i % 2]}, {middle}) GROUPBY g "
        f"WITHIN {1000 + 500 * (i // 2)} s SLIDE 500 s"
        for i in range(20)  # (windows of 10 lengths: equal queries would run once)
    )
    types = (["A", "D"] + ["P", "T"] * 100 + ["C"]) * 500  # long enough runs to pay per task
    events = pa.table(
        {
            "time": pa.array(range(len(types)), pa.int64()),
            "type": types,
            "g": [("u", "v")[(i // 203) % 2] for i in range(len(types))],
            "x": pa.array([i % 7 for i in range(len(types))], pa.int64()),
        }
    )
    expected = gpu_hamlet.aggregate(events, text, sharing="none", numeric="bigint")
    stats = gpu_hamlet.RunStats()
    got = trend_aggregate(
        spark.createDataFrame(events.to_pandas()),
        text,
        backend="cpu",
        numeric="bigint",
        num_tasks=2,
        stats=stats,
    )
    # GLORIA's stages are named as written (a chain of them by its pools' keys).
    stages = [s for s in stats.sets if s.stage]
    shared, runs = sum(s.shared for s in stages), sum(s.bursts for s in stages)
    # (Panes cut some runs short, and a short piece does not pay for its queries' block rows,
    # one a window holding its pane: up to 11 here.)
    assert runs >= 500 and shared >= 0.75 * runs
    _assert_same(got, expected)


def test_a_type_column_named_as_the_jobs_shard_label(spark):
    """A type column named `__shard`, the label the job gives each row's group or slice: the
    worker found the type column by name and took the label (ArrowInvalid in every task)."""
    events = pa.table({"time": [1, 2, 3, 4, 11, 12, 13], "__shard": list("ABBCABC")})
    text = "RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 10 s SLIDE 5 s"
    local = gpu_hamlet.aggregate(events, text, backend="cpu", type_col="__shard")
    assert local["q1"].num_rows
    for tasks in (1, 2):
        got = trend_aggregate(
            spark.createDataFrame(events), text, num_tasks=tasks, type_col="__shard"
        )
        _assert_same(got, local)


def test_column_names_spark_would_parse_or_confuse(spark):
    """Column names are the events' own, whatever Spark makes of them: dots and backticks
    (which Spark reads as a path: an AnalysisException, mapInArrow's own column references
    included), names that differ in case alone (one name to Spark's case-insensitive
    resolution: ambiguous), and names of the job's own columns (`__n`, `__t0`, `__shard`:
    ambiguous after its joins). Each query, through cut groups, NEXT passes and an AND, gives
    aggregate's table."""
    rng = np.random.default_rng(3)
    n = 400
    events = pa.table(
        {
            "t.s": np.sort(rng.integers(0, 200, n)),
            "ty`pe": rng.choice(["A", "b.c", "C"], n),
            "x.y": rng.integers(0, 5, n),
            "p`q": rng.integers(0, 5, n),
            "x": rng.integers(0, 3, n),
            "X": rng.integers(0, 3, n),
            "__n": rng.integers(0, 2, n),
            "__t0": rng.integers(0, 2, n),
            "__shard": rng.integers(0, 2, n),
            "g.h": rng.choice(["u", "v"], n, p=[0.9, 0.1]),
        }
    )
    text = (
        "a: RETURN `g.h`, COUNT(*), SUM(`b.c`.`x.y`), MAX(`b.c`.`p``q`), SUM(`b.c`.x) AS sx, "
        "SUM(`b.c`.X) AS `sX` PATTERN SEQ(A, `b.c`+, C) WHERE [`__n`] GROUPBY `g.h` "
        "WITHIN 20 s SLIDE 10 s;"
        "b: RETURN COUNT(*), MIN(`b.c`.`__t0`) PATTERN SEQ(A, `b.c`+) GROUPBY `__shard` "
        "WITHIN 10 s;"
        "c: RETURN COUNT(*) PATTERN `b.c`+ WHERE `b.c`.x <= NEXT(`b.c`).X GROUPBY `g.h` "
        "WITHIN 10 s;"
        "d: RETURN COUNT(*), COUNT(`b.c`) AS `Count` PATTERN SEQ(A, `b.c`+) WHERE [`__t0`] "
        "WITHIN 10 s;"
        "e: RETURN COUNT(*) PATTERN SEQ(A, `b.c`) AND `b.c`+ WITHIN 10 s"
    )
    options = dict(time_col="t.s", type_col="ty`pe")
    local = gpu_hamlet.aggregate(events, text, backend="cpu", **options)
    assert all(local[q].num_rows for q in "abcde")
    df = spark.createDataFrame(events)
    for tasks in (1, 3):
        _assert_same(trend_aggregate(df, text, num_tasks=tasks, **options), local)

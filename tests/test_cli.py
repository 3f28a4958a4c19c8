"""The command line: run (round trip through Parquet), explain, demo, and errors."""

from __future__ import annotations

import json
import logging
import math
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import gpu_hamlet
from gpu_hamlet import cli
from gpu_hamlet.cli import cli_advice, error_message, main
from gpu_hamlet.cli_io import MARKER, input_format, read_events
from gpu_hamlet.datagen import load_hamlet_stream

PAPER = Path(__file__).parent / "data" / "Paper_TestStream.txt"
WORKLOAD = (
    "q1: RETURN COUNT(*), COUNT(T2) PATTERN SEQ(T1, T2+) WITHIN 100 s;\n"
    "q2: RETURN COUNT(*) PATTERN SEQ(T3, T2+) WITHIN 10 s SLIDE 5 s\n"
)


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    wl = tmp_path / "workload.txt"
    wl.write_text(WORKLOAD)
    events = tmp_path / "events.parquet"
    pq.write_table(load_hamlet_stream(PAPER), events)
    return wl, events


def test_run_round_trip(spark, tmp_path, capsys):
    """Parquet in, Spark job, Parquet out per query, read back equal to the in-process engine;
    a second run may replace that result with --mode overwrite (and print its --stats)."""
    wl, events = _inputs(tmp_path)
    out = tmp_path / "out"
    run = ["run", "--workload", str(wl), "--events", str(events), "--out", str(out)]
    run += ["--sharing", "static"]
    assert main(run) == 0
    printed = capsys.readouterr().out
    assert "read 14 events" in printed and "q1: 1 rows" in printed
    expected = gpu_hamlet.aggregate(pq.read_table(events), WORKLOAD, backend="cpu")
    for name in ("q1", "q2"):
        got = pq.read_table(out / name).sort_by("window_start")
        assert got.to_pylist() == expected[name].to_pylist()
    assert pq.read_table(out / "q1").column("count").to_pylist() == [132]
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "q1", "q2"]

    assert main(run + ["--mode", "overwrite", "--out-format", "json", "--stats", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "T2+ shared by q1, q2: 3 bursts (6 events), 3 shared, 0 not" in printed
    rows = [
        json.loads(line) for f in (out / "q1").glob("*.json") for line in f.read_text().splitlines()
    ]
    assert [r["count"] for r in rows] == [132]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
    # the folder's permissions are those of any new folder (umask), not mkdtemp's private 0700
    umask = os.umask(0o022)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask


def test_overwrite_of_the_result_its_events_come_from(spark, tmp_path, capsys):
    """A run whose events are a result it replaces (--mode overwrite) counts them before it
    writes: it counted them after and failed (exit 2) on a folder it had just replaced."""
    events = tmp_path / "events.parquet"
    pq.write_table(
        pa.table({"time": [1, 2, 3, 4, 5, 6], "type": list("ABBABB"), "k": list("uuvvuv")}), events
    )
    first = tmp_path / "first.txt"
    first.write_text("e: RETURN k, COUNT(*) PATTERN SEQ(A, B+) GROUPBY k WITHIN 3 s SLIDE 1 s")
    out = tmp_path / "out"
    assert main(["run", "--workload", str(first), "--events", str(events), "--out", str(out)]) == 0
    again = tmp_path / "again.txt"
    again.write_text("f: RETURN COUNT(*) PATTERN SEQ(u, v) WITHIN 100 s")
    run = ["run", "--workload", str(again), "--events", str(out / "e"), "--out", str(out)]
    run += ["--time-col", "window_start", "--type-col", "k", "--mode", "overwrite"]
    capsys.readouterr()
    assert main(run) == 0, capsys.readouterr().err
    assert "read 3 events" in capsys.readouterr().out  # (the first result's rows)
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "f"]


def test_a_master_spark_cannot_start_on_is_a_usage_error(tmp_path, capsys, monkeypatch):
    """--master that Spark cannot start on is a usage error that names the option, Spark's
    reason where it gave one, and what to use (it was exit 1 with 'Py4JJavaError: An error
    occurred while calling None...'), for run and demo alike."""
    from pyspark.sql import SparkSession

    def refuse(self):
        raise RuntimeError(
            "An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
            ": org.apache.spark.SparkException: Could not connect to spark://nohost:7077\n\tat ..."
        )

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", refuse)
    wl, events = _inputs(tmp_path)
    run = ["run", "--workload", str(wl), "--events", str(events), "--out", str(tmp_path / "o")]
    for args in (run, ["demo", "--events", "100"]):
        assert main([*args, "--master", "spark://nohost:7077", "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "--master spark://nohost:7077: Spark could not start there (Could not " in err
        assert "use local[N] (N threads, N >= 1)" in err
    assert isinstance(cli._master_error(ValueError("x"), None), ValueError)  # (no --master given)


@pytest.mark.parametrize(
    "master",
    ["local[0]", "local[00]", "local[0,3]", "bogus://x", "local[2", "mesos://h:5050", "",
     "local[99999999999]", "local[2,2147483648]", "local-cluster[1, 2, 99999999999]"],
)  # fmt: skip
def test_a_master_spark_has_no_form_for_is_refused_before_spark_starts(
    tmp_path, capsys, monkeypatch, master
):
    """A master none of Spark's forms match (or local[0]) is refused with the forms to use
    before the JVM starts: Spark printed a Java trace (an unknown scheme) or its log of the
    failed context (local[0]) before the one-line error."""
    from pyspark.sql import SparkSession

    def started(self):
        raise AssertionError("Spark started")

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", started)
    wl, events = _inputs(tmp_path)
    run = ["run", "--workload", str(wl), "--events", str(events), "--out", str(tmp_path / "o")]
    for args in (run, ["demo", "--events", "100"]):
        assert main([*args, "--master", master, "--quiet"]) == 2
        err = capsys.readouterr().err
        assert f"argument --master: {master!r} is not a Spark master: use local[N]" in err


@pytest.mark.parametrize(
    "master",
    ["local", "local[1]", "local[*]", "local[4, 2]", "local[*,3]", "local-cluster[1, 2, 1024]",
     "spark://a:7077,b:7077", "yarn", "k8s://https://h:6443"],
)  # fmt: skip
def test_the_masters_spark_starts_on_pass_the_check(master):
    assert cli._master(master) == master


def test_master_under_spark_submit_and_an_empty_delimiter_are_usage_errors(
    tmp_path, capsys, monkeypatch
):
    """Under spark-submit (its gateway's port in the environment) --master went to the
    session's builder against spark-submit's own; --delimiter '' was read as a comma. Both
    are refused before Spark starts."""
    wl, events = _inputs(tmp_path)
    run = ["run", "--workload", str(wl), "--events", str(events), "--out", str(tmp_path / "o")]
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    assert main([*run, "--master", "local[2]"]) == 2
    assert "--master is spark-submit's own option here" in capsys.readouterr().err
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT")
    csv = tmp_path / "e.csv"
    csv.write_text("time,type\n1,A\n")
    assert main([*run[:4], str(csv), *run[5:], "--delimiter", ""]) == 2
    assert "--delimiter must be a character" in capsys.readouterr().err


def test_run_writes_each_query_sorted_across_its_part_files(spark, tmp_path, capsys):
    """Read in the order of their names, a query's part files hold its rows as `aggregate`
    returns them: by GROUPBY values (nulls last), then window_start. The engine's tasks each
    wrote their own groups before."""
    rng = np.random.default_rng(5)
    n = 3_000
    groups = rng.choice(np.array(["b", "a", "c d", None, "e"], dtype=object), n).tolist()
    events = pa.table(
        {
            "time": np.sort(rng.integers(0, 600, n)),
            "type": rng.choice(["A", "B", "C"], n).tolist(),
            "g": groups,
            "k": rng.integers(-3, 3, n),
        }
    )
    path = tmp_path / "e.parquet"
    pq.write_table(events, path)
    text = (
        "q1: RETURN g, k, COUNT(*) PATTERN SEQ(A, B+, C) GROUPBY g, k WITHIN 1 min SLIDE 30 s;"
        "q2: RETURN COUNT(*) PATTERN SEQ(A, C) WITHIN 20 s"
    )
    wl = tmp_path / "w.txt"
    wl.write_text(text)
    out = tmp_path / "out"
    argv = ["run", "--workload", str(wl), "--events", str(path), "--out", str(out)]
    coalesce = "spark.sql.adaptive.coalescePartitions.enabled"  # (else one file: rows are few)
    spark.conf.set(coalesce, "false")
    try:
        assert main([*argv, "--numeric", "float", "--quiet"]) == 0
    finally:
        spark.conf.unset(coalesce)
    expected = gpu_hamlet.aggregate(events, text, backend="cpu", numeric="float")
    for name in ("q1", "q2"):
        parts = sorted((out / name).glob("part-*.parquet"))
        assert len(parts) > 1
        got = pa.concat_tables([pq.read_table(p) for p in parts])
        assert got.to_pylist() == expected[name].to_pylist()


def test_explain_with_events_prints_sharing_decisions(spark, tmp_path, capsys):
    wl, events = _inputs(tmp_path)
    assert (
        main(["explain", "--workload", str(wl), "--events", str(events), "--sharing", "static"])
        == 0
    )
    out = capsys.readouterr().out
    # (in the numeric mode of `run` and `aggregate`: its costs of sharing differ from float's)
    assert "sharing decisions over 14 events (in-process, sharing=static, numeric=exact)" in out
    assert "GLORIA plan (gloria search over" in out and "statistics: 14 events" in out
    # q2 slides by 5 s: the set's pane is 5 s, which cuts the first burst in two.
    assert "T2+ shared by q1, q2: 3 bursts (6 events), 3 shared, 0 not" in out
    argv = ["explain", "--workload", str(wl), "--events", str(events), "--numeric", "float"]
    assert main([*argv, "--sharing", "static"]) == 0
    out = capsys.readouterr().out
    assert "(in-process, sharing=static, numeric=float)" in out


def test_explain_over_float_times_shows_the_sets_the_engine_builds(spark, tmp_path, capsys):
    """Over float times only queries of one pane share: explain printed the set of q1 (pane
    100 s) and q2 (pane 5 s), then its own run's stats said nothing was analysed."""
    wl, events = _inputs(tmp_path)
    table = pq.read_table(events)
    at = table.column_names.index("time")
    seconds = pc.cast(table.column("time"), pa.int64()).cast(pa.float64())
    pq.write_table(table.set_column(at, "time", seconds), events)
    argv = ["explain", "--workload", str(wl), "--events", str(events), "--sharing", "static"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "sharable set T2+" not in out and "sharing: nothing analysed in this call" in out
    assert "(float times: a Q-set of queries of several panes runs as one per pane)" in out


def test_failed_run_leaves_no_output(spark, tmp_path, capsys):
    """A task's error (NaN in a summed column) ends the run with one line and no output."""
    wl, events = _inputs(tmp_path)
    table = pq.read_table(events)
    nan = pa.array([float("nan")] * table.num_rows)
    pq.write_table(table.append_column("v", nan), events)
    wl.write_text("RETURN SUM(T2.v) PATTERN SEQ(T1, T2+) WITHIN 100 s")
    out = tmp_path / "out"
    assert main(["run", "--workload", str(wl), "--events", str(events), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "query q1" in err and "'v'" in err and "NaN" in err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_absent_type_warns_and_writes_an_empty_result(spark, tmp_path, capsys):
    wl, events = _inputs(tmp_path)
    wl.write_text("RETURN COUNT(*) PATTERN SEQ(T1, t2+) WITHIN 100 s")
    out = tmp_path / "out"
    assert main(["run", "--workload", str(wl), "--events", str(events), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "gpu-hamlet: warning: query q1: event type 't2' (did you mean 'T2'?)" in err
    assert pq.read_table(out / "q1").num_rows == 0


def test_syntax_error_names_file_line_and_column(tmp_path, capsys):
    wl, events = _inputs(tmp_path)
    wl.write_text("RETURN COUNT(*)\nPATERN SEQ(T1, T2+) WITHIN 100 s")
    assert main(["explain", "--workload", str(wl)]) == 2
    err = capsys.readouterr().err
    assert f"{wl}: query q1, line 2, column 1" in err and "PATERN" in err
    assert len(err.strip().splitlines()) == 1


def test_explain_shows_sets_template_and_pane(tmp_path, capsys):
    wl, _ = _inputs(tmp_path)
    assert main(["explain", "--workload", str(wl)]) == 0
    out = capsys.readouterr().out
    assert "window     : WITHIN 100 s\n" in out and "window     : WITHIN 10 s SLIDE 5 s" in out
    assert "workload pane: 5 s" in out and "pane 5 s)" in out
    assert "sharable set T2+: q1, q2" in out
    assert "T2 -> T2" in out and "q1, q2" in out
    assert "statistics: uniform, no events given" in out
    assert "T2+" in out and "Q-sets of SEQ transitions and Kleene" in out


def test_explain_refuses_what_only_a_run_over_events_reads(tmp_path, capsys):
    """--backend, --sharing and the input options were ignored without --events (the output
    was plain `explain`'s, exit 0)."""
    wl, _ = _inputs(tmp_path)
    for flags, named in (
        (["--sharing", "none"], "--sharing applies"),
        (["--backend", "gpu"], "--backend applies"),
        (["--numeric", "float"], "--numeric applies"),
        (["--time-col", "t", "--columns", "a"], "--columns, --time-col apply"),
    ):
        assert main(["explain", "--workload", str(wl), *flags]) == 2
        assert f"{named} to explain's run over --events" in capsys.readouterr().err


def test_explain_prints_the_plan_of_each_search(tmp_path, capsys):
    wl = tmp_path / "w.txt"
    wl.write_text(
        ";".join(f"q{i}: RETURN COUNT(*) PATTERN SEQ(A, B, C{i}) WITHIN 1 min" for i in range(6))
        + "; r: RETURN COUNT(*) PATTERN A OR B WITHIN 1 min"
    )
    for search in ("gloria", "greedy", "noprune"):
        assert main(["explain", "--workload", str(wl), "--plan-search", search]) == 0
        out = capsys.readouterr().out
        assert f"GLORIA plan ({search} search" in out
        assert "start(A)                 q0, q1, q2, q3, q4, q5 share (snapshots of A" in out
        assert (
            "tran(A, B)               q0, q1, q2, q3, q4, q5 share (continuing from start(A))"
            in out
        )
        assert "r runs alone: not a SEQ of distinct types under Kleene plus" in out
    assert main(["explain", "--workload", str(wl), "--plan-search", "bell"]) == 2


def _explained(tmp_path, capsys, text: str) -> str:
    """What `gpu-hamlet explain` prints for a workload file holding `text`."""
    wl = tmp_path / "w.txt"
    wl.write_text(text)
    assert main(["explain", "--workload", str(wl)]) == 0
    return capsys.readouterr().out


def test_explain_says_which_queries_run_as_one(tmp_path, capsys):
    """Queries alike but for their names (however spelled) and RETURN run once, and explain
    says so; the sets and the plan are over the runs."""
    equal = (
        "a: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min;"
        "b: return count(*) pattern SEQ(A, B+) within 60 s;"
        "c: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 2 min"
    )
    out = _explained(tmp_path, capsys, equal)
    assert "Queries run as one: a, b\n" in out
    assert "sharable set B+: a, c" in out
    out = _explained(
        tmp_path, capsys, equal + "; d: RETURN COUNT(B) PATTERN SEQ(A, B+) WITHIN 1 min"
    )
    assert "Queries run as one: a, b, d\n" in out
    assert "sharable set B+: a[return], c" in out


def test_explain_quotes_names_that_need_it(tmp_path, capsys):
    """A name with a space or comma is shown in backticks, as the language writes it: bare,
    `a, b` and c read as three queries."""
    out = _explained(
        tmp_path,
        capsys,
        "`my q`: RETURN COUNT(*) AS `n, m`, SUM(`B b`.`x y`) PATTERN SEQ(`A a`, `B b`+) "
        "WHERE `B b`.`x y` < 3 GROUPBY `g h`, k WITHIN 30 s;"
        "`and q`: RETURN COUNT(*) PATTERN SEQ(`A a`, `B b`+) AND SEQ(C, D) GROUPBY `g h`, k "
        "WITHIN 30 s",
    )
    assert "`my q`: PATTERN SEQ(`A a`, `B b`+)\n" in out
    assert "aggregates : COUNT(*) AS `n, m`, SUM(`B b`.`x y`) AS `sum_B b_x y`\n" in out
    assert "partitions : `g h`, k  (GROUPBY `g h`, k)" in out
    assert "filters    : `B b`.`x y` < 3\n" in out
    assert "entered by `B b`, extends s0, s1 [end]" in out
    assert "sharable set `B b`+: `my q`, `and q`[left] (partition `g h`, k, pane 30 s)" in out
    assert "start(`A a`)             `and q`[left], `my q` share (snapshots of `A a`" in out
    assert "`and q`[both] runs alone" in out


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("type,time,x", ["type", "time", "x"]),
        (" type , time ", ["type", "time"]),
        ('type,"a, b",x', ["type", "a, b", "x"]),
        ('"say ""hi""", t', ['say "hi"', "t"]),
        ('" lead"', [" lead"]),
    ],
)
def test_columns_are_split_on_commas_outside_double_quotes(text, names):
    """--columns names a header holding a comma in double quotes, as a CSV header writes it
    (split on every comma, `"a, b"` was two names)."""
    assert cli.column_names(text) == names


@pytest.mark.parametrize(
    "text, why",
    [
        ("a,,b", "an empty column name"),
        ('a,"b', "unclosed quote"),
        ('"a"b', "expected ','"),
        ("", "an empty column name"),
        ("a,", "an empty column name"),
        ("time,type,time", "column 'time' named twice"),
    ],
)
def test_bad_columns_are_usage_errors(text, why, tmp_path, capsys):
    wl = tmp_path / "w.txt"
    wl.write_text("RETURN COUNT(*) PATTERN A WITHIN 1 s")
    argv = ["run", "--workload", str(wl), "--events", "e.csv", "--out", str(tmp_path / "o")]
    assert main([*argv, "--columns", text]) == 2
    err = capsys.readouterr().err
    assert "--columns" in err and why in err


def test_sessions_gpu_hamlet_starts_give_their_workers_one_malloc_arena(monkeypatch):
    """Spark's Python workers start with MALLOC_ARENA_MAX=1 (gpu_hamlet/engine/host_memory.py):
    the command line's session, the demo's and the spark-conf files set it."""
    SparkSession = pytest.importorskip("pyspark.sql").SparkSession  # (GPU machines have none)

    from gpu_hamlet.demo import DEMO_SPARK_CONF

    configured = {}

    class Builder:
        def __getattr__(self, name):
            return lambda *args, **kwargs: self

        def config(self, key, value):
            configured[key] = value
            return self

        def getOrCreate(self):
            raise RuntimeError("no session in this test")

    monkeypatch.setattr(SparkSession, "builder", Builder())
    with pytest.raises(RuntimeError, match="no session"):
        cli._spark(None, "test")  # (with a --master: a usage error naming it)
    assert configured["spark.executorEnv.MALLOC_ARENA_MAX"] == "1"
    assert DEMO_SPARK_CONF["spark.executorEnv.MALLOC_ARENA_MAX"] == "1"
    conf = Path(__file__).parent.parent / "spark-conf"
    for name in ("local.conf", "gpu-cluster.conf"):
        lines = (conf / name).read_text().splitlines()
        assert any(line.split() == ["spark.executorEnv.MALLOC_ARENA_MAX", "1"] for line in lines)


def test_explain_keeps_the_query_units(tmp_path, capsys):
    """Durations as the query wrote them, not raw milliseconds (nor converted: 60 min stays)."""
    wl = tmp_path / "w.txt"
    wl.write_text("RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 60 min SLIDE 90 s")
    assert main(["explain", "--workload", str(wl)]) == 0
    out = capsys.readouterr().out
    assert "window     : WITHIN 60 min SLIDE 90 s\n" in out and "90000" not in out
    assert "workload pane: 90 s" in out


def test_explain_shows_the_sets_an_and_shares_through_its_counts(tmp_path, capsys):
    """The engine runs an AND as its counts, and `a[left]` shares T2+ with b: explain said
    'no shareable Kleene sub-pattern: every query runs alone'."""
    text = (
        "a: RETURN COUNT(*) PATTERN SEQ(T1, T2+) AND SEQ(T3, T4) WITHIN 100 s;\n"
        "b: RETURN COUNT(*) PATTERN SEQ(T1, T2+) WITHIN 100 s"
    )
    wl = tmp_path / "w.txt"
    wl.write_text(text)
    assert main(["explain", "--workload", str(wl)]) == 0
    assert "sharable set T2+: a[left], b (partition -, pane 100 s)" in capsys.readouterr().out
    events = pa.table({"time": [1, 2, 3, 4, 5], "type": ["T1", "T3", "T2", "T2", "T4"]})
    stats = gpu_hamlet.RunStats()
    gpu_hamlet.aggregate(events, text, sharing="static", backend="cpu", stats=stats)
    assert [(s.kleene_type, s.queries) for s in stats.sets] == [("T2", ("a[left]", "b"))]


@pytest.mark.spark
def test_spark_submit_entry_script(tmp_path):
    """The README's spark-submit line, with the local profile, writes every query's dataset."""
    import os
    import shutil
    import subprocess
    import sys

    import gpu_hamlet.spark.submit as submit

    wl, events = _inputs(tmp_path)
    out = tmp_path / "out"
    root = Path(__file__).resolve().parents[1]
    spark_submit = shutil.which(
        "spark-submit", path=str(Path(sys.executable).parent)
    ) or shutil.which("spark-submit")
    assert spark_submit, "spark-submit comes with the pyspark package"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    done = subprocess.run(
        [
            spark_submit,
            "--properties-file",
            str(root / "spark-conf" / "local.conf"),
            "--conf",
            "spark.master=local[2]",
            "--conf",
            "spark.ui.enabled=false",
            submit.__file__,
            "--workload",
            str(wl),
            "--events",
            str(events),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "q1: 1 rows" in done.stdout
    assert pq.read_table(out / "q1").column("count").to_pylist() == [132]


# --- output folders (Spark's save modes, never deleting what gpu-hamlet did not write) --------


def test_existing_folder_is_refused_and_left_as_it_was(tmp_path, capsys, monkeypatch):
    """Without --mode overwrite a non-empty folder is refused; with it, one without gpu-hamlet's
    marker, or holding anything else, is refused too. All before Spark starts."""
    monkeypatch.setattr(cli, "_spark", _no_spark)
    wl, events = _inputs(tmp_path)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    run = ["run", "--workload", str(wl), "--events", str(events), "--out", str(out)]
    assert main(run) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(run + ["--mode", "overwrite"]) == 2
    assert f"is not a gpu-hamlet result (no {MARKER} file)" in capsys.readouterr().err
    (out / MARKER).write_text(json.dumps({"queries": ["q1", "q2"], "files": {}}))
    assert main(run + ["--mode", "overwrite"]) == 2
    assert "holds 'thesis.tex', which gpu-hamlet did not write" in capsys.readouterr().err
    assert (out / "thesis.tex").read_text() == "years of work"


def test_overwrite_keeps_a_file_added_to_a_query_folder(spark, tmp_path, capsys):
    """--mode overwrite checked only the entries of the output folder against the marker: a
    file of the user's inside OUT/<query> was deleted with the result (a hunt). The marker
    lists each query's files; any other file there, or a marker listing none (an earlier
    gpu-hamlet's), stops the run."""
    wl, events = _inputs(tmp_path)
    out = tmp_path / "out"
    run = ["run", "--workload", str(wl), "--events", str(events), "--out", str(out), "--quiet"]
    assert main(run) == 0
    written = json.loads((out / MARKER).read_text())
    assert written["files"]["q1"] == sorted(p.name for p in (out / "q1").iterdir())
    (out / "q1" / "notes.txt").write_text("mine")
    assert main([*run, "--mode", "overwrite"]) == 2
    err = capsys.readouterr().err
    assert f"--out '{out}' holds 'q1/notes.txt', which gpu-hamlet did not write" in err
    assert (out / "q1" / "notes.txt").read_text() == "mine"
    (out / "q1" / "notes.txt").unlink()
    del written["files"]
    (out / MARKER).write_text(json.dumps(written))
    assert main([*run, "--mode", "overwrite"]) == 2
    assert "an earlier gpu-hamlet listed no files" in capsys.readouterr().err


def test_csv_flags_on_other_formats_are_usage_errors_before_spark(tmp_path, capsys, monkeypatch):
    """--columns and --delimiter read CSV files: given for Parquet events they were ignored
    without a word (a helper's hunt)."""
    monkeypatch.setattr(cli, "_spark", _no_spark)
    wl, events = _inputs(tmp_path)
    run = ["run", "--workload", str(wl), "--events", str(events), "--out", str(tmp_path / "o")]
    assert main([*run, "--delimiter", ";"]) == 2
    assert "--delimiter applies to CSV events; " in capsys.readouterr().err
    assert main([*run, "--columns", "time,type", "--delimiter", ";"]) == 2
    assert "--columns and --delimiter apply to CSV events" in capsys.readouterr().err


def test_unusable_output_folders_are_usage_errors_before_spark(tmp_path, capsys, monkeypatch):
    """A marker file gpu-hamlet did not write (no JSON, no list of queries), and an --out inside
    a file, are usage errors naming the folder, before Spark starts (not a JSONDecodeError, or a
    FileExistsError after the whole run)."""
    monkeypatch.setattr(cli, "_spark", _no_spark)
    wl, events = _inputs(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    run = ["run", "--workload", str(wl), "--events", str(events), "--mode", "overwrite"]
    for text in ("not json", "[1, 2]", '{"queries": "q1"}', "{}"):
        (out / MARKER).write_text(text)
        assert main(run + ["--out", str(out)]) == 2
        assert f"has a {MARKER} file that is not one gpu-hamlet wrote" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("x")
    assert main(run + ["--out", str(tmp_path / "notes.txt" / "out")]) == 2
    assert "notes.txt', which is a file, not a folder" in capsys.readouterr().err


def test_paths_are_read_as_written_not_as_globs(spark, tmp_path, capsys, monkeypatch):
    """A file named data[1].csv beside data1.csv: Spark expands globs, and read data1.csv's
    events without a word. Each path is read as written; a ':' in a name, which Spark's file
    system cannot read, is refused before Spark starts, naming the file."""
    folder = tmp_path / "in{a,b}"
    folder.mkdir()
    (folder / "data[1].csv").write_text("time,type\n1,T1\n2,T2\n3,T2\n")
    (folder / "data1.csv").write_text("time,type\n1,T3\n2,T2\n")
    wl = tmp_path / "w.txt"
    wl.write_text("q: RETURN COUNT(*) PATTERN SEQ(T1, T2+) WITHIN 10 s")
    out = tmp_path / "out"
    run = ["run", "--workload", str(wl), "--out-format", "csv", "--quiet", "--out", str(out)]
    assert main([*run, "--events", str(folder / "data[1].csv")]) == 0
    rows = [line for f in sorted((out / "q").glob("*.csv")) for line in f.read_text().splitlines()]
    assert rows[1:] == ["0,10,3"]  # (data1.csv holds no T1: no trend)
    monkeypatch.setattr(cli, "_spark", _no_spark)
    (folder / "at 10:00.csv").write_text("time,type\n1,T1\n")
    for events in (folder, folder / "at 10:00.csv"):
        assert main([*run, "--events", str(events), "--out", str(tmp_path / "o2")]) == 2
        err = capsys.readouterr().err
        assert f"events path '{folder / 'at 10:00.csv'}' has a ':' in it" in err
    pq.write_table(pa.table({"time": [1], "type": ["T1"]}), tmp_path / "p.parquet")
    assert main([*run, "--events", str(tmp_path / "p.parquet"), "--in-format", "csv"]) == 2
    assert "p.parquet' is a Parquet file: give --in-format parquet" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "_SUCCESS").write_text("")
    assert main([*run, "--events", str(tmp_path / "empty"), "--in-format", "csv"]) == 2
    assert "events folder" in (err := capsys.readouterr().err) and "holds no data files" in err


def test_an_output_folder_behind_a_link_is_written_there(spark, tmp_path, capsys):
    """--out a link to a folder, empty or a previous result (--mode overwrite): the folder gets
    the result and the link stays. The link was renamed over, which failed after the whole run
    and left a set-aside folder behind."""
    wl, events = _inputs(tmp_path)
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    run = ["run", "--workload", str(wl), "--events", str(events), "--quiet", "--out", str(link)]
    assert main(run) == 0
    assert main([*run, "--mode", "overwrite"]) == 0
    assert link.is_symlink() and sorted(p.name for p in target.iterdir()) == [MARKER, "q1", "q2"]
    assert pq.read_table(target / "q1").column("count").to_pylist() == [132]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.parquet", "link", "target",
                                                          "workload.txt"]  # fmt: skip


def _results(tmp_path: Path, wl: Path, events: Path, fmt: str) -> list[Path]:
    """`gpu-hamlet run` of workload file `wl` over `events` into tmp_path/fmt: query q1's part
    files."""
    out = tmp_path / fmt
    run = ["run", "--workload", str(wl), "--events", str(events), "--out", str(out)]
    assert main(run + ["--out-format", fmt, "--quiet"]) == 0
    return sorted((out / "q1").glob(f"part-*.{fmt}"))


def test_csv_and_json_results_keep_spaces_and_microseconds(spark, tmp_path, capsys):
    """CSV keeps a value's leading and trailing spaces (Spark's writer strips them by default)
    and both text formats write timestamps to the microsecond (Spark's default: milliseconds),
    so that two groups apart by microseconds stay two."""
    wl = tmp_path / "w.txt"
    wl.write_text("RETURN COUNT(*) PATTERN SEQ(A, B) GROUPBY g, at WITHIN 10 s")
    events = tmp_path / "e.parquet"
    at = [123_456, 123_456, 123_999, 123_999]
    table = pa.table(
        {
            "type": ["A", "B", "A", "B"],
            "time": pa.array([1, 2, 3, 4], pa.int64()),
            "g": [" x ", " x ", "x", "x"],
            "at": pa.array(at, pa.timestamp("us", tz="UTC")),
        }
    )
    pq.write_table(table, events)
    for fmt in ("csv", "json"):
        files = _results(tmp_path, wl, events, fmt)
        if fmt == "csv":
            rows = pa.concat_tables(pacsv.read_csv(f) for f in files).to_pylist()
        else:
            rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
        got = sorted((r["g"], str(r["at"])) for r in rows)
        assert [g for g, _ in got] == [" x ", "x"]
        assert [t[19:26] for _, t in got] == [".123456", ".123999"]


def test_json_results_hold_nulls_and_parquet_results_utc_microseconds(spark, tmp_path):
    """JSON results write a null as null (Spark's default left the field out) and a NaN as the
    string "NaN" (JSON numbers hold none; README, Output), and Parquet results hold timestamps as
    microseconds in UTC, which pyarrow reads back with their unit and zone (Spark's default
    INT96 came back as timestamp[ns] without one)."""
    wl = tmp_path / "w.txt"
    wl.write_text("RETURN COUNT(*), SUM(B.x), MAX(B.y) PATTERN SEQ(A, B) GROUPBY g WITHIN 10 s")
    events = tmp_path / "e.parquet"
    table = pa.table(
        {
            "type": ["A", "B"],
            "time": pa.array([1_000_000, 2_000_000], pa.timestamp("us", tz="UTC")),
            "g": pa.array([None, None], pa.string()),
            "x": pa.array([None, None], pa.int64()),
            "y": [0.0, float("nan")],
        }
    )
    pq.write_table(table, events)
    for fmt in ("json", "parquet"):
        files = _results(tmp_path, wl, events, fmt)
        if fmt == "json":
            rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
            assert rows == [
                {
                    "g": None,
                    "window_start": "1970-01-01T00:00:00.000000Z",
                    "window_end": "1970-01-01T00:00:10.000000Z",
                    "count": 1,
                    "sum_B_x": None,
                    "max_B_y": "NaN",
                }
            ]
        else:
            got = pa.concat_tables(pq.read_table(f) for f in files)
            assert math.isnan(got.column("max_B_y")[0].as_py())
            assert got.schema.field("window_start").type == pa.timestamp("us", tz="UTC")
            assert got.column("window_end").to_pylist()[0].timestamp() == 10


def test_csv_results_quote_as_csv_readers_expect(spark, tmp_path):
    """Quotes inside CSV values are doubled (RFC 4180), not backslash-escaped: other readers
    (pyarrow, pandas, Python's csv) read every value back, and rows do not run together."""
    wl = tmp_path / "w.txt"
    wl.write_text("RETURN COUNT(*) PATTERN SEQ(A, B) GROUPBY g WITHIN 10 s")
    events = tmp_path / "e.parquet"
    values = ['say "hi"', '"', 'a\\"b', "x,y"]
    table = pa.table(
        {
            "type": ["A", "B"] * len(values),
            "time": pa.array(range(2 * len(values)), pa.int64()),
            "g": [v for v in values for _ in "AB"],
        }
    )
    pq.write_table(table, events)
    out = tmp_path / "out"
    run = ["run", "--workload", str(wl), "--events", str(events), "--out", str(out)]
    assert main(run + ["--out-format", "csv", "--quiet"]) == 0
    files = sorted((out / "q1").glob("part-*.csv"))
    got = pa.concat_tables(pacsv.read_csv(f) for f in files)
    assert sorted(got.column("g").to_pylist()) == sorted(values)


def _no_spark(*args, **kwargs):
    raise AssertionError("Spark must not start")


# --- input files as they come ----------------------------------------------------------------


def test_headerless_csv_with_formatted_times_and_csv_output(spark, tmp_path, capsys):
    """NASDAQ ticks as in ../shared/data: no header, the ticker is the type, times yyyyMMddHHmm;
    results equal the in-process engine on the same events, written as CSV with a header."""
    lines, rows = [], []
    for minute in range(12):
        for ticker, volume in (("AAPL", 100 + minute), ("GOOG", 500 + minute)):
            stamp = f"2008020109{minute:02d}"
            lines.append(f"{ticker},{stamp},1.5,1.5,1.5,1.5,{volume}")
            rows.append((ticker, minute, volume))
    ticks = tmp_path / "NASDAQ_TEST.txt"
    ticks.write_text("\n".join(lines) + "\n")
    workload = "ticks: RETURN COUNT(*), MAX(GOOG.volume) PATTERN SEQ(AAPL, GOOG+) WITHIN 5 min"
    wl = tmp_path / "nasdaq.hamlet"
    wl.write_text(workload)
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                "--workload",
                str(wl),
                "--events",
                str(ticks),
                "--out",
                str(out),
                "--columns",
                "type,time,open,peak,low,close,volume",
                "--time-format",
                "yyyyMMddHHmm",
                "--out-format",
                "csv",
                "--quiet",
            ]
        )
        == 0
    )
    got = pa.concat_tables(
        pacsv.read_csv(f) for f in (out / "ticks").glob("*.csv") if f.stat().st_size
    ).sort_by("window_start")
    assert got.column_names == ["window_start", "window_end", "count", "max_GOOG_volume"]
    t0 = datetime(2008, 2, 1, 9, tzinfo=UTC)  # the tests' Spark session is in UTC
    events = pa.table(
        {
            "type": [r[0] for r in rows],
            "time": pa.array(
                [t0 + timedelta(minutes=r[1]) for r in rows], pa.timestamp("us", tz="UTC")
            ),
            "volume": [r[2] for r in rows],
        }
    )
    expected = gpu_hamlet.aggregate(events, workload, backend="cpu")["ticks"]
    assert [int(c) for c in got.column("count").to_pylist()] == [
        int(c) for c in expected.column("count").to_pylist()
    ]
    assert (
        got.column("max_GOOG_volume").to_pylist() == expected.column("max_GOOG_volume").to_pylist()
    )
    assert str(got.column("window_start")[0].as_py()).startswith("2008-02-01 09:00:00")


def test_ragged_rows_any_delimiter_and_date_times(spark, tmp_path):
    """Sensor readings as in ../shared/data: 5 or 6 fields a row (the first row has 5),
    MM/dd/yyyy times; here with ';' between fields."""
    path = tmp_path / "Sensors_test.dat"
    path.write_text(
        "PressTemp;06/18/2021 17:31:31;0.002;25.945;956.865\n"
        "Magnetometer;06/18/2021 17:31:32;0.003;-41.85;83.127;5.25\n"
    )
    df = read_events(
        spark,
        str(path),
        input_format(str(path), None),
        delimiter=";",
        columns=["type", "time", "amplitude", "x", "y", "z"],
        time_format="MM/dd/yyyy HH:mm:ss",
    )
    assert dict(df.dtypes) == {
        "type": "string",
        "time": "timestamp",
        "amplitude": "double",
        "x": "double",
        "y": "double",
        "z": "double",
    }
    rows = [r.asDict() for r in df.collect()]
    assert rows[0]["z"] is None and rows[1]["z"] == 5.25
    assert str(rows[1]["time"]) == "2021-06-18 17:31:32"


def test_csv_files_of_a_folder_have_one_header(spark, tmp_path, capsys):
    """Spark reads every CSV file of a folder by position with one file's header: a file of the
    columns in another order, or of one more, gave silently wrong results (SUM(B.x) added y),
    and a name given twice was renamed (x2, x3). Each stops the run naming the files (a hunt)."""
    wl = tmp_path / "w.hamlet"
    wl.write_text("q: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s")
    events = tmp_path / "events"
    events.mkdir()
    (events / "a.csv").write_text("time,type,x,y\n1,A,1,100\n2,B,2,200\n3,B,3,300\n")
    (events / "b.csv").write_text("\ufefftime,type,x,y\n\n4,B,4,400\n5,C,5,500\n")  # (a BOM)
    df = read_events(spark, str(events), "csv")
    assert sorted(r["x"] for r in df.collect()) == [1, 2, 3, 4, 5]
    run = ["run", "--workload", str(wl), "--events", str(events), "--quiet"]
    for header, difference in (
        ("time,type,y,x", "the same names in another order: column 3 is 'x' in the first, "
         "'y' in the second"),
        ("time,type,x,y,z", "the second has 'z'"),
        ("time,type,x", "the second lacks 'y'"),
    ):  # fmt: skip
        row = ",".join(["4", "B", "4", "400", "0"][: header.count(",") + 1])
        (events / "b.csv").write_text(f"{header}\n{row}\n")
        assert main([*run, "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert (
            f"{events}: the CSV files' header lines differ: {events / 'a.csv'} has 'time', "
            f"'type', 'x', 'y', {events / 'b.csv'} has " in err
        )
        assert f"({difference}); Spark reads every file by position" in err
    assert not (tmp_path / "out").exists()
    (events / "b.csv").write_text("time,type,x,x\n4,B,4,400\n")
    assert main([*run, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{events / 'b.csv'}: its header line names 'x' twice: rename one of them" in err


def test_csv_text_that_spark_casts_stays_text(spark, tmp_path):
    """Spark's casts read more than numbers and date-times as written: Java's `1d` and `2f`,
    `nan` and `Infinity` as doubles, `2021-01` and a date alone as timestamps. Such columns
    were changed silently, and IDs 1d, 1f and 1.0 made one GROUPBY group (a hunt): they are
    text. Integers are numbers: `007` is 7, as the README says."""
    path = tmp_path / "events.csv"
    path.write_text(
        "time,type,suffix,nan,inf,month,date,us7,number,zeros,at\n"
        "1,A,1d,nan,Infinity,2021-01,2021-01-05,2021-01-05T10:00:00.1234567,1e5,007,"
        "2021-01-05T10:00:00.123456Z\n"
        "2,B,2f,1,1,2021-02,2021-01-06,2021-01-05T10:00:00,-.5,7,2021-01-05 11:00:00+01:00\n"
    )
    df = read_events(spark, str(path), "csv")
    text = ("suffix", "nan", "inf", "month", "date", "us7")
    assert dict(df.dtypes) == {
        "time": "bigint",
        "type": "string",
        **dict.fromkeys(text, "string"),
        "number": "double",
        "zeros": "bigint",
        "at": "timestamp",
    }
    rows = df.collect()
    assert [[r[c] for c in text] for r in rows][0] == [
        "1d", "nan", "Infinity", "2021-01", "2021-01-05", "2021-01-05T10:00:00.1234567"
    ]  # fmt: skip
    assert [(r["number"], r["zeros"], str(r["at"])) for r in rows] == [
        (1e5, 7, "2021-01-05 10:00:00.123456"),
        (-0.5, 7, "2021-01-05 10:00:00"),
    ]
    path.write_text("time,type,id\n1,A,1d\n2,B,1d\n3,A,1f\n4,B,1f\n5,A,1.0\n6,B,1.0\n")
    wl = tmp_path / "w.hamlet"
    wl.write_text("g: RETURN id, COUNT(*) PATTERN SEQ(A, B) GROUPBY id WITHIN 10 s")
    out = tmp_path / "out"
    run = ["run", "--workload", str(wl), "--events", str(path), "--out", str(out), "--quiet"]
    assert main(run) == 0
    got = pq.read_table(out / "g").to_pylist()
    assert sorted((r["id"], r["count"]) for r in got) == [("1.0", 1), ("1d", 1), ("1f", 1)]


def test_csv_quoted_fields_over_lines_are_read(spark, tmp_path, capsys):
    """`run` writes a value holding a newline as a quoted field over two lines, and Spark's
    reader (multiLine off) cut it into two rows: 'world"' made the time column text (a hunt).
    Such files are read with multiLine, which counts rows, not lines, in errors."""
    path = tmp_path / "events.csv"
    path.write_text('time,type,note\n1,A,"hello\nworld"\n2,B,"say ""hi"""\n3,B,x\n')
    df = read_events(spark, str(path), "csv")
    assert dict(df.dtypes) == {"time": "bigint", "type": "string", "note": "string"}
    assert [r["note"] for r in df.collect()] == ["hello\nworld", 'say "hi"', "x"]
    path.write_text('time,type,note\n1,A,"hello\nworld"\n2,,x\n')
    wl, _ = _inputs(tmp_path)
    run = ["run", "--workload", str(wl), "--events", str(path), "--out", str(tmp_path / "o")]
    assert main([*run, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: type column 'type' has 1 null value(s), the first in row 2 " in err


def test_time_format_reads_csv_text_that_spark_could_cast(spark, tmp_path):
    """With --time-format, a CSV time column is parsed by that pattern, as text: times Spark's
    own cast reads were made timestamps first, and the run stopped ('already timestamp: drop
    --time-format', where dropping it reads 2024-03-04 as March 4 whatever the pattern), and
    digits became bigints, losing their leading zeros (01022024 no longer matched MMddyyyy)."""
    path = tmp_path / "events.csv"
    for text, pattern, time in (
        ("2024-04-03 10:00:00", "yyyy-dd-MM HH:mm:ss", "2024-03-04 10:00:00"),
        ("01022024", "MMddyyyy", "2024-01-02 00:00:00"),
    ):
        path.write_text(f"type,time\nA,{text}\n")
        df = read_events(spark, str(path), "csv", time_format=pattern)
        assert dict(df.dtypes)["time"] == "timestamp"
        assert str(df.first()["time"]) == time


def test_csv_event_types_like_times_stay_text(spark, tmp_path, capsys):
    """Spark casts 'T3' (a time of day) to a timestamp of today: a CSV type column of T1, T2, T3
    was read as timestamps, and explain failed with 'ArrowTypeError: ...', exit status 1."""
    wl, _ = _inputs(tmp_path)
    path = tmp_path / "events.csv"
    path.write_text("time,type,at\n1,T1,12:30\n2,T2,2024-03-04 10:00:00\n3,T2,12:30\n")
    df = read_events(spark, str(path), "csv")
    assert dict(df.dtypes) == {"time": "bigint", "type": "string", "at": "string"}
    path.write_text("time,type\n1,T1\n2,T2\n3,T2\n")
    assert main(["explain", "--workload", str(wl), "--events", str(path), "--quiet"]) == 0
    assert "sharing decisions over 3 events" in capsys.readouterr().out
    tsv = tmp_path / "events.tsv"  # (tab-separated without --delimiter: they were read by ',')
    tsv.write_text("time\ttype\n1\tT1\n2\tT2\n3\tT2\n")
    assert main(["explain", "--workload", str(wl), "--events", str(tsv), "--quiet"]) == 0
    assert "sharing decisions over 3 events" in capsys.readouterr().out


def test_explain_checks_the_events_before_planning_over_them(spark, tmp_path, capsys):
    """The plan's statistics read the type column: a missing or integer one was a pyarrow
    error (exit status 1) rather than the engine's line naming the column."""
    wl, _ = _inputs(tmp_path)
    path = tmp_path / "events.parquet"
    for table, message in (
        (pa.table({"time": [1, 2], "type": [1, 2]}), "type column 'type' must hold strings"),
        (pa.table({"time": [1, 2], "kind": ["T1", "T2"]}), "type column 'type' is missing"),
    ):
        pq.write_table(table, path)
        assert main(["explain", "--workload", str(wl), "--events", str(path), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1


def test_json_lines_with_a_time_unit(spark, tmp_path):
    """Numbers in a stated unit become timestamps, exactly (nanoseconds through integers)."""
    ns = 1_612_137_600_123_456_000
    path = tmp_path / "events.jsonl"
    path.write_text(f'{{"type": "A", "t": {ns}}}\n')
    df = read_events(spark, str(path), input_format(str(path), None), time_col="t", time_unit="ns")
    assert str(df.first()["t"]) == "2021-02-01 00:00:00.123456"
    df = read_events(spark, str(path), "json", time_col="t", time_unit="ms")
    assert dict(df.dtypes)["t"] == "timestamp"


def test_fractional_milliseconds_are_whole_microseconds(spark, tmp_path):
    """--time-unit ms or us over a double column (was Spark's DATATYPE_MISMATCH from
    timestamp_millis, a Java trace on stderr): exact to the microsecond, and a finer fraction
    stops the run naming the value."""
    path = tmp_path / "events.csv"
    path.write_text("type,t\nA,1.1\nB,1500.7\n")
    df = read_events(spark, str(path), "csv", time_col="t", time_unit="ms")
    assert [str(r["t"]) for r in df.collect()] == [
        "1970-01-01 00:00:00.001100",
        "1970-01-01 00:00:01.500700",
    ]
    df = read_events(spark, str(path), "csv", time_col="t", time_unit="us")
    with pytest.raises(Exception, match="value '1.1' has a fraction of a microsecond"):
        df.collect()


def test_csv_rows_of_more_fields_and_json_lines_that_are_no_object_stop_the_run(
    spark, tmp_path, capsys
):
    """Nothing is dropped silently: Spark's read cut a CSV row longer than the header (or than
    --columns), and gave a JSON line that is no object a null time. Each stops the run in one
    line naming the row (a helper's hunt). A shorter CSV row has nulls in its last fields (the
    sensors' rows of 5 or 6, test_ragged_rows_any_delimiter_and_date_times)."""
    wl, _ = _inputs(tmp_path)
    path = tmp_path / "events.csv"
    path.write_text("time,type, x\n1,T1,1\n2,T2,4,9\n")  # (names quoted: the space shows)
    assert main(["explain", "--workload", str(wl), "--events", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: 1 row(s) have more fields than the 3 columns ('time', 'type', ' x')" in err
    assert "'2', 'T2', '4', '9'" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    path.write_text("1,T1,1\n2,T2,4,9\n")  # (named by --columns: no header line)
    df = read_events(spark, str(path), "csv", columns=["time", "type", "x", "y"])
    assert [r["y"] for r in df.collect()] == [None, 9]
    path.write_text("time,type,x\n1,T1,1\n2,T2,abc\n3,T2,2.5\n")  # a column of numbers but one
    main(["explain", "--workload", str(wl), "--events", str(path)])
    assert (
        f"gpu-hamlet: {path}: column 'x' is read as text: 2 of its 3 values are numbers, the "
        f"others not, e.g. 'abc'" in capsys.readouterr().err
    )
    path = tmp_path / "events.jsonl"
    path.write_text('{"time": 1, "type": "T1"}\n{"time": 2, "type": "T2"\n')
    assert main(["explain", "--workload", str(wl), "--events", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f'{path}: a line is not a JSON object: \'{{"time": 2, "type": "T2"\'' in err
    path = tmp_path / "array.json"  # no line is an object: Spark refused to query the frame
    path.write_text('[\n  {"time": 1, "type": "T1"},\n  {"time": 2, "type": "T2"}\n]\n')
    assert main(["explain", "--workload", str(wl), "--events", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: a line is not a JSON object: '['" in err and "not a JSON array" in err
    assert len(err.strip().splitlines()) == 1


def test_epoch_milliseconds_are_not_read_as_seconds(spark, tmp_path, capsys):
    """Numeric times with no unit stay seconds (docs/semantics.md section 1), but epoch
    milliseconds stop the run with a message that names the value and suggests --time-unit ms."""
    path = tmp_path / "events.csv"
    path.write_text("type,time\nT1,1612137600000\nT2,1612137601000\n")
    wl, _ = _inputs(tmp_path)
    assert main(["explain", "--workload", str(wl), "--events", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{path}: column 'time': value '1612137600000' is after the year 5138 read as "
        f"seconds: state its unit (--time-unit ms" in err
    )
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    path.write_text("time,type\n1,T1\n99999999999999999999,T2\n")  # (decimal(38, 0): no time)
    for unit in ([], ["--time-unit", "ns"]):
        assert main(["explain", "--workload", str(wl), "--events", str(path), *unit]) == 2
        err = capsys.readouterr().err  # (it named the type, decimal(38,0), and no value)
        assert f"{path}: column 'time': value '99999999999999999999' is beyond int64" in err


def test_csv_integers_beyond_int64_are_exact_decimals(spark, tmp_path, caplog):
    """A CSV column of integers that do not all fit int64 is decimal(38, 0), not double: IDs
    18446744073709551615 and ...614 were one group, and one 1e20 made SUM and MAX of the other
    values inexact. A double column holds its integers exactly, or stays text with a warning."""
    path = tmp_path / "events.csv"
    big = 18446744073709551615
    path.write_text(
        "time,type,id,x,f,h\n"
        f"1,A,{big},1,0.5,0.5\n"
        f"2,B,{big},9007199254740993,1,1\n"
        f"3,A,{big - 1},100000000000000000000,2.5,{big}\n"
        f"4,B,{big - 1},1,3,3\n"
    )
    with caplog.at_level(logging.WARNING, logger="gpu_hamlet"):
        df = read_events(spark, str(path), "csv")
    assert dict(df.dtypes) == {
        "time": "bigint",
        "type": "string",
        "id": "decimal(38,0)",
        "x": "decimal(38,0)",
        "f": "double",
        "h": "string",
    }
    assert (
        "column 'h' is read as text" in caplog.text and f"'{big}' would lose digits" in caplog.text
    )
    wl = tmp_path / "w.txt"
    wl.write_text("RETURN id, SUM(B.x), MAX(B.x) PATTERN SEQ(A, B) GROUPBY id WITHIN 10 s")
    out = tmp_path / "out"
    assert main(["run", "--workload", str(wl), "--events", str(path), "--out", str(out)]) == 0
    got = pq.read_table(out / "q1").to_pylist()
    assert [(r["id"], r["sum_B_x"], r["max_B_x"]) for r in got] == [
        (big - 1, 1, 1),
        (big, 9007199254740993, 9007199254740993),
    ]


def test_csv_numbers_beyond_the_doubles_keep_their_column_text(spark, tmp_path, caplog):
    """A number a double cannot hold (1e400, -2e308) keeps its column text, with a warning
    naming it: Spark's cast made it an infinity, which MIN and MAX then returned. Numbers
    within the range stay doubles, in any notation."""
    path = tmp_path / "events.csv"
    path.write_text("time,type,x,y\n1,A,1e400,6.02e23\n2,B,2.5,-1.5E-3\n3,A,-2e308,1e308\n")
    with caplog.at_level(logging.WARNING, logger="gpu_hamlet"):
        df = read_events(spark, str(path), "csv")
    assert dict(df.dtypes) == {"time": "bigint", "type": "string", "x": "string", "y": "double"}
    assert "column 'x' is read as text" in caplog.text and "'1e400' is beyond" in caplog.text
    assert [r["y"] for r in df.select("y").collect()] == [6.02e23, -1.5e-3, 1e308]


def test_json_numbers_beyond_the_doubles_keep_their_column_text(spark, tmp_path, caplog):
    """A JSON number a double cannot hold (1e400, -1e999) or Java's `Infinity` keeps its
    column text, as written, with a warning naming it: Spark's reader made it an infinity,
    which MIN and MAX then returned. Columns of finite doubles stay doubles."""
    path = tmp_path / "events.json"
    path.write_text(
        '{"time": 1, "type": "A", "x": 1e400, "y": 6.02e23, "z": 1.5}\n'
        '{"time": 2, "type": "B", "x": 2.5, "y": -1.5E-3, "z": -1e999}\n'
        '{"time": 3, "type": "A", "x": 1, "y": 1e308, "z": Infinity}\n'
    )
    with caplog.at_level(logging.WARNING, logger="gpu_hamlet"):
        df = read_events(spark, str(path), "json")
    types = dict(df.dtypes)
    assert (types["x"], types["y"], types["z"]) == ("string", "double", "string")
    assert [r["x"] for r in df.select("x").collect()] == ["1e400", "2.5", "1"]
    assert [r["z"] for r in df.select("z").collect()] == ["1.5", "-1e999", "Infinity"]
    assert "column 'x' is read as text: its value '1e400' is beyond" in caplog.text
    assert "column 'z' is read as text: its value '-1e999' is beyond" in caplog.text
    assert [r["y"] for r in df.select("y").collect()] == [6.02e23, -1.5e-3, 1e308]


def test_timestamps_without_zone_are_written_to_the_microsecond(spark, tmp_path):
    """MIN/MAX of a timestamp-without-zone attribute, and the windows of such times, are
    written to the microsecond in CSV and JSON (Spark's timestampNTZFormat: milliseconds)."""
    wl = tmp_path / "w.txt"
    wl.write_text("RETURN MIN(B.y), MAX(B.y) PATTERN SEQ(A, B+) WITHIN 10 s")
    events = tmp_path / "e.parquet"
    micros = [1_000_005, 2_123_456, 3_654_321]
    table = pa.table(
        {
            "type": ["A", "B", "B"],
            "time": pa.array(micros, pa.timestamp("us")),
            "y": pa.array(micros, pa.timestamp("us")),
        }
    )
    pq.write_table(table, events)
    for fmt in ("csv", "json"):
        text = "".join(f.read_text() for f in _results(tmp_path, wl, events, fmt))
        assert "1970-01-01T00:00:02.123456" in text and "1970-01-01T00:00:03.654321" in text
        assert "1970-01-01T00:00:00.000000" in text  # (window_start)


def test_csv_of_no_rows_gives_empty_results(spark, tmp_path, capsys):
    """A CSV file of a header line alone: empty results, as `aggregate` gives for no events
    (was "time column 'time' has unsupported type string"); the columns the workload adds or
    compares with numbers are numbers, the others text."""
    path = tmp_path / "events.csv"
    path.write_text("time,type,x,g\n")
    wl = tmp_path / "w.txt"
    wl.write_text(
        "RETURN g, COUNT(*), SUM(B.x) PATTERN SEQ(A, B+) WHERE B.x > 1 AND A.g = 'n' "
        "GROUPBY g WITHIN 10 s"
    )
    out = tmp_path / "out"
    assert main(["run", "--workload", str(wl), "--events", str(path), "--out", str(out)]) == 0
    assert "read 0 events; wrote q1: 0 rows" in capsys.readouterr().out
    assert pq.read_table(out / "q1").num_rows == 0


def test_parquet_nanoseconds_name_the_file_column_and_fix(spark, tmp_path, capsys):
    """Spark's '[PARQUET_TYPE_ILLEGAL] Illegal Parquet type: INT64 (TIMESTAMP(NANOS,true))'
    named neither file nor column: pandas writes timestamp[ns] by default."""
    wl, _ = _inputs(tmp_path)
    path = tmp_path / "events.parquet"
    ns = pa.array([1_000_000_000, 2_000_000_000], pa.timestamp("ns", tz="UTC"))
    pq.write_table(pa.table({"time": ns, "type": ["T1", "T2"]}), path)
    out = tmp_path / "out"
    run = ["run", "--workload", str(wl), "--events", str(path), "--out", str(out), "--quiet"]
    assert main(run) == 2
    err = capsys.readouterr().err
    assert f"{path}: its timestamps (column 'time') are in nanoseconds" in err
    assert "coerce_timestamps='us'" in err and "spark.sql.legacy.parquet.nanosAsLong" in err
    assert len(err.strip().splitlines()) == 1


def test_event_types_of_digits_are_names(spark, tmp_path, capsys):
    """A CSV or JSON type column of 1, 2, 3 is text (was bigint, refused: 'must hold strings'),
    as the workload names them: `1`, `2`."""
    wl = tmp_path / "w.txt"
    wl.write_text("RETURN COUNT(*) PATTERN SEQ(`1`, `2`+, `3`) WITHIN 10 s")
    csv = tmp_path / "events.csv"
    csv.write_text("time,type\n1,1\n2,2\n3,3\n")
    jsonl = tmp_path / "events.jsonl"
    jsonl.write_text("".join(f'{{"time": {t}, "type": {t}}}\n' for t in (1, 2, 3)))
    for path in (csv, jsonl):
        df = read_events(spark, str(path), input_format(str(path), None))
        assert dict(df.dtypes)["type"] == "string"
        out = tmp_path / path.suffix[1:]
        run = ["run", "--workload", str(wl), "--events", str(path), "--out", str(out)]
        assert main(run + ["--quiet"]) == 0
        assert pq.read_table(out / "q1").column("count").to_pylist() == [1]


def test_a_null_type_names_the_file_and_row(spark, tmp_path, capsys):
    """An empty type field: the file, the row and its fields, and what to do (was "type column
    'type' has 1 null value(s)" alone)."""
    wl, _ = _inputs(tmp_path)
    path = tmp_path / "events.csv"
    path.write_text("time,type,x\n1,T1,1\n2,T2,2\n3,,3\n4,T2,4\n")
    out = tmp_path / "out"
    assert main(["run", "--workload", str(wl), "--events", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        f"{path}: type column 'type' has 1 null value(s), the first in row 3 (counting the "
        "file's rows of events, not its header line): time: 3, type: null, x: 3; every event "
        "needs its type: fill it in or remove the row" in err
    )


def test_text_times_suggest_a_time_format(spark, tmp_path, capsys):
    """JSON lines with ISO times as strings: the file, a value, and a --time-format that reads
    them (was "time column 'time' has unsupported type string")."""
    wl, _ = _inputs(tmp_path)
    path = tmp_path / "events.jsonl"
    path.write_text(
        '{"time": "2024-01-01T00:00:01Z", "type": "T1"}\n'
        '{"time": "2024-01-01T00:00:02.5Z", "type": "T2"}\n'
    )
    out = tmp_path / "out"
    run = ["run", "--workload", str(wl), "--events", str(path), "--out", str(out)]
    assert main(run) == 2
    err = capsys.readouterr().err
    pattern = "yyyy-MM-dd'T'HH:mm:ss[.SSSSSS]XXX"
    assert (
        f"{path}: column 'time' holds text, e.g. '2024-01-01T00:00:01Z', not timestamps or "
        f'numbers: give the pattern of its times (e.g. --time-format "{pattern}"' in err
    )
    assert main([*run, "--time-format", pattern, "--quiet"]) == 0
    assert pq.read_table(out / "q1").column("count").to_pylist() == [1]
    path = tmp_path / "events.csv"  # the value named is one that is no time ('1' was)
    path.write_text("time,type\n1,T1\n2,T2\nabc,T2\n")
    assert main(["explain", "--workload", str(wl), "--events", str(path), "--quiet"]) == 2
    assert f"{path}: column 'time' holds text, e.g. 'abc', not" in capsys.readouterr().err
    path.write_text("time,type\n1,T1\n2,T2\n")  # --columns over a header line: said so
    columns = ["--columns", "time,type"]
    assert main(["explain", "--workload", str(wl), "--events", str(path), *columns]) == 2
    err = capsys.readouterr().err
    assert "holds its own name 'time' as a value: the file's first line names its columns" in err


def test_input_format_from_names(tmp_path):
    folder = tmp_path / "events"
    folder.mkdir()
    (folder / "_SUCCESS").write_text("")
    (folder / "part-0.snappy.parquet").write_text("")
    assert input_format(str(folder), None) == "parquet"
    assert input_format(str(folder), "json") == "json"
    odd = tmp_path / "events.bin"
    odd.write_text("")
    with pytest.raises(cli.UsageError, match="give --in-format"):
        input_format(str(odd), None)


# --- errors a user can act on ------------------------------------------------------------------


def test_missing_files_are_named(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_spark", _no_spark)
    wl, events = _inputs(tmp_path)
    assert (
        main(
            [
                "run",
                "--workload",
                str(tmp_path / "nope.txt"),
                "--events",
                str(events),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    assert (
        f"workload file '{tmp_path / 'nope.txt'}': No such file or directory"
        in capsys.readouterr().err
    )
    assert (
        main(
            [
                "run",
                "--workload",
                str(wl),
                "--events",
                str(tmp_path / "none.parquet"),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    assert f"events path '{tmp_path / 'none.parquet'}' does not exist" in capsys.readouterr().err


def test_gpu_backend_without_gpu_fails_before_spark(tmp_path, capsys, monkeypatch):
    import gpu_hamlet.devices

    monkeypatch.setattr(cli, "_spark", _no_spark)
    monkeypatch.setattr(gpu_hamlet.devices, "cuda_visible", lambda: False)
    wl, events = _inputs(tmp_path)
    assert (
        main(
            [
                "run",
                "--workload",
                str(wl),
                "--events",
                str(events),
                "--out",
                str(tmp_path / "out"),
                "--backend",
                "gpu",
            ]
        )
        == 2
    )
    assert "--backend gpu, but no CUDA device is visible" in capsys.readouterr().err
    assert main(["demo", "--backend", "gpu", "--events", "100"]) == 2  # (before its data too)
    assert "--backend gpu, but no CUDA device is visible" in capsys.readouterr().err


def test_overflow_in_a_task_is_one_line_with_cli_advice(spark, tmp_path, capsys):
    """2^130 trends overflow decimal(38) inside a Spark task: one line, exit 2, CLI flags."""
    wl = tmp_path / "w.hamlet"
    wl.write_text("big: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1000 s")
    events = tmp_path / "events.parquet"
    pq.write_table(pa.table({"type": ["A"] + ["B"] * 130, "time": list(range(131))}), events)
    assert (
        main(
            [
                "run",
                "--workload",
                str(wl),
                "--events",
                str(events),
                "--out",
                str(tmp_path / "out"),
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("gpu-hamlet: error: query big") and len(err.strip().splitlines()) == 1
    assert "--numeric bigint" in err and "--on-overflow null" in err and "numeric=" not in err
    assert not (tmp_path / "out").exists()


def test_cli_advice_names_flags():
    assert (
        cli_advice("use numeric='bigint' or on_overflow='null'; time_col=\"ts\"")
        == "use --numeric bigint or --on-overflow null; --time-col ts"
    )
    assert cli_advice("Pickup.request_type = 'premium'") == "Pickup.request_type = 'premium'"
    # (advice that is no flag stays as written)
    assert cli_advice("coerce_timestamps='us'") == "coerce_timestamps='us'"


def test_error_message_from_wrapped_task_errors():
    wrapped = RuntimeError(
        "py4j.protocol.Py4JJavaError: ...\nTraceback (most recent call last):"
        "\n  File \"x.py\"\ngpu_hamlet.errors.EventDataError: column 'x' is bad"
        "\n\tat org.apache.spark.Executor"
    )
    assert error_message(wrapped) == ("column 'x' is bad", 2)
    assert error_message(
        RuntimeError(
            "[USER_RAISED_EXCEPTION] gpu-hamlet input error: f.csv: "
            "value 'x' does not match SQLSTATE: P0001"
        )
    ) == ("f.csv: value 'x' does not match", 2)
    assert error_message(MemoryError("out of memory")) == ("MemoryError: out of memory", 1)
    unread = RuntimeError(  # (Parquet files of one folder with two types of a column)
        "An error occurred while calling o3714.localCheckpoint.\n: org.apache.spark."
        "SparkException: [FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH] Encountered error "
        "while reading file file:///d/b.parquet. Data type mismatches when reading Parquet "
        "column [x]. Expected Spark type bigint, actual Parquet type DOUBLE. SQLSTATE: KD001\n"
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$"
    )
    assert error_message(unread) == (
        "Encountered error while reading file file:///d/b.parquet. Data type mismatches when "
        "reading Parquet column [x]. Expected Spark type bigint, actual Parquet type DOUBLE.",
        2,
    )


# --- version, logging, progress ---------------------------------------------------------------


def test_a_reader_of_stdout_that_goes_ends_the_command_quietly(tmp_path):
    """`gpu-hamlet explain ... | head -1`: the reader goes, and the command printed an error
    and Python's traceback at exit ('BrokenPipeError: [Errno 32] Broken pipe'); it ends in
    silence with 141, as a shell's SIGPIPE ends commands."""
    import subprocess
    import sys

    wl = tmp_path / "w.hamlet"
    wl.write_text(WORKLOAD)
    command = [sys.executable, "-m", "gpu_hamlet.cli", "explain", "--workload", str(wl)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # (gone before the command prints)
    err = proc.stderr.read().decode()
    assert (proc.wait(timeout=120), err) == (141, "")


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"gpu-hamlet {gpu_hamlet.__version__}"


def test_progress_lines_have_one_prefix_and_quiet_hides_them(spark, tmp_path, capsys):
    """Progress on stderr, each line prefixed once even when the application (or Spark) has a
    root handler; nothing with --quiet."""
    wl, events = _inputs(tmp_path)
    root = logging.StreamHandler()
    logging.getLogger().addHandler(root)
    try:
        assert main(["explain", "--workload", str(wl), "--events", str(events)]) == 0
    finally:
        logging.getLogger().removeHandler(root)
    err = capsys.readouterr().err.splitlines()
    assert f"gpu-hamlet: reading parquet events from {events}" in err
    assert all(re.fullmatch(r"gpu-hamlet: (?!.*gpu.hamlet: ).*", line) for line in err), err
    assert len(err) == len(set(err))
    assert main(["explain", "--workload", str(wl), "--events", str(events), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_query_names_that_are_no_folder_name_are_refused_before_spark(
    tmp_path, capsys, monkeypatch
):
    """Each query's dataset is OUT/<name>: a name like `../x` would write, and Spark's overwrite
    delete, a folder outside OUT; the marker's name is taken. Refused before Spark starts."""
    monkeypatch.setattr(cli, "_spark", _no_spark)
    _, events = _inputs(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "data.txt").write_text("precious")
    for name in ("../victim", "a/b", "..", MARKER):
        wl = tmp_path / "names.txt"
        wl.write_text(f"`{name}`: RETURN COUNT(*) PATTERN SEQ(T1, T2+) WITHIN 10 s")
        run = ["run", "--workload", str(wl), "--events", str(events), "--out"]
        assert main([*run, str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert f"query name '{name}' cannot be the name of its output folder" in err
    assert (victim / "data.txt").read_text() == "precious"
    wl.write_text(f"{'q' * 300}: RETURN COUNT(*) PATTERN SEQ(T1, T2+) WITHIN 10 s")
    assert main([*run, str(tmp_path / "out")]) == 2  # (a folder name holds 255 bytes at most)
    assert "is 300 bytes, longer than the 255 a folder name may have" in capsys.readouterr().err


def test_workload_file_encoding(tmp_path, capsys, monkeypatch):
    """A UTF-8 byte order mark is skipped; a file that is not UTF-8 is named, exit status 2."""
    monkeypatch.setattr(cli, "_spark", _no_spark)
    wl = tmp_path / "bom.txt"
    wl.write_bytes("\ufeffq1: RETURN COUNT(*) PATTERN SEQ(T1, T2+) WITHIN 10 s".encode())
    assert main(["explain", "--workload", str(wl)]) == 0
    capsys.readouterr()
    wl.write_text("q1: RETURN COUNT(*) PATTERN T1 WITHIN 10 s", encoding="utf-16")
    assert main(["explain", "--workload", str(wl)]) == 2
    assert f"workload file '{wl}' is not UTF-8 text: byte 0xff at offset 0" in (
        capsys.readouterr().err
    )


def test_bad_numbers_and_conflicting_time_flags_are_usage_errors(tmp_path, capsys, monkeypatch):
    """Exit status 2 and one line, before Spark starts: a demo of no events, and both time
    flags of `run` and of `explain --events` (they were refused only after Spark had read the
    events)."""
    monkeypatch.setattr(cli, "_spark", _no_spark)
    assert main(["demo", "--events", "-5"]) == 2
    assert "argument --events: must be a whole number of 1 or more, not '-5'" in (
        capsys.readouterr().err
    )
    wl, events = _inputs(tmp_path)
    flags = ["--time-format", "yyyy", "--time-unit", "s"]
    run = ["run", "--workload", str(wl), "--events", str(events), "--out", str(tmp_path / "o")]
    explain = ["explain", "--workload", str(wl), "--events", str(events)]
    for command in (run, explain):
        assert main([*command, *flags]) == 2
        assert "give --time-format (times as text) or --time-unit (numbers), not both" in (
            capsys.readouterr().err
        )


def test_a_jvm_the_command_starts_reads_the_quiet_log_config(monkeypatch, tmp_path):
    """Spark's startup warnings would print above the command's output before setLogLevel runs:
    a JVM this process starts reads the package's log4j2.properties (through SPARK_SUBMIT_OPTS,
    beside options already there), unless the user chose a log configuration."""
    from gpu_hamlet.spark.jvm_log import CONFIG, quiet_jvm_start

    assert "rootLogger.level = warn" in CONFIG.read_text()  # (installed as package data)
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xss4m")
    quiet_jvm_start()
    quiet_jvm_start()  # (once)
    assert os.environ["SPARK_SUBMIT_OPTS"] == f"-Xss4m -Dlog4j2.configurationFile={CONFIG}"
    own = "-Dlog4j2.configurationFile=/etc/mine.properties"
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", own)
    quiet_jvm_start()
    assert os.environ["SPARK_SUBMIT_OPTS"] == own
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    (tmp_path / "log4j2.properties").write_text("rootLogger.level = info\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    quiet_jvm_start()
    assert "SPARK_SUBMIT_OPTS" not in os.environ


def test_names_with_quotes_dots_and_case_alone_round_trip(spark, tmp_path):
    """Names are case-sensitive and any text (docs/semantics.md section 4), in the files too.
    A CSV file quoting as RFC 4180 does, as `run` writes CSV (a quote inside a quoted field
    doubled: the column `"k"`, the type `say "hi"`), was read with Spark's backslash escape:
    a missing column, or a type that never occurs (no trends, only a warning). Columns `x` and
    `X` were renamed x2, X3 (CSV) or refused (JSON), and results `count` and `Count` could not
    be written. Each query's dataset equals aggregate's table, from CSV, JSON and Parquet."""
    import csv

    rows = [
        {"t.s": t, "ty pe": ty, '"k"': t // 4 % 2, "x": t % 3, "X": t % 4, "g h": "u v"}
        for t, ty in enumerate(["A", 'say "hi"', 'say "hi"', "a,b"] * 5)
    ]
    table = pa.Table.from_pylist(rows)
    text = (
        'q: RETURN `g h`, COUNT(*), SUM(`say "hi"`.x) AS sx, SUM(`say "hi"`.X) AS `sX`, '
        'COUNT(`say "hi"`) AS `Count` PATTERN SEQ(A, `say "hi"`+, `a,b`) '
        'WHERE [`"k"`] GROUPBY `g h` WITHIN 8 s'
    )
    local = gpu_hamlet.aggregate(table, text, backend="cpu", time_col="t.s", type_col="ty pe")
    assert local["q"].num_rows
    wl = tmp_path / "w.txt"
    wl.write_text(text)
    with open(tmp_path / "e.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=table.column_names)
        writer.writeheader()
        writer.writerows(rows)
    (tmp_path / "e.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pq.write_table(table, tmp_path / "e.parquet")
    for fmt in ("csv", "json", "parquet"):
        out = tmp_path / f"out-{fmt}"
        run = ["run", "--workload", str(wl), "--events", str(tmp_path / f"e.{fmt}")]
        run += ["--out", str(out), "--time-col", "t.s", "--type-col", "ty pe", "--quiet"]
        assert main(run) == 0, fmt
        got = pq.read_table(out / "q")
        assert got.column_names == local["q"].column_names, fmt
        assert got.to_pylist() == local["q"].to_pylist(), fmt

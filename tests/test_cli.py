"""The command line: run (round trip through Parquet), explain, demo, and errors."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

import gpu_hamlet
from gpu_hamlet.cli import main
from gpu_hamlet.datagen import load_hamlet_stream

PAPER = Path(__file__).parent / "data" / "Paper_TestStream.txt"
WORKLOAD = ("q1: RETURN COUNT(*), COUNT(T2) PATTERN SEQ(T1, T2+) WITHIN 100 s;\n"
            "q2: RETURN COUNT(*) PATTERN SEQ(T3, T2+) WITHIN 10 s SLIDE 5 s\n")


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    wl = tmp_path / "workload.txt"
    wl.write_text(WORKLOAD)
    events = tmp_path / "events.parquet"
    pq.write_table(load_hamlet_stream(PAPER), events)
    return wl, events


def test_run_round_trip(spark, tmp_path, capsys):
    """Parquet in, Spark job, Parquet out per query, read back equal to the in-process engine."""
    wl, events = _inputs(tmp_path)
    out = tmp_path / "out"
    assert main(["run", "--workload", str(wl), "--events", str(events), "--out", str(out),
                 "--sharing", "static"]) == 0
    printed = capsys.readouterr().out
    assert "read 14 events" in printed and "q1: 1 rows" in printed
    expected = gpu_hamlet.aggregate(pq.read_table(events), WORKLOAD, backend="cpu")
    for name in ("q1", "q2"):
        got = pq.read_table(out / name).sort_by("window_start")
        assert got.to_pylist() == expected[name].to_pylist()
    assert pq.read_table(out / "q1").column("count").to_pylist() == [132]


def test_explain_with_events_prints_sharing_decisions(tmp_path, capsys):
    wl, events = _inputs(tmp_path)
    assert main(["explain", "--workload", str(wl), "--events", str(events),
                 "--sharing", "static"]) == 0
    out = capsys.readouterr().out
    assert "sharing decisions over 14 events" in out
    # q2 slides by 5 s: the set's pane is 5 s, which cuts the first burst in two.
    assert "T2+ shared by q1, q2: 3 bursts (6 events), 3 shared, 0 not" in out


def test_failed_run_leaves_no_output(spark, tmp_path, capsys):
    wl, events = _inputs(tmp_path)
    wl.write_text("RETURN COUNT(*) PATTERN SEQ(T1, T9+) WITHIN 100 s")
    out = tmp_path / "out"
    assert main(["run", "--workload", str(wl), "--events", str(events), "--out",
                 str(out)]) == 2
    err = capsys.readouterr().err
    assert "query q1" in err and "'T9'" in err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_syntax_error_names_line_and_column(tmp_path, capsys):
    wl, events = _inputs(tmp_path)
    wl.write_text("RETURN COUNT(*)\nPATERN SEQ(T1, T2+) WITHIN 100 s")
    assert main(["explain", "--workload", str(wl)]) == 2
    err = capsys.readouterr().err
    assert "line 2, column 1" in err and "PATERN" in err


def test_explain_shows_sets_template_and_pane(tmp_path, capsys):
    wl, _ = _inputs(tmp_path)
    assert main(["explain", "--workload", str(wl)]) == 0
    out = capsys.readouterr().out
    assert "workload pane: 5000 ms" in out
    assert "sharable set T2+: q1, q2" in out
    assert "T2 -> T2" in out and "q1, q2" in out


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
    spark_submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent)) or \
        shutil.which("spark-submit")
    assert spark_submit, "spark-submit comes with the pyspark package"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    done = subprocess.run(
        [spark_submit, "--properties-file", str(root / "spark-conf" / "local.conf"),
         "--conf", "spark.master=local[2]", "--conf", "spark.ui.enabled=false",
         submit.__file__, "--workload", str(wl), "--events", str(events), "--out", str(out)],
        capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "q1: 1 rows" in done.stdout
    assert pq.read_table(out / "q1").column("count").to_pylist() == [132]

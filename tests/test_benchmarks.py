"""Smoke test of the paper experiments: `benchmarks/run.py --quick` writes every result and plot.

No timing assertions (the machine is shared and the quick sizes are too small to measure): only
that each experiment ran every compared mode, that its figures are of the right kind and
consistent (static shares every burst, the two-step enumerator agrees with the engine), and that
the experiment on the HAMLET authors' data says it was skipped when their files are absent.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

import gpu_hamlet
from gpu_hamlet.datagen import kleene_stream
from gpu_hamlet.engine.plan_search import SEARCHES

pytestmark = pytest.mark.slow  # smoke runs of the benchmark scripts, in processes of their own
#: The tests of the module-scoped `quick` run share one xdist worker, so the run happens once.
QUICK = pytest.mark.xdist_group("bench-quick")

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "benchmarks" / "run.py"
DATA = ROOT.parent / "shared" / "data"
HAVE_AUTHORS_DATA = (DATA / "hamlet-synthetic" / "Stream_shared_10.txt").is_file()
EXPERIMENTS = ("events", "queries", "dynamic", "two_step", "hamlet_synthetic")
MODES = ("dynamic", "static", "none")
PNG = b"\x89PNG\r\n\x1a\n"


def checkout_env(**extra: str) -> dict[str, str]:
    """This process's environment plus `extra`, with this checkout's package first on the path."""
    return {
        **os.environ,
        **extra,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    """`python benchmarks/NAME ARGS` with this checkout's package first; its output captured."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args],
        cwd=ROOT,
        env=checkout_env(),
        check=True,
        timeout=600,
        capture_output=True,
        text=True,
    )


def run_quick(out: Path, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess:
    """`python benchmarks/run.py --quick --out OUT ARGS` with this checkout's package first."""
    env = checkout_env(**env)
    return subprocess.run(
        [sys.executable, str(RUN), "--quick", "--out", str(out), *args],
        cwd=ROOT,
        env=env,
        check=check,
        timeout=900,
        capture_output=not check,
        text=True,
    )


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench-quick")
    run_quick(out)
    return out


def load(out: Path, name: str) -> dict:
    return json.loads((out / f"{name}.json").read_text())


@QUICK
def test_every_experiment_writes_json_png_and_table(quick):
    summary = json.loads((quick / "summary.json").read_text())
    assert summary["quick"] is True and summary["backend"] == "cpu"
    assert summary["cpus"] >= 1 and "numba" in summary
    assert set(summary["experiments"]) == set(EXPERIMENTS)
    tables = (quick / "tables.md").read_text()
    for name in EXPERIMENTS:
        result = load(quick, name)
        assert result["experiment"] == name and result["quick"] is True
        assert f"## {name} (" in tables
        assert summary["experiments"][name]["seconds"] >= 0
        if result["points"]:
            assert (quick / f"{name}.png").read_bytes()[:8] == PNG


def check_modes(point: dict, same_filters: bool = False) -> None:
    """Every mode measured; sharing decisions consistent (with the same filters on the Kleene
    type in every query, static shares every burst)."""
    modes = point["modes"]
    assert set(modes) == set(MODES)
    for m in modes.values():
        assert m["seconds"] > 0 and m["events_per_s"] > 0
        assert m["peak_mib"] is None or m["peak_mib"] >= 0
    assert modes["none"]["sharing"] is None
    static, dynamic = modes["static"]["sharing"], modes["dynamic"]["sharing"]
    if static is not None:
        # HAMLET's bursts: the same in both modes (GLORIA's stages, which only dynamic runs,
        # are counted apart)
        assert static["stages"] == 0 and dynamic["stage_shared"] <= dynamic["stage_runs"]
        assert static["bursts"] > 0 and static["sets_not_analysed"] == 0
        # dynamic skips the sets whose sharing could not pay for its fixed costs
        if dynamic["sets_not_analysed"]:
            assert dynamic["bursts"] < static["bursts"]
        else:
            assert dynamic["bursts"] == static["bursts"]
        assert dynamic["shared"] <= static["shared"] <= static["bursts"]
        if same_filters:
            assert static["shared"] == static["bursts"]
        assert 0 <= dynamic["share_rate"] <= 1
        assert dynamic["shared"] + dynamic["unshared"] == dynamic["bursts"]
    for key in ("none/dynamic", "static/dynamic"):
        assert point[key] > 0


@QUICK
def test_events_queries_and_dynamic_measure_every_mode(quick):
    events = load(quick, "events")
    assert [p["events_per_minute"] for p in events["points"]] == [5_000, 20_000]
    queries = load(quick, "queries")
    assert {(p["workload"], p["queries"]) for p in queries["points"]} == {
        (w, n) for w in ("kleene-sharing", "diverse") for n in (5, 25, 100)
    }
    dynamic = load(quick, "dynamic")
    assert {p["sweep"] for p in dynamic["points"]} == {"events_per_minute", "queries"}
    for point in events["points"]:
        check_modes(point, same_filters=True)
    for point in queries["points"]:
        check_modes(point, same_filters=point["workload"] == "kleene-sharing")
    for point in dynamic["points"]:
        check_modes(point)
    # Kleene-sharing queries form one sharable set.
    assert all(
        p["modes"]["dynamic"]["sharing"]["sets"] == 1
        for p in queries["points"]
        if p["workload"] == "kleene-sharing"
    )


@QUICK
def test_two_step_agrees_with_the_engine_until_its_budget(quick):
    result = load(quick, "two_step")
    points = result["points"]
    assert points[0]["two_step"]["status"] == "ok"
    finished = True
    for p in points:
        assert p["dynamic"]["seconds"] > 0 and p["trends"] >= 0
        status = p["two_step"]["status"]
        if status == "ok":
            assert finished, "a point ran after one went over budget"
            assert p["two_step"]["max_relative_difference"] < 1e-9
            assert p["two_step/dynamic"] > 0
        else:
            finished = False
            assert status.startswith(("over the", "not run"))


@QUICK
def test_authors_workload_runs_or_says_why_not(quick):
    result = load(quick, "hamlet_synthetic")
    if HAVE_AUTHORS_DATA:
        assert "skipped" not in result
        assert {p["numeric"] for p in result["points"]} == {"float", "bigint"}
        for p in result["points"]:
            check_modes(p, same_filters=True)
            if p["numeric"] == "bigint":
                assert p["max_count_digits"] > 40  # the authors' counts: tens of digits and more
    else:
        assert "not here" in result["skipped"] and result["points"] == []
        assert not (quick / "hamlet_synthetic.png").exists()


def test_authors_workload_skipped_without_their_data(tmp_path):
    """Whatever this machine has: pointed at an empty folder, the experiment skips with a reason."""
    run_quick(tmp_path / "out", "--only", "hamlet_synthetic", "--data", str(tmp_path / "none"))
    result = load(tmp_path / "out", "hamlet_synthetic")
    assert result["points"] == []
    assert "Stream_shared_10.txt" in result["skipped"] and "--data" in result["skipped"]
    assert not (tmp_path / "out" / "hamlet_synthetic.png").exists()
    assert "skipped:" in (tmp_path / "out" / "tables.md").read_text()


def test_gpu_backend_without_a_device_is_refused_clearly(tmp_path):
    proc = run_quick(
        tmp_path, "--backend", "gpu", check=False, CUDA_VISIBLE_DEVICES="", NUMBA_ENABLE_CUDASIM="0"
    )
    assert proc.returncode == 2
    assert "CUDA device" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.iterdir())


def test_task_benchmark_runs_and_profiles():
    """`benchmarks/bench_task.py` on a small stream: one task's districts, a time, a profile."""
    env = checkout_env()
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_task.py"),
            "--events",
            "20000",
            "--queries",
            "6",
            "--repeat",
            "1",
            "--profile",
            "3",
        ],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=600,
        capture_output=True,
        text=True,
    ).stdout
    first = out.splitlines()[0]
    assert "districts, 6 queries: best" in first and "M events/s" in first
    assert int(first.split(" events")[0].replace(",", "")) > 0
    assert "Ordered by: internal time" in out


def test_pattern_benchmark_times_every_case(tmp_path):
    """`benchmarks/bench_patterns.py` on a small stream: both workloads, general and flat
    patterns, sharing on and off."""
    env = checkout_env()
    out = tmp_path / "patterns.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_patterns.py"),
            "--events",
            "3000",
            "--repeat",
            "1",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=600,
        capture_output=True,
    )
    rows = json.loads(out.read_text())["rows"]
    cases = {(r["case"], r["patterns"], r["sharing"]) for r in rows}
    assert cases == {
        (c, p, s)
        for c in ("HAMLET Example 10", "GLORIA Figure 1")
        for p in ("general", "flat")
        for s in ("dynamic", "none")
    }
    assert all(r["seconds"] > 0 and r["M_events_per_s"] > 0 for r in rows)


def test_adjacent_benchmark_agrees_with_the_scan(tmp_path):
    """`benchmarks/bench_adjacent.py` on small windows of the ridesharing stream (the NASDAQ
    stream needs ../shared/data): the engine and the scan agree (the script asserts it), the
    larger size's scan is extrapolated, and the table and plot are written."""
    env = checkout_env()
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_adjacent.py"),
            *("--sizes", "300", "1500", "--max-scan", "300", "--repeat", "1"),
            *("--streams", "ridesharing", "--out", str(tmp_path)),
        ],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=600,
        capture_output=True,
    )
    rows = json.loads((tmp_path / "results.json").read_text())
    assert [(r["events"], r["scan_measured"]) for r in rows] == [(300, True), (1500, False)]
    assert all(r["engine_s"] > 0 and r["scan_s"] > 0 for r in rows)
    assert (tmp_path / "adjacent.png").stat().st_size > 0


def test_small_call_benchmark_times_every_case(tmp_path):
    """`benchmarks/bench_small.py` with a few calls per case: every case timed."""
    env = checkout_env()
    out = tmp_path / "small.json"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_small.py"), "--calls", "3"]
        + ["--json", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=600,
        capture_output=True,
    )
    rows = json.loads(out.read_text())
    assert [(r["case"].split(",")[0], r["numeric"], r["sharing"], r["backend"]) for r in rows] == [
        ("1 query", "float", "dynamic", "cpu"),
        ("1 query", "exact", "dynamic", "cpu"),
        ("50 queries", "float", "dynamic", "cpu"),
        ("50 queries", "float", "none", "cpu"),
        ("50 queries", "exact", "dynamic", "cpu"),
        ("1 query", "float", "dynamic", "auto"),
    ]
    assert all(r["seconds"] > 0 for r in rows)


def test_sharing_benchmark_runs_every_mode(tmp_path):
    """`benchmarks/bench_sharing.py` on a small stream, with rounds for a given time: every case
    timed in each mode, and static shares every burst it analyses."""
    out = tmp_path / "sharing.json"
    run_script(
        "bench_sharing.py",
        *("--events", "3000", "--queries", "2", "4", "--bursts", "20", "--repeat", "1"),
        *("--seconds", "0.05", "--json", str(out)),
    )
    rows = json.loads(out.read_text())
    cases = [(r["stream"].split(",")[0], r["queries"], r["sharing"]) for r in rows]
    assert cases == [
        (stream, n, mode)
        for stream in ("kleene-sharing", "short bursts + per-query filters")
        for n in (2, 4)
        for mode in ("none", "static", "dynamic")
    ]
    assert all(r["seconds"] > 0 for r in rows)
    static = [r["stats"] for r in rows if r["sharing"] == "static"]
    assert all(s["shared"] == s["bursts"] > 0 for s in static[:2])  # the Kleene stream's


def test_call_profile_shows_each_mode_and_the_engine_inside(tmp_path):
    """`benchmarks/profile_call.py` on a small stream: a section per host-thread count and
    sharing mode with its unprofiled time, and both listings name the engine's own functions."""
    done = run_script(
        *("profile_call.py", "--events", "2000", "--queries", "3", "--calls", "1"),
        *("--top", "1000", "--threads", "1", "2"),
    )
    sections = done.stdout.split("\n== sharing=")[1:]
    assert [s.split(":")[0] for s in sections] == [
        f"{mode}, {n} host threads" for n in (1, 2) for mode in ("none", "static")
    ]
    for section in sections:
        assert float(section.split(": ")[1].split(" ms")[0]) > 0
        by_cum, by_own = section.split("-- by tottime")
        assert "evaluate.py" in by_cum and "(segment_maps)" in by_own


def test_next_sharing_benchmark_runs_every_mode(tmp_path):
    """`benchmarks/bench_next_sharing.py` on a small stream: every case timed in each mode, and
    static shares every burst of the set."""
    out = tmp_path / "next.json"
    run_script(
        "bench_next_sharing.py",
        *("--events", "3000", "--queries", "2", "4", "--windows", "1", "--repeat", "1"),
        *("--seconds", "0.05", "--json", str(out)),
    )
    rows = json.loads(out.read_text())["rows"]
    assert [(r["window_min"], r["queries"]) for r in rows] == [(1, 2), (1, 4)]
    assert all(r[f"{m}_s"] > 0 for r in rows for m in ("none", "static", "dynamic"))
    assert all(r["bursts"] > 10 for r in rows)


def test_bigint_benchmark_agrees_with_its_python_loop(tmp_path):
    """`benchmarks/bench_bigint.py` on files in the authors' format written here: runs of one
    type, Kleene bursts of 12, so counts need several 32-prime passes. The script stops unless
    the engine's bigint counts equal its Python big-int loop's."""
    rng = random.Random(3)
    lines, t = [], 0
    while t < 3_000:
        typ = rng.choice([1, 2, 2, 3, 4])
        for _ in range(12 if typ == 2 else rng.randint(1, 5)):
            lines.append(f"{t},{typ},1")
            t += 1
    (tmp_path / "Stream_shared_10.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "HAMLET_DEFAULT_WORKLOAD.txt").write_text("1,2+,3\n2+,4\n4,1,2+,3\n3,4\n")
    out = tmp_path / "bigint.json"
    run_script(
        "bench_bigint.py",
        *("--data", str(tmp_path), "--events", "300", str(t), "--repeat", "1"),
        *("--json", str(out)),
    )
    rows = json.loads(out.read_text())
    assert [r["events"] for r in rows] == [300, t]
    assert rows[1]["passes"] >= 2, "the counts should need more than one pass of 32 primes"
    assert all(r["engine_s"] > 0 and r["loop_s"] > 0 for r in rows)


def test_plan_search_benchmark_times_every_search():
    """`benchmarks/bench_plan_search.py` on small workloads: a line per workload and search, and
    GLORIA's plan never dearer than Greedy's."""
    done = run_script(
        "bench_plan_search.py",
        *("--events", "5000", "--queries", "20", "--lengths", "3", "--ratios", "2"),
        *("--repeat", "1"),
    )
    rows = [line.split() for line in done.stdout.splitlines() if len(line.split()) >= 5]
    ratio = {(" ".join(r[:-4]), r[-4]): float(r[-1]) for r in rows if r[-4] in SEARCHES}
    assert len(ratio) == 9
    for workload in {w for w, _ in ratio}:
        assert ratio[(workload, "gloria")] <= ratio[(workload, "greedy")] + 1e-9
        assert ratio[(workload, "gloria")] == ratio[(workload, "noprune")]


def test_gloria_benchmark_writes_every_cell_and_plot(tmp_path):
    """`benchmarks/bench_gloria.py` on small streams: a line and a point per stream, workload
    kind and number of queries with the four modes' times and the control's, the search time, and
    both plots."""
    streams = ["ridesharing", "bursty"] + (["NASDAQ"] if any(DATA.glob("NASDAQ_*.txt")) else [])
    done = run_script(
        "bench_gloria.py",
        *("--events", "3000", "--queries", "4", "8", "--lengths", "2", "--repeat", "1"),
        *("--seconds", "0.05", "--out", str(tmp_path), "--streams", *streams),
    )
    points = json.loads((tmp_path / "results.json").read_text())
    assert len(points) == len(streams) * 3 * 2  # SEQ, Kleene, mixed; 4 and 8 queries
    for p in points:  # the four modes and the control (`none` again)
        assert set(p["seconds"]) == {"none", "static", "hamlet", "dynamic", "none again"}
        assert all(s > 0 for s in p["seconds"].values()) and p["search_ms"] > 0
    assert len([line for line in done.stdout.splitlines() if line.split()[0] in streams]) == len(
        points
    )
    assert (tmp_path / "throughput.png").stat().st_size > 0
    assert (tmp_path / "optimisation.png").stat().st_size > 0


def test_gloria_benchmark_plans_only_times_the_plans(tmp_path):
    """`bench_gloria.py --plans-only`: a row per workload with its search and plan times, and
    no mode run (nothing written)."""
    done = run_script(
        "bench_gloria.py",
        *("--events", "3000", "--queries", "4", "--lengths", "2", "--streams", "bursty"),
        *("--plans-only", "--out", str(tmp_path)),
    )
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("bursty")]
    assert [r[1] for r in rows] == ["SEQ", "Kleene", "mixed"]
    assert all(float(r[-2]) > 0 and float(r[-1]) > 0 for r in rows)
    assert not (tmp_path / "results.json").exists()


def test_stage_calibration_fits_its_constants():
    """`benchmarks/calibrate_stages.py` on small streams: a line per case, the fit of each case
    where a Q-set was built, and the cost model's stage fields to paste."""
    done = run_script("calibrate_stages.py", "--events", "3000", "--repeat", "1")
    lines = done.stdout.splitlines()
    cases = [line for line in lines if line.startswith(("bursty", "type runs", "ridesharing"))]
    assert len(cases) == 2 * 37  # 29 bursty, 4 type-run and 4 ridesharing cases, then their fit
    names = ("stage_row_s", "stage_stream_s", "stage_block_s", "stage_fma_s")
    consts = dict(line.split(" = ") for line in lines if line.startswith(names))
    assert set(consts) == set(names)
    assert all(float(v) == float(v) for v in consts.values())  # numbers, not NaN


def test_cost_calibration_prints_a_model_to_paste():
    """`benchmarks/calibrate_costs.py` on a small stream: the kernel figures by channel, the
    end-to-end cost of a query row beside them, and an EngineCostModel line that builds one."""
    from gpu_hamlet.engine.optimizer import EngineCostModel

    done = run_script("calibrate_costs.py", "--events", "40000")
    lines = done.stdout.splitlines()
    assert any(line.startswith("segment kernel s per event by channels 1..4") for line in lines)
    row = next(line for line in lines if line.startswith("end to end, sharing='none'"))
    assert " s per query row of " in row and "what the kernel's figures give it" in row
    model = eval(lines[-1], {"EngineCostModel": EngineCostModel})  # the line to paste
    assert isinstance(model, EngineCostModel)
    figures = [getattr(model, f) for f in ("base_s", "event_s", "coef_s", "macro")]
    assert all(math.isfinite(x) for x in figures)
    assert model.set_s >= 0 and model.query_s >= 0 and model.class_s >= 0
    assert model.set_row_s >= 0 and model.set_run_s >= 0 and model.stream_row_s >= 0


def test_alike_benchmark_times_both_workloads(tmp_path):
    """`benchmarks/bench_alike.py` on a small stream: the four queries alike but for RETURN and
    the one of all their aggregates are timed, and their tables hold the same values."""
    out = tmp_path / "alike.json"
    run_script(
        *("bench_alike.py", "--events", "3000", "--queries", "2", "--numeric", "float"),
        *("--repeat", "1", "--json", str(out)),
    )
    (row,) = json.loads(out.read_text())["rows"]
    assert row["patterns"] == 2 and row["alike"] > 0 and row["one"] > 0
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_alike import RETURNS, workloads
    finally:
        sys.path.pop(0)
    events = kleene_stream(3000, seed=3, types=list("ABCDEFGH"), mean_burst=5)
    texts = workloads(2)
    alike = gpu_hamlet.aggregate(events, texts["alike"], backend="cpu", numeric="float")
    one = gpu_hamlet.aggregate(events, texts["one"], backend="cpu", numeric="float")
    for i in range(2):
        for j, col in enumerate(one[f"all{i}"].column_names[2:]):
            assert alike[f"r{j}_{i}"].column(col).equals(one[f"all{i}"].column(col)), RETURNS[j]

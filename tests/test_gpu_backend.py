"""`aggregate(..., backend="gpu")` against the brute-force oracle, and choosing the backend.

Without a CUDA device the GPU backend runs in numba's CUDA simulator (tests/conftest.py), which
executes kernels as Python: inputs stay small and examples few. On a device the same tests run
the kernels there.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

import gpu_hamlet
from gpu_hamlet.devices import cuda_visible
from gpu_hamlet.engine.backend import select_backend
from gpu_hamlet.engine.options import SHARING_MODES
from gpu_hamlet.errors import NumericOverflowError

pytestmark = pytest.mark.gpu  # the GPU backend's kernels (numba's CUDA simulator without a device)

try:
    from compare import NUMERIC_MODES, assert_matches_oracle, events_to_table
    from oracle import oracle
    from test_properties import OVERFLOW_TEXT, cases, overflow_events
except ImportError:  # pragma: no cover
    from tests.compare import NUMERIC_MODES, assert_matches_oracle, events_to_table
    from tests.oracle import oracle
    from tests.test_properties import OVERFLOW_TEXT, cases, overflow_events

GPU_PROPERTY = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("sharing", SHARING_MODES)
@GPU_PROPERTY
@given(case=cases(max_queries=3))
def test_gpu_backend_matches_oracle_and_cpu(sharing, case):
    """Every numeric mode against the oracle; and the very same tables as the CPU backend."""
    text, wl, events = case
    expected = oracle(events, wl, with_magnitudes=True)
    table = events_to_table(events)
    for numeric in NUMERIC_MODES:
        got = gpu_hamlet.aggregate(table, text, backend="gpu", sharing=sharing, numeric=numeric)
        assert_matches_oracle(got, expected, wl, numeric)
        cpu = gpu_hamlet.aggregate(table, text, backend="cpu", sharing=sharing, numeric=numeric)
        for name in wl.names:
            assert got[name].equals(cpu[name]), f"{name} ({numeric}): {got[name]} != {cpu[name]}"


@pytest.mark.parametrize("sharing", ["none", "static"])
def test_gpu_overflow_behaviour_equals_cpu(sharing):
    table = events_to_table(overflow_events())
    with pytest.raises(NumericOverflowError, match="bigint"):
        gpu_hamlet.aggregate(table, OVERFLOW_TEXT, backend="gpu", sharing=sharing)
    for numeric in ("bigint", "float"):
        got = gpu_hamlet.aggregate(
            table, OVERFLOW_TEXT, backend="gpu", sharing=sharing, numeric=numeric
        )
        cpu = gpu_hamlet.aggregate(
            table, OVERFLOW_TEXT, backend="cpu", sharing=sharing, numeric=numeric
        )
        assert got["burst"].equals(cpu["burst"]), numeric


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
@pytest.mark.filterwarnings("ignore:query options. event type 'C'")  # (no C: an OR's option)
def test_an_overflow_names_the_first_query_that_has_one_on_both_backends(order):
    """Two queries whose counts both leave decimal(38): the error names the first of them in
    the workload's order on both backends. It named whichever query's steps met it first: the
    CPU named `negated` in both orders, the GPU's rounds `options` (a helper's review)."""
    n = 140
    events = pa.table({"time": range(n + 2), "type": ["A", *["B"] * n, "D"], "x": [1] * (n + 2)})
    texts = [
        "options: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, (B OR C)+, D) WITHIN 1000 s",
        "negated: RETURN COUNT(*) PATTERN SEQ(A, NOT D, B+) WITHIN 400 s SLIDE 100 s",
    ]
    text = ";\n".join(texts[i] for i in order)
    first = texts[order[0]].split(":")[0]
    for backend in ("cpu", "gpu"):
        with pytest.raises(NumericOverflowError, match=f"^query {first}: "):
            gpu_hamlet.aggregate(events, text, backend=backend)


# --- choosing the backend ----------------------------------------------------------------------


def test_gpu_backend_runs_the_gpu_kernels():
    """On a device or in the simulator, backend='gpu' is the GPU backend."""
    assert select_backend("gpu").name == "gpu"


def test_auto_says_which_backend_it_chose(caplog, monkeypatch):
    """Once per process: a Spark task or the demo's warm-up calls the engine many times."""
    monkeypatch.setattr("gpu_hamlet.engine.backend._said", set())
    with caplog.at_level(logging.INFO, logger="gpu_hamlet"):
        be = select_backend("auto")
        select_backend("auto")
    chosen = [r.getMessage() for r in caplog.records if "backend=auto" in r.getMessage()]
    assert len(chosen) == 1, caplog.text
    assert f"the {be.name.upper()} backend" in chosen[0]
    # the simulator is never picked on its own: 'auto' means a real device
    assert be.name == (
        "gpu" if cuda_visible() and not os.environ.get("NUMBA_ENABLE_CUDASIM") else "cpu"
    )


def test_device_visibility_is_asked_once_per_process(monkeypatch):
    """The driver reads CUDA_VISIBLE_DEVICES once, when it starts, so the answer is kept: asking
    took 110 us, which backend='auto' (the default) paid on every `aggregate` call."""
    from gpu_hamlet import devices

    asked: list[int] = []
    monkeypatch.setitem(sys.modules, "cupy", None)  # (importing it fails, as without CuPy)
    monkeypatch.setattr(devices, "_driver_device_count", lambda: asked.append(1) or 0)
    devices._visible_devices.cache_clear()
    try:
        assert [devices.cuda_visible() for _ in range(3)] == [False] * 3
        assert asked == [1]
    finally:
        devices._visible_devices.cache_clear()  # (the next caller asks the real driver)


def _select_in_fresh_process(name: str, **env: str) -> subprocess.CompletedProcess:
    """select_backend(name) in a new interpreter (numba.cuda picks simulator or driver once per
    process), with no device visible and the simulator off unless `env` says otherwise."""
    clean = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    clean.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=os.getcwd(), **env)
    code = (
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout)\n"
        "from gpu_hamlet.engine.backend import select_backend\n"
        f"print('chose', select_backend({name!r}).name)"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=clean, capture_output=True, text=True, timeout=120
    )


def test_gpu_without_a_device_fails_with_a_clear_message():
    proc = _select_in_fresh_process("gpu")
    assert proc.returncode != 0, proc.stdout
    assert "GpuHamletError" in proc.stderr
    msg = proc.stderr.splitlines()[-1]
    for words in (
        "backend='gpu'",
        "CUDA device",
        "none is visible",
        "backend='cpu'",
        "NUMBA_ENABLE_CUDASIM=1",
    ):
        assert words in msg, msg


def test_auto_without_a_device_uses_the_cpu_and_says_so():
    proc = _select_in_fresh_process("auto")
    assert proc.returncode == 0, proc.stderr
    assert "backend=auto uses the CPU backend (no CUDA device is visible)" in proc.stdout
    assert proc.stdout.rstrip().endswith("chose cpu")


def test_gpu_under_the_simulator_runs_without_a_device():
    proc = _select_in_fresh_process("gpu", NUMBA_ENABLE_CUDASIM="1")
    assert proc.returncode == 0, proc.stderr
    assert "simulator" in proc.stdout and proc.stdout.rstrip().endswith("chose gpu")


def test_unknown_backend_is_an_error():
    with pytest.raises(ValueError, match="'auto', 'cpu' or 'gpu'"):
        select_backend("tpu")


def test_launches_do_not_grow_with_the_number_of_queries(monkeypatch):
    """The GPU backend gets each kernel step of all queries in one batch: 1 query and 12 queries
    of one shape (different types, filters, windows, groupings) make the same launches."""
    from gpu_hamlet.kernels import backend as gpu

    launches: list[str] = []
    monkeypatch.setattr(
        gpu.Launch,
        "run",
        lambda self, _run=gpu.Launch.run: (launches.append("segment"), _run(self))[1],
    )
    for step in ("_compose", "_reduce"):
        inner = getattr(gpu.GpuBackend, step)
        monkeypatch.setattr(
            gpu.GpuBackend,
            step,
            lambda self, *a, _i=inner, _s=step: (launches.append(_s), _i(self, *a))[1],
        )
    events = events_to_table(
        [
            {
                "time": t,
                "type": "ABCD"[(t * 7) % 4],
                "g": f"g{t % 3}",
                "k": t // 4 % 2,
                "x": t % 5,
                "y": 0.5,
                "s": "u",
            }
            for t in range(240)
        ]
    )
    queries = [
        f"q{i}: RETURN g, COUNT(*), SUM({b}.x) PATTERN SEQ({a}, {b}+) "
        f"WHERE [k] AND {b}.x > {i % 3} GROUPBY g WITHIN {20 + 10 * (i % 2)} s "
        f"SLIDE 10 s"
        for i, (a, b) in enumerate([("A", "B"), ("C", "B"), ("A", "D"), ("C", "D")] * 3)
    ]
    counts = []
    for text in (queries[0], ";\n".join(queries)):
        launches.clear()
        got = gpu_hamlet.aggregate(events, text, backend="gpu", sharing="none", numeric="exact")
        cpu = gpu_hamlet.aggregate(events, text, backend="cpu", sharing="none", numeric="exact")
        assert all(got[n].equals(cpu[n]) and got[n].num_rows for n in cpu)
        counts.append(sorted(launches))
    assert counts[0] == counts[1]


def test_batches_bounded_by_events_give_the_same_tables(monkeypatch):
    """With BATCH_EVENTS = 1 every query runs in a batch of its own: the same tables."""
    import gpu_hamlet.engine.evaluate as engine

    text = OVERFLOW_TEXT + "; alone: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 100 s"
    events = events_to_table(overflow_events())
    whole = gpu_hamlet.aggregate(events, text, backend="gpu", numeric="bigint")
    monkeypatch.setattr(engine, "BATCH_EVENTS", 1)
    alone = gpu_hamlet.aggregate(events, text, backend="gpu", numeric="bigint")
    assert len(whole) == 2 and all(whole[n].num_rows for n in whole)
    assert whole.keys() == alone.keys() and all(whole[n].equals(alone[n]) for n in whole)


ADJACENT_TEXT = """
rise: RETURN COUNT(*), SUM(B.v), MIN(B.v), MAX(B.w) PATTERN SEQ(A, B+, NOT N, C)
      WHERE B.v < NEXT(B).v AND A.g = NEXT(B).g AND B.w != NEXT(C).w GROUPBY g
      WITHIN 8 s SLIDE 4 s;
flat: RETURN COUNT(*), AVG(B.v) PATTERN (A OR B)+ WHERE B.w >= NEXT(A).w WITHIN 6 s
"""


def adjacent_events() -> list[dict]:
    """Events for ADJACENT_TEXT: ties, nulls, NaN and -0.0 among the compared values."""
    import random

    rnd = random.Random(7)
    events = []
    for i in range(60):
        events.append(
            {
                "time": i // 2,
                "type": rnd.choice("AABBBCN"),
                "g": rnd.choice([1, 2]),
                "v": rnd.choice([1, 2, 3, None]),
                "w": rnd.choice([0.5, 1.5, float("nan"), -0.0, 0.0, None]),
            }
        )
    return events


@pytest.mark.parametrize("budget", [None, 4096])
def test_gpu_adjacent_conditions_equal_cpu(budget):
    """NEXT conditions (segment trees, gpu_hamlet/core/adjacency.py) give the CPU's very tables
    in every mode, also when a small device budget cuts the runs into several launches."""
    import pyarrow as pa

    from gpu_hamlet.kernels.backend import GpuBackend

    table = pa.Table.from_pylist(adjacent_events())
    be = GpuBackend(max_device_bytes=budget)
    for numeric in NUMERIC_MODES:
        got = gpu_hamlet.aggregate(table, ADJACENT_TEXT, backend=be, numeric=numeric)
        cpu = gpu_hamlet.aggregate(table, ADJACENT_TEXT, backend="cpu", numeric=numeric)
        assert got["rise"].num_rows > 0 and got["flat"].num_rows > 0
        for name in ("rise", "flat"):  # repr: a MAX may be NaN, which equals() never matches
            assert got[name].schema.equals(cpu[name].schema)
            assert repr(got[name].to_pylist()) == repr(cpu[name].to_pylist()), name


def test_gpu_next_queries_with_shared_bursts_equal_cpu():
    """Macro rows (shared bursts) in the GPU's tree recursion give the CPU's tables."""
    from test_adjacent import SHARED_TEXT, shared_events

    table = shared_events()
    for numeric in NUMERIC_MODES:
        got = gpu_hamlet.aggregate(
            table, SHARED_TEXT, backend="gpu", numeric=numeric, sharing="static"
        )
        cpu = gpu_hamlet.aggregate(
            table, SHARED_TEXT, backend="cpu", numeric=numeric, sharing="static"
        )
        for name in "abcd":
            assert repr(got[name].to_pylist()) == repr(cpu[name].to_pylist()), (numeric, name)


WINDOW_SHARED_TEXT = """
up1: RETURN COUNT(*), SUM(B.v), MAX(B.w) PATTERN SEQ(A, B+) WHERE B.v < NEXT(B).v GROUPBY g
     WITHIN 8 s SLIDE 4 s;
up2: RETURN COUNT(*), MIN(B.v), COUNT(B) PATTERN SEQ(B+, C) WHERE B.v < NEXT(B).v GROUPBY g
     WITHIN 6 s;
up3: RETURN COUNT(*), SUM(B.v), MIN(B.w) PATTERN SEQ(A, B+) WHERE B.v <= NEXT(B).v GROUPBY g
     WITHIN 8 s SLIDE 2 s
"""


@pytest.mark.parametrize("budget", [None, 4096])
def test_gpu_window_shared_bursts_equal_cpu(budget):
    """Bursts shared per window (basis passes and window macro rows,
    gpu_hamlet/engine/window_sharing.py), with up3's ties as event-level snapshots, give the
    CPU's tables, also when a small device budget cuts the runs, and the chains of window macro
    rows with their event snapshots' slots, into several launches."""
    import pyarrow as pa

    from gpu_hamlet.kernels.backend import GpuBackend

    table = pa.Table.from_pylist(adjacent_events())
    be = GpuBackend(max_device_bytes=budget)
    for numeric in NUMERIC_MODES:
        stats = gpu_hamlet.RunStats()
        got = gpu_hamlet.aggregate(
            table, WINDOW_SHARED_TEXT, backend=be, numeric=numeric, sharing="static", stats=stats
        )
        cpu = gpu_hamlet.aggregate(
            table, WINDOW_SHARED_TEXT, backend="cpu", numeric=numeric, sharing="none"
        )
        assert stats.sets[0].shared == stats.sets[0].bursts > 10
        assert stats.sets[0].event_snapshots > 5
        for name in ("up1", "up2", "up3"):
            assert got[name].num_rows > 0
            assert repr(got[name].to_pylist()) == repr(cpu[name].to_pylist()), (numeric, name)


def test_row_sample_kept_share_is_the_same_on_both_backends():
    """`dynamic`'s gate prunes a sample of the rows by the windows the backend's `segments`
    step gives (gpu_hamlet/engine/row_sample.py): the GPU backend's kernel gives the CPU's share,
    over tumbling and sliding windows, with and without filters."""
    from gpu_hamlet.datagen import kleene_stream
    from gpu_hamlet.engine.evaluate import Context
    from gpu_hamlet.engine.options import Options
    from gpu_hamlet.engine.row_sample import RowSample
    from gpu_hamlet.engine.sharing import analyze

    events = kleene_stream(400, seed=5, types=("A", "B", "C", "D"), mean_burst=8.0)
    text = ";".join(
        f"q{i}: RETURN COUNT(*) PATTERN {p}{' WHERE B.x < 4' if i % 2 else ''} {w}"
        for i, (p, w) in enumerate(
            [("SEQ(A, B+, C)", "WITHIN 20 s"), ("SEQ(D, B+)", "WITHIN 40 s SLIDE 10 s"),
             ("SEQ(B+, C)", "WITHIN 15 s")]
        )
    )  # fmt: skip
    shares = []
    for backend in ("cpu", "gpu"):
        ctx = Context.of(events, text, Options(backend, "dynamic", "float", "null", "time", "type"))
        (sset,) = analyze(ctx.runs).sets
        keys = ctx.parts.keys(sset.queries[0].partition_attrs, 0)
        sample = RowSample.of(keys)
        code = ctx.ev.code_of("B")
        shares.append(
            sample.kept_share(sset.queries, code, keys, ctx.plans, ctx.matcher, ctx.be.segments)
        )
    assert 0 < shares[0] < 1 and shares[0] == shares[1]

"""Each GPU kernel step against the CPU backend, on the exact inputs the engine passes.

The engine runs on the CPU backend wrapped in a RecordingBackend; every recorded call is then
replayed on the GPU backend (numba's CUDA simulator without a device) and on the CPU backend, and
the outputs must be identical bit for bit: same recursions, same operation order, same scalar
arithmetic, in all three rings (XFLOAT, MODP, MINREACH), macro rows of shared bursts included.
Segment calls are also replayed as full maps and composed into sliding windows, and window values
summed over runs, so that compose_windows and reduce_sorted see realistic maps whatever windowing
the engine picked.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import cuda

import gpu_hamlet
from cpu_fallback import CpuBackend
from gpu_hamlet.core import recursions, rings
from gpu_hamlet.engine import fusion
from gpu_hamlet.engine.attributes import Attributes
from gpu_hamlet.engine.backend import RecordingBackend
from gpu_hamlet.engine.events import prepare_events
from gpu_hamlet.engine.options import SHARING_MODES
from gpu_hamlet.kernels import GpuBackend
from gpu_hamlet.kernels import backend as gpu_backend_module
from gpu_hamlet.kernels.scan import inclusive_scan
from gpu_hamlet.kernels.weights import device_weights
from gpu_hamlet.query.parser import parse_workload
from gpu_hamlet.query.plan import Channel

pytestmark = pytest.mark.gpu  # the GPU backend's kernels (numba's CUDA simulator without a device)

try:
    from compare import events_to_table
    from test_properties import OVERFLOW_TEXT, burst_events, cases, overflow_events
except ImportError:  # pragma: no cover
    from tests.compare import events_to_table
    from tests.test_properties import OVERFLOW_TEXT, burst_events, cases, overflow_events

CPU = CpuBackend()
GPU = GpuBackend()
#: (slide, size) of windows in segment units for the composition replays.
WINDOWINGS = ((1, 1), (1, 3), (2, 5))


def record(events, text: str, **options) -> list[tuple[str, tuple]]:
    rec = RecordingBackend(CpuBackend())
    gpu_hamlet.aggregate(events_to_table(events), text, backend=rec, **options)
    return rec.calls


def same(a, b, what: str) -> None:
    """Equal shapes, dtypes and bits (float NaNs and signed zeros included); None alike."""
    if a is None or b is None:
        assert a is b, what
        return
    if isinstance(a, tuple):
        assert len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{what}[{i}]")
        return
    assert a.dtype == b.dtype and a.shape == b.shape, (
        f"{what}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
    )
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), f"{what}:\n{a}\nvs\n{b}"


def run(backend, step: str, args: tuple):
    """One step on `backend` with fresh copies of the arguments; a segment call's snapshots,
    written into its `snap` argument, are returned with its result."""
    args = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
    out = getattr(backend, step)(*args)
    return out + (args[11],) if step == "segment_maps" else out


def replay(calls, gpu: GpuBackend = GPU) -> set[str]:
    """Every recorded call, and the derived composition and reduction calls, on both backends.
    Returns the rings seen."""
    rings = set()
    for step, args in calls:
        if step in ("burst_ids", "segments"):  # no ring
            same(run(gpu, step, args), run(CPU, step, args), step)
            continue
        rings.add(args[0])
        same(run(gpu, step, args), run(CPU, step, args), f"{step} ({args[0]})")
        if step == "segment_maps":
            full = args[:10] + (True,) + args[11:]
            maps, run_pid, run_seg, _ = run(CPU, step, full)
            same(
                run(gpu, step, full), (maps, run_pid, run_seg, _), f"full segment_maps ({args[0]})"
            )
            k = args[9].k
            finals = np.arange(k, maps.shape[1] - 1, k + 1, dtype=np.int64)
            for a, n in WINDOWINGS:
                comp = (args[0], maps, run_pid, run_seg, a, n, finals, args[-1])
                vals = run(CPU, "compose_windows", comp)
                same(
                    run(gpu, "compose_windows", comp), vals, f"compose_windows {a}/{n} ({args[0]})"
                )
                starts = np.arange(0, vals[0].shape[0], 2, dtype=np.int64)
                red = (args[0], vals[0], starts, args[-1])
                same(
                    run(gpu, "reduce_sorted", red),
                    run(CPU, "reduce_sorted", red),
                    f"reduce_sorted ({args[0]})",
                )
    return rings


KERNEL_PROPERTY = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@KERNEL_PROPERTY
@given(
    case=cases(max_queries=3),
    numeric=st.sampled_from(["exact", "bigint", "float"]),
    sharing=st.sampled_from(SHARING_MODES),
)
def test_every_kernel_step_equals_the_cpu_backend(case, numeric, sharing):
    text, _, events = case
    replay(record(events, text, numeric=numeric, sharing=sharing))


SHARED_TEXT = (
    "RETURN COUNT(*), SUM(B.x), MIN(B.x), MAX(B.y) PATTERN SEQ(A, B+) WHERE [g] "
    "GROUPBY k WITHIN 4 s SLIDE 2 s; "
    "RETURN COUNT(B), AVG(B.y) PATTERN SEQ(A, B+, C) WHERE [g] GROUPBY k WITHIN 6 s SLIDE 2 s"
)


def shared_events() -> list[dict]:
    evs = burst_events(2, [[1], [2, -3], [4]], t0=0) + burst_events(1, [[5], [6], [-1, 2]], t0=3)
    evs += [dict(e, g="g2", k=1, time=e["time"] + 1) for e in evs]
    evs += [
        dict(time=t, type="C", g=g, k=k, x=t, y=t / 2, s="u")
        for t, g, k in ((3, "g1", 0), (5, "g2", 1), (7, "g1", 0), (9, "g2", 1))
    ]
    return evs


def test_fixed_workload_covers_every_ring_macro_rows_and_both_backend_steps():
    calls = record(shared_events(), SHARED_TEXT, numeric="exact", sharing="static")
    steps = {step for step, _ in calls}
    assert {"segments", "segment_maps", "burst_ids", "burst_coefficients"} <= steps
    assert any((args[8] >= 0).any() for step, args in calls if step == "segment_maps"), (
        "no macro row: the shared path is not exercised"
    )
    assert replay(calls) == {"xfloat", "modp", "minreach"}


def test_bigint_lanes_on_every_step_equal_the_cpu_backend():
    """bigint's 32-prime lanes ('modps'), which the engine takes from MODPS_FROM primes on, on
    the fixed workload's every step (macro rows, windows, groups) even with small counts."""
    with mock.patch.object(rings, "MODPS_FROM", 1):
        calls = record(shared_events(), SHARED_TEXT, numeric="bigint", sharing="static")
    assert replay(calls) == {"xfloat", "modps", "minreach"}


def test_exact_lanes_on_every_step_equal_the_cpu_backend():
    """The exact mode's 8-prime lanes ('modps8'), which it takes from MODPS8_FROM primes on,
    on the fixed workload's every step even with counts of one prime."""
    with mock.patch.object(rings, "MODPS8_FROM", 1):
        calls = record(shared_events(), SHARED_TEXT, numeric="exact", sharing="static")
    assert replay(calls) == {"xfloat", "modps8", "minreach"}


def test_bigint_lanes_on_next_conditions_and_event_snapshots_equal_the_cpu_backend():
    """The tree recursion in 'modps' lanes: per-window sharing with basis passes, tie readers
    and event-level snapshots (test_adjacent.py's TIES_TEXT), replayed on the device kernels."""
    import random

    from test_adjacent import TIES_TEXT

    rnd = random.Random(5)
    events = [
        {"time": rnd.randint(0, 12), "type": rnd.choice("ABBBBC"), "g": "u", "k": 0,
         "x": rnd.choice([None, 0, 1, 1, 2, 2, 3]), "y": rnd.randint(-4, 4) / 2, "s": "u"}
        for _ in range(30)
    ]  # fmt: skip
    with mock.patch.object(rings, "MODPS_FROM", 1):
        calls = record(events, TIES_TEXT, numeric="bigint", sharing="static")
    steps = [args for step, args in calls if step == "adjacent_results"]
    assert any((a[1].wesnap >= 0).any() for a in steps), "no event snapshot"
    assert "modps" in replay(calls)


def test_chunked_launches_give_the_same_results():
    """A device budget of one byte puts every run, window and burst in a launch of its own."""
    calls = record(shared_events(), SHARED_TEXT, numeric="exact", sharing="static")
    replay(calls, GpuBackend(max_device_bytes=1))


def test_long_bursts_renormalise_xfloat_like_the_cpu():
    """Counts of 2^300 and beyond take XFLOAT's renormalising paths (mantissas past 2^200)."""
    events = burst_events(1, [[1]] * 300)
    calls = record(
        events,
        "RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+) WITHIN 1 h",
        numeric="float",
        sharing="none",
    )
    calls += record(
        events + burst_events(1, [[2]] * 300),
        "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 h; "
        "RETURN SUM(B.x) PATTERN SEQ(A, B+) WITHIN 1 h",
        numeric="float",
        sharing="static",
    )
    maps = run(CPU, *next(c for c in calls if c[0] == "segment_maps"))[0]
    assert np.abs(maps[..., 1]).max() > 200  # renormalised: the exponent lane took over
    replay(calls)


@pytest.mark.parametrize("numeric", ["exact", "bigint"])
def test_decimal38_overflow_fixture(numeric):
    """The 160-event burst of the overflow tests: residues of many primes (bigint) and the
    float bound that detects overflow, bit for bit."""
    calls = record(
        overflow_events(), OVERFLOW_TEXT, numeric=numeric, sharing="static", on_overflow="null"
    )
    # bigint's 6 primes run in 8-prime lanes (its 32 start at 24); exact leaves the counts it
    # knows are beyond decimal(38) out of the bound, and needs one prime
    assert replay(calls) >= {"xfloat", "modps8" if numeric == "bigint" else "modp"}


def _copied(args: tuple) -> tuple:
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


@KERNEL_PROPERTY
@given(case=cases(max_queries=4), numeric=st.sampled_from(["exact", "float"]), full=st.booleans())
def test_batched_steps_equal_call_by_call(case, numeric, full):
    text, _, events = case
    batched_equals_single(record(events, text, numeric=numeric, sharing="none"), full)


def test_batched_steps_on_the_fixed_workload():
    calls = record(
        shared_events(),
        SHARED_TEXT + "; " + SHARED_TEXT.replace("B+", "B"),
        numeric="exact",
        sharing="none",
    )
    assert batched_equals_single(calls, True) >= 8


def test_batched_calls_with_and_without_snapshot_rows():
    """A call passes no snapshot rows where nobody reads them (`apply_event`); batched with
    calls of its shape that do, each call's maps and snapshots still equal the CPU backend's
    for that call alone."""
    calls = record(shared_events(), SHARED_TEXT, numeric="float", sharing="static")
    macro = next(a for s, a in calls if s == "segment_maps" and (a[8] >= 0).any())
    batch = []
    for rows in (macro[1].shape[0], 0, macro[1].shape[0]):
        snap = np.zeros((rows, *macro[11].shape[1:]), macro[11].dtype)
        batch.append(("segment_maps", macro[:11] + (snap,) + macro[12:]))
    assert batched_equals_single(batch, False) == 3


def batched_equals_single(calls: list, full: bool) -> int:
    """All recorded segment calls in one `segment_maps_many` (queries of one shape share
    launches whatever their templates), then their compositions and group sums batched too:
    each result equals the CPU backend's for that call alone. Returns the number of calls."""
    segs = [
        _copied(args[:10] + (full or args[10],) + args[11:])
        for step, args in calls
        if step == "segment_maps"
    ]
    want = [run(CPU, "segment_maps", args) for args in segs]
    snaps = [args[11] for args in segs]
    got = GPU.segment_maps_many(segs)
    for g, w, s, i in zip(got, want, snaps, range(len(segs))):
        same(g + (s,), w, f"batched segment_maps #{i}")
    comps = [
        (
            args[0],
            maps,
            rp,
            rs,
            1,
            3,
            np.arange(args[9].k, maps.shape[1] - 1, args[9].k + 1, dtype=np.int64),
            args[-1],
        )
        for args, (maps, rp, rs, _) in zip(segs, want)
        if args[10]
    ]
    vals = GPU.compose_windows_many(comps)
    for g, c in zip(vals, comps):
        same(g, run(CPU, "compose_windows", c), "batched compose_windows")
    reds = [
        (c[0], v[0], np.arange(0, v[0].shape[0], 2, dtype=np.int64), c[-1])
        for c, v in zip(comps, vals)
    ]
    for g, r in zip(GPU.reduce_sorted_many(reds), reds):
        same(g, run(CPU, "reduce_sorted", r), "batched reduce_sorted")
    return len(segs)


@settings(max_examples=20, deadline=None)
@given(x=st.lists(st.integers(-(2**40), 2**40), max_size=70), block=st.sampled_from([2, 4, 256]))
def test_device_scan_is_cumsum(x, block):
    """Blocks of 2 and 4 make the 70 elements scan through three and four levels of block totals."""
    a = np.asarray(x, np.int64)
    got = inclusive_scan(cuda.to_device(a), block).copy_to_host()
    assert np.array_equal(got, np.cumsum(a))


@st.composite
def set_streams(draw):
    """A sharable set's stream as burst detection sees it: sorted by partition and time, with
    repeated times, pane changes and Kleene and other events mixed."""
    n = draw(st.integers(0, 60))
    pid = np.sort(np.asarray(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), np.int64))
    t = np.asarray(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)), np.int64)
    t = t[np.lexsort((t, pid))]
    is_e = np.asarray(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    return pid, t // 5, t.astype(np.float64), is_e


@settings(max_examples=30, deadline=None)
@given(stream=set_streams(), budget=st.sampled_from([None, 1, 600]))
def test_burst_ids_equal_the_cpu_backend(stream, budget):
    """Whole streams, one partition per launch (a 1-byte budget) and a few partitions per launch."""
    same(
        GpuBackend(max_device_bytes=budget).burst_ids(*stream), CPU.burst_ids(*stream), "burst_ids"
    )


@st.composite
def segment_calls(draw):
    """A few segments calls as queries make them: events sorted by partition and time (negative
    times included), integer or float times, the same or different pane widths."""
    is_float = draw(st.booleans())
    calls = []
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(0, 40))
        pid = np.sort(
            np.asarray(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), np.int64)
        )
        t = np.asarray(draw(st.lists(st.integers(-20, 20), min_size=n, max_size=n)), np.int64)
        t = t[np.lexsort((t, pid))]
        width = draw(st.sampled_from([1, 3, 7]))
        if is_float:
            calls.append((pid, t * 0.7, width * 0.7))
        else:
            calls.append((pid, t, width))
    return calls


@settings(max_examples=20, deadline=None)
@given(calls=segment_calls(), budget=st.sampled_from([None, 300]))
def test_segments_equal_the_cpu_backend(calls, budget):
    """Several calls in one batch (runs start at each call's first event, even where the
    previous call ends in the same partition and pane), whole or in chunks of 5 events."""
    got = GpuBackend(max_device_bytes=budget).segments_many(calls)
    for i, (c, g) in enumerate(zip(calls, got)):
        same(g, CPU.segments(*c), f"segments of call {i}")


@pytest.mark.parametrize("groups", [1, 2, 3])
def test_burst_pieces_fold_alike_on_both_backends(monkeypatch, groups):
    """Bursts cut into pieces of 1 to 3 timestamp groups: the device's pieces and folds equal the
    CPU's bit for bit, and in the exact ring the pieces change nothing."""
    calls = [
        c
        for c in record(shared_events(), SHARED_TEXT, numeric="exact", sharing="static")
        if c[0] == "burst_coefficients"
    ]
    whole = [run(CPU, *c) for c in calls]
    monkeypatch.setattr(recursions, "PIECE_GROUPS", groups)
    replay(calls)
    for (step, args), ref in zip(calls, whole):
        if args[0] == "modp":
            same(run(CPU, step, args), ref, "modp coefficients in pieces")


WEIGHT_CHANNELS = {  # per ring, the channel kinds it weighs with
    "xfloat": ("count", "count_e", "sum", "abs", "count_valid"),
    "modp": ("count", "count_e", "sum", "count_valid"),
    "modps8": ("count", "count_e", "sum", "count_valid"),
    "modps": ("count", "count_e", "sum", "count_valid"),
    "minreach": ("count", "min", "max"),
}


@settings(KERNEL_PROPERTY, max_examples=100)
@given(data=st.data(), ring=st.sampled_from(sorted(WEIGHT_CHANNELS)))
def test_device_weights_equal_the_host_weights(data, ring):
    """Weights built on the device from the columns there (several calls side by side, each a
    slice of its events, with its own channels) equal EventWeights.host() bit for bit, nulls
    (no weight, 0 for sums) and int64 extremes (ranked, not read in place) included."""
    n = data.draw(st.integers(1, 40))
    values = st.floats(-1e6, 1e6) | st.floats(allow_nan=False) | st.sampled_from([0.0, -0.0, -1.5])
    int64s = st.integers(-(2**62), 2**62) | st.sampled_from([2**63 - 1, -(2**63)])

    def column(elements: st.SearchStrategy) -> list:
        nulls = data.draw(st.booleans())
        return data.draw(
            st.lists(elements | st.none() if nulls else elements, min_size=n, max_size=n)
        )

    table = pa.table(
        {
            "type": pa.array(["A", "B"] * n)[:n],
            "time": pa.array(np.arange(n)),
            "x": pa.array(column(values), pa.float64()),
            "y": pa.array(column(int64s), pa.int64()),
            "z": pa.array(column(st.integers(-(2**31), 2**31 - 1)), pa.int32()),
        }
    )
    wl = parse_workload("q: RETURN SUM(B.x), SUM(B.y), SUM(B.z) PATTERN SEQ(A, B+) WITHIN 1 h")
    attrs = Attributes(prepare_events(table, wl, "time", "type", True))
    residues = ring != "xfloat" and ring != "minreach"
    attr_names = ("y", "z") if residues else ("x", "y", "z")  # residues of integers
    channel = st.builds(
        lambda kind, t, a: Channel(kind, t, a if kind != "count_e" else None),
        st.sampled_from(WEIGHT_CHANNELS[ring]),
        st.sampled_from(["A", "B"]),
        st.sampled_from(attr_names),
    )
    nch = data.draw(st.integers(1, 4))
    parts = []
    for _ in range(data.draw(st.integers(1, 3))):
        chs = tuple(
            Channel("count") if c.kind == "count" else c
            for c in data.draw(st.lists(channel, min_size=nch, max_size=nch))
        )
        m = data.draw(st.integers(0, 12))
        rows = np.asarray(
            data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), np.int64
        )
        labels = np.asarray(
            data.draw(st.lists(st.sampled_from([0, 1, 1, -1]), min_size=m, max_size=m)), np.int64
        )
        param = 1_000_000_007 if ring == "modp" else 1  # a prime, or a lane ring's second pass
        w = attrs.weights(ring, chs, rows, labels, {"A": 0, "B": 1}, param)
        a = data.draw(st.integers(0, m))
        parts.append((w, a, data.draw(st.integers(a, m))))
    host = np.concatenate([w.host()[:, a:b] for w, a, b in parts], axis=1)
    same(device_weights(parts).copy_to_host(), host, f"{ring} weights")


def test_device_weights_cache_no_later_lane_pass():
    """A lane ring's passes past those the host keeps (KEPT_LANES) go to the device for the
    launch's rows alone and stay out of the call's device columns, and weigh as on the host:
    each pass of a bigint call of many passes held its lanes of every event there."""
    n = 40
    table = pa.table(
        {
            "type": pa.array(["A", "B"] * (n // 2)),
            "time": pa.array(np.arange(n)),
            "y": pa.array(np.arange(n) * 7 - 100, pa.int64()),
        }
    )
    wl = parse_workload("q: RETURN SUM(B.y) PATTERN SEQ(A, B+) WITHIN 1 h")
    attrs = Attributes(prepare_events(table, wl, "time", "type", True))
    chs = (Channel("count"), Channel("sum", "B", "y"))
    rows = np.array([1, 3, 5, 31], np.int64)
    labels = np.array([1, 1, 0, 1], np.int64)
    for p in (0, 1, 2):
        w = attrs.weights("modps", chs, rows, labels, {"A": 0, "B": 1}, p)
        same(device_weights([(w, 1, 4)]).copy_to_host(), w.host()[:, 1:4], f"pass {p}")
    assert [key[2] for key in attrs.device] == [0], "only the kept pass is a device column"


def test_engine_builds_weights_on_the_device_in_one_launch_per_column(monkeypatch):
    """The engine hands the GPU backend described weights: several queries' calls are built in
    one device_weights call (not one per query), in chunks of one run too, and every result
    equals the CPU backend's."""
    seen = []
    build = gpu_backend_module.device_weights
    monkeypatch.setattr(fusion, "FUSE_ROWS", -1)  # (queries of one shape would run as one)
    monkeypatch.setattr(
        gpu_backend_module, "device_weights", lambda parts: seen.append(len(parts)) or build(parts)
    )
    table = events_to_table(shared_events())
    text = SHARED_TEXT + "; " + SHARED_TEXT.replace("SEQ(A, B+)", "SEQ(C, B+)")
    for numeric in ("exact", "float"):
        cpu = gpu_hamlet.aggregate(table, text, backend="cpu", numeric=numeric, sharing="none")
        for be in (GpuBackend(), GpuBackend(max_device_bytes=1)):
            out = gpu_hamlet.aggregate(table, text, backend=be, numeric=numeric, sharing="none")
            assert all(out[q].equals(cpu[q]) for q in cpu)
    assert max(seen) >= 2, "every device_weights call held one query"

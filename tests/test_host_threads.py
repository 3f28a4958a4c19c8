"""Host work on threads (gpu_hamlet/host_threads.py) and the steps that use it: the type column
encoded in slices and the used columns filtered give what one thread gives
(gpu_hamlet/engine/events.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import gpu_hamlet
from gpu_hamlet import host_threads
from gpu_hamlet.engine import events
from gpu_hamlet.query.parser import parse_workload


def test_cpu_threads_reads_omp_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert host_threads.cpu_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "none")
    assert host_threads.cpu_threads() >= 1


def test_host_map_keeps_the_order_and_runs_in_this_thread_when_one_would_do() -> None:
    assert host_threads.host_map(lambda x: x * x, range(20), threads=4) == [
        x * x for x in range(20)
    ]
    where: list[str] = []
    host_threads.host_map(lambda x: where.append(threading.current_thread().name), [1, 2], 1)
    assert where == [threading.current_thread().name] * 2
    host_threads.host_map(lambda x: where.append(threading.current_thread().name), [1, 2, 3], 2)
    assert all(name.startswith("gpu-hamlet-cpu") for name in where[2:])
    del where[:]
    small = host_threads.PARALLEL_ROWS - 1  # work over few rows: not worth a handover
    host_threads.host_map(lambda x: where.append(threading.current_thread().name), [1, 2], 2, small)
    assert where == [threading.current_thread().name] * 2


@pytest.mark.parametrize("threads", [2, 3, 7])
def test_type_column_encoded_in_slices_equals_one_encoding(
    monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    monkeypatch.setattr(events, "ENCODE_SLICE", 10)
    monkeypatch.setattr(events, "cpu_threads", lambda: threads)
    rng = np.random.default_rng(threads)
    names = np.asarray(["A", "B", "C", "D", "E"])
    # Types first seen late in the column (E only in the last rows) keep their place.
    values = np.r_[names[rng.integers(0, 2, 60)], names[rng.integers(0, 5, 47)]].tolist()
    col = pa.chunked_array([pa.array(values[:30]), pa.array(values[30:])])
    got, want = events._encoded(col), pc.dictionary_encode(col).combine_chunks()
    assert got.dictionary.equals(want.dictionary)
    assert got.indices.equals(want.indices)


def test_kept_counts_rows_and_codes_in_one_pass() -> None:
    idx = np.asarray([0, 2, 1, 2, 2, 0, 1], np.int32)
    count, rows, codes = events._kept(idx, np.asarray([True, False, True]))
    assert count.tolist() == [2, 2, 3]
    assert rows.tolist() == [0, 1, 3, 4, 5]  # the last row (code 1, not used) is not kept
    assert codes.tolist() == [0, 2, 2, 2, 0]


def test_prepared_type_column_is_the_kept_codes_over_the_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(events, "ENCODE_SLICE", 4)
    monkeypatch.setattr(events, "cpu_threads", lambda: 2)
    table = pa.table(
        {
            "type": ["A", "X", "B", "A", "X", "B", "A", "B", "X", "A"],
            "time": pa.array(range(10), pa.timestamp("ms")),
            "v": pa.array([1.0, 2.0, None, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]),
        }
    )
    wl = parse_workload("q: RETURN COUNT(*), SUM(B.v) PATTERN SEQ(A, B) WITHIN 5 ms")
    ev = events.prepare_events(table, wl, "time", "type")
    kept = table.filter(pc.not_equal(table.column("type"), "X"))
    assert ev.table.column_names == ["time", "type", "v"]
    assert ev.table.column("type").cast(pa.string()).equals(kept.column("type"))
    assert ev.table.column("v").equals(kept.column("v"))
    assert ev.table.schema.field("v").nullable
    assert [ev.type_names[c] for c in ev.type_codes] == kept.column("type").to_pylist()
    # The prepared table is itself valid input (pane summaries prepare a slice of it again).
    assert gpu_hamlet.aggregate(ev.table, wl)["q"].equals(gpu_hamlet.aggregate(table, wl)["q"])


def test_host_map_in_a_pool_thread_runs_there() -> None:
    """A host_map inside a function host_map runs on the pool (the CPU backend's kernels
    inside a query built on a thread) runs in that thread: waiting on the pool could wait for
    ever once every pool thread waits."""
    inner = host_threads.host_map(
        lambda x: host_threads.host_map(lambda y: threading.current_thread().name, [x, x], 2),
        range(4),
        2,
    )
    assert all(len(set(names)) == 1 for names in inner)


def test_a_cache_shared_by_threads_is_made_once() -> None:
    """The caches of SharedBursts and SortedKeys (`host_threads.Once`) are made once when
    queries' rows are built on several threads."""
    once, cache, made = host_threads.Once(), {}, []
    start = threading.Barrier(4)

    def make() -> int:
        made.append(1)
        return 7

    def one(_: int) -> int:
        start.wait()
        return once.get(cache, "k", make)

    assert host_threads.host_map(one, range(4), 4) == [7] * 4
    assert made == [1]


def test_a_cache_makes_different_entries_at_once() -> None:
    """Two threads make two entries of a cache at the same time (two filter groups' streams of
    SharedBursts): each make waits for the other to start, which one lock for the whole cache
    would never let happen (the barrier then times out)."""
    once, cache = host_threads.Once(), {}
    both = threading.Barrier(2, timeout=10)

    def one(key: int) -> int:
        def make() -> int:
            both.wait()  # raises BrokenBarrierError if the other make cannot start
            return key * 10

        return once.get(cache, key, make)

    assert host_threads.host_map(one, [1, 2], 2) == [10, 20]
    assert cache == {1: 10, 2: 20}


@pytest.mark.parametrize("sharing", ["none", "hamlet", "dynamic"])
def test_results_do_not_depend_on_the_host_threads(
    monkeypatch: pytest.MonkeyPatch, sharing: str
) -> None:
    """Queries' rows built on 1, 2 or 3 threads, with the sort and type encoding in slices: the
    same tables in every numeric mode."""
    from gpu_hamlet import datagen
    from gpu_hamlet.engine import partitions

    events_ = datagen.ridesharing(30_000, seed=5)
    text = datagen.kleene_sharing_workload(
        12,
        "Travel",
        ("Request", "Pickup", "Dropoff", "Cancel"),
        returns="district, COUNT(*), AVG(Travel.speed)",
        where=["[driver]"],
        groupby="district",
        within="10 min",
    )
    monkeypatch.setattr(events, "ENCODE_SLICE", 1_000)
    monkeypatch.setattr(partitions, "SORT_SLICE", 1_000)
    monkeypatch.setattr(host_threads, "PARALLEL_ROWS", 1_000)
    monkeypatch.setattr(host_threads, "SUBMIT_ROWS", 10)
    for numeric in ("float", "exact"):
        tables = []
        for threads in ("1", "2", "3"):
            monkeypatch.setenv("OMP_NUM_THREADS", threads)
            tables.append(
                gpu_hamlet.aggregate(
                    events_, text, sharing=sharing, numeric=numeric, on_overflow="null"
                )
            )
        assert sum(t.num_rows > 0 for t in tables[0].values()) >= 3  # tables with trends
        for name, table in tables[0].items():
            assert all(t[name].equals(table) for t in tables[1:]), (name, numeric)


def test_host_submit_starts_calls_only_where_they_pay() -> None:
    assert host_threads.host_submit(len, ([1],), 1, 10**6) is None  # one thread
    assert host_threads.host_submit(len, ([1],), 2, host_threads.SUBMIT_ROWS - 1) is None
    future = host_threads.host_submit(len, ([1, 2],), 2, host_threads.SUBMIT_ROWS)
    assert future is not None and future.result() == 2
    inner = host_threads.host_submit(
        lambda: host_threads.host_submit(len, ([1],), 2, 10**6), (), 2, 10**6
    )
    assert inner is not None and inner.result() is None  # in a pool thread: not again


class _Started:
    """A backend whose `double` calls start on the pool (all but those of 0) and whose `inc`
    calls never do."""

    def double(self, x: int) -> int:
        return 2 * x

    def inc(self, x: int) -> int:
        if x < 0:
            raise ValueError("negative")
        return x + 1

    def submit(self, step: str, args: tuple):
        if step != "double" or args[0] == 0:
            return None
        return host_threads.host_submit(getattr(self, step), args, 2, 10**6)


def _steps(x: int):
    for _ in range(3):
        x = yield ("double", (x,))
        x = yield ("inc", (x,))
    return x


def test_drive_with_started_calls_equals_drive_in_rounds() -> None:
    """`drive` over a backend that starts calls as they come gives what its rounds give."""
    from gpu_hamlet.engine.backend import drive

    class Rounds(_Started):
        submit = None  # type: ignore[assignment]

    for be in (_Started(), Rounds()):
        got = drive({str(x): _steps(x) for x in range(20)}, be)
        assert got == {str(x): ((x * 2 + 1) * 2 + 1) * 2 + 1 for x in range(20)}
    with pytest.raises(ValueError, match="negative"):
        drive({"a": _steps(-5), "b": _steps(3)}, _Started())


def test_window_runs_are_segmented_once_for_all_threads() -> None:
    """The queries' rows are built on the host's threads and each asks for its windows' runs
    (`SortedKeys.window_runs`): one segmentation of the call's rows serves them all. Letting
    each thread make its own made `none` 2.6x slower on a 16-core GPU machine (25 queries over
    bursts of 50: sixteen segmentations on the device at once)."""
    from gpu_hamlet.engine import partitions

    n = 50_000
    pid = np.repeat(np.arange(100), n // 100)
    keys = partitions.SortedKeys(np.arange(n), pid, pid, np.arange(n), pid % 3)
    calls = []

    def segments(p: np.ndarray, t: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        calls.append(width)
        change = np.r_[True, (p[1:] != p[:-1]) | (t[1:] // width != t[:-1] // width)]
        return t // width, np.flatnonzero(change)

    start = threading.Barrier(8)
    got: list[np.ndarray] = []

    def ask() -> None:
        start.wait()
        got.append(keys.window_runs(60, segments))

    workers = [threading.Thread(target=ask) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert calls == [60] and len({id(g) for g in got}) == 1
    direct = partitions.window_run_ids(pid, np.arange(n), 60, segments)
    assert np.array_equal(got[0], direct)


def test_every_compiled_host_step_releases_the_gil() -> None:
    """Queries' steps run on the host's threads side by side (`host_map`): a compiled step that
    kept the GIL would stop the others' Python meanwhile, so every `@njit` says nogil."""
    root = Path(gpu_hamlet.__file__).resolve().parent.parent
    held = [
        f"{path.relative_to(root)}:{n}"
        for pkg in ("gpu_hamlet", "cpu_fallback")
        for path in sorted((root / pkg).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if line.lstrip().startswith("@njit") and "nogil=True" not in line
    ]
    assert (
        sum(
            line.lstrip().startswith("@njit")
            for path in (root / "gpu_hamlet").rglob("*.py")
            for line in path.read_text().splitlines()
        )
        > 20
    )  # (the scan sees the kernels)
    assert held == []


def _aggregate_in_child(events: pa.Table, text: str, queue) -> None:  # noqa: ANN001
    queue.put(gpu_hamlet.aggregate(events, text, backend="cpu")["q"].to_pylist())


def test_a_child_forked_after_the_pool_started_aggregates() -> None:
    """A process forked after the engine's pool started (multiprocessing's default on Linux
    before Python 3.14) inherits the pool but none of its threads: its first call handed to the
    pool waited for ever. The child's pool is a new one."""
    import multiprocessing

    events = pa.table({"time": np.arange(40), "type": ["A", "B", "B", "C"] * 10})
    text = "q: RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 10 s"
    host_threads.host_map(lambda x: x, [1, 2], 2)  # (the pool has started its threads)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_aggregate_in_child, args=(events, text, queue))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(host_threads, "SUBMIT_ROWS", 0)  # (every kernel call handed to the pool)
        mp.setenv("OMP_NUM_THREADS", "2")
        child.start()
        child.join(60)
    alive = child.is_alive()
    child.kill()
    assert not alive, "the forked child's call never ended"
    assert (
        queue.get(timeout=10) == gpu_hamlet.aggregate(events, text, backend="cpu")["q"].to_pylist()
    )

"""Host work on threads (gpu_hamlet/host_threads.py) and the steps that use it: the type column
encoded in slices and the used columns filtered give what one thread gives
(gpu_hamlet/engine/events.py)."""

from __future__ import annotations

import threading

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


def test_kept_counts_masks_and_codes_in_one_pass() -> None:
    idx = np.asarray([0, 2, 1, 2, 2, 0], np.int32)
    count, keep, codes = events._kept(idx, np.asarray([True, False, True]))
    assert count.tolist() == [2, 1, 3]
    assert keep.tolist() == [True, True, False, True, True, True]
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

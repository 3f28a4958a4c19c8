"""Tests of the stream generators and loaders (gpu_hamlet.datagen)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_hamlet import datagen

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is absent")

RIDESHARING_SCHEMA = pa.schema(
    [
        ("type", pa.string()),
        ("time", pa.timestamp("us")),
        ("driver", pa.int64()),
        ("rider", pa.int64()),
        ("district", pa.int64()),
        ("request_type", pa.string()),
        ("duration", pa.float64()),
        ("price", pa.float64()),
        ("speed", pa.float64()),
    ]
)
KLEENE_SCHEMA = pa.schema(
    [
        ("type", pa.string()),
        ("time", pa.int64()),
        ("g", pa.int64()),
        ("x", pa.int64()),
        ("y", pa.float64()),
    ]
)
STOCK_SCHEMA = pa.schema(
    [("type", pa.string()), ("time", pa.int64()), ("price", pa.float64()), ("volume", pa.int64())]
)


def _times(table: pa.Table) -> np.ndarray:
    return table["time"].cast(pa.int64()).to_numpy()


def _non_decreasing(table: pa.Table) -> bool:
    return bool(np.all(np.diff(_times(table)) >= 0))


# ---------------------------------------------------------------------------------- ridesharing


def test_ridesharing_schema_rows_and_order():
    t = datagen.ridesharing(20_000, seed=3)
    assert t.schema == RIDESHARING_SCHEMA
    assert t.num_rows == 20_000
    assert _non_decreasing(t)
    for col in t.columns:
        assert col.null_count == 0


def test_ridesharing_deterministic_per_seed():
    a = datagen.ridesharing(5_000, seed=11)
    b = datagen.ridesharing(5_000, seed=11)
    c = datagen.ridesharing(5_000, seed=12)
    assert a.equals(b)
    assert not a.equals(c)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000])
def test_ridesharing_exact_row_counts(n):
    t = datagen.ridesharing(n, seed=1)
    assert t.num_rows == n
    assert t.schema == RIDESHARING_SCHEMA


def test_ridesharing_types_and_values():
    t = datagen.ridesharing(50_000, seed=0, n_districts=7, n_drivers=50, n_riders=80)
    assert len(datagen.RIDESHARING_TYPES) == 20
    for name in ("Request", "Pickup", "Travel", "Dropoff", "Cancel"):
        assert name in datagen.RIDESHARING_TYPES
    counts = {d["values"]: d["counts"] for d in pc.value_counts(t["type"]).to_pylist()}
    assert set(counts) == set(datagen.RIDESHARING_TYPES)
    assert max(counts, key=counts.get) == "Travel"
    assert set(pc.unique(t["request_type"]).to_pylist()) == set(datagen.REQUEST_TYPES)
    for col, hi in (("district", 7), ("driver", 50), ("rider", 80)):
        v = t[col].to_numpy()
        assert v.min() >= 0 and v.max() < hi
    assert pc.min(t["duration"]).as_py() >= 0
    assert pc.min(t["price"]).as_py() > 0
    assert pc.min(t["speed"]).as_py() >= 0
    travel = pc.filter(t["speed"], pc.equal(t["type"], "Travel")).to_numpy()
    assert 20 < travel.mean() < 45


def test_ridesharing_rate_and_start():
    n, epm = 60_000, 3000.0
    t = datagen.ridesharing(n, seed=5, events_per_minute=epm, start="2026-03-01")
    times = t["time"].to_numpy()
    assert times[0] == np.datetime64("2026-03-01T00:00:00", "us")
    minutes = (times[-1] - times[0]) / np.timedelta64(1, "m")
    assert n / minutes == pytest.approx(epm, rel=0.03)


def test_ridesharing_burstiness_grows_travel_runs():
    runs = [
        datagen.mean_run_length(datagen.ridesharing(50_000, seed=2, burstiness=b)["type"], "Travel")
        for b in (0.0, 0.3, 0.7)
    ]
    assert runs[0] < 1.6  # independent draws: P(Travel) = 0.25, expected run length 1/(1-0.25)
    assert runs[0] < runs[1] < runs[2]
    assert runs[2] > 5.0


def test_ridesharing_bursts_share_trip_attributes():
    t = datagen.ridesharing(20_000, seed=4, burstiness=1.0)
    types = t["type"].to_numpy(zero_copy_only=False)
    driver = t["driver"].to_numpy()
    same_type = types[1:] == types[:-1]
    # In a fully bursty stream most consecutive pairs are inside one burst, thus one driver.
    assert np.mean(driver[1:][same_type] == driver[:-1][same_type]) > 0.9


def test_ridesharing_rejects_bad_arguments():
    with pytest.raises(ValueError):
        datagen.ridesharing(10, burstiness=1.5)
    with pytest.raises(ValueError):
        datagen.ridesharing(-1)
    with pytest.raises(ValueError):
        datagen.ridesharing(10, events_per_minute=0)


# -------------------------------------------------------------------------------- kleene stream


def test_kleene_stream_schema_and_determinism():
    a = datagen.kleene_stream(10_000, seed=7, n_groups=4, duplicate_time_fraction=0.2)
    assert a.schema == KLEENE_SCHEMA
    assert a.num_rows == 10_000
    assert _non_decreasing(a)
    assert a.equals(datagen.kleene_stream(10_000, seed=7, n_groups=4, duplicate_time_fraction=0.2))
    assert not a.equals(
        datagen.kleene_stream(10_000, seed=8, n_groups=4, duplicate_time_fraction=0.2)
    )
    g = a["g"].to_numpy()
    assert g.min() == 0 and g.max() == 3
    assert set(pc.unique(a["type"]).to_pylist()) == {"A", "B", "C"}


@pytest.mark.parametrize("mean_burst", [3.0, 20.0])
def test_kleene_stream_burst_length(mean_burst):
    t = datagen.kleene_stream(100_000, seed=1, mean_burst=mean_burst)
    assert datagen.mean_run_length(t["type"], "B") == pytest.approx(mean_burst, rel=0.1)
    # Non-Kleene events never form long runs of one type.
    assert datagen.mean_run_length(t["type"], "A") < 2.0


def test_kleene_stream_time():
    t = datagen.kleene_stream(1000, seed=0)
    assert np.array_equal(_times(t), np.arange(1000))
    t = datagen.kleene_stream(1000, seed=0, time_step_s=5.0)
    assert np.array_equal(_times(t), 5 * np.arange(1000))
    t = datagen.kleene_stream(20_000, seed=0, duplicate_time_fraction=0.3)
    times = _times(t)
    assert times[0] == 0
    assert np.mean(np.diff(times) == 0) == pytest.approx(0.3, abs=0.02)
    assert set(np.unique(np.diff(times))) <= {0, 1}


def test_kleene_stream_other_types_and_single_type():
    t = datagen.kleene_stream(500, seed=0, types=("X", "K", "Y", "Z"), kleene_type="K")
    assert set(pc.unique(t["type"]).to_pylist()) == {"X", "K", "Y", "Z"}
    only = datagen.kleene_stream(50, seed=0, types=("B",), kleene_type="B")
    assert only.num_rows == 50 and set(only["type"].to_pylist()) == {"B"}
    with pytest.raises(ValueError):
        datagen.kleene_stream(10, types=("A", "C"), kleene_type="B")


@pytest.mark.parametrize("n", [0, 1, 5])
def test_kleene_stream_tiny(n):
    t = datagen.kleene_stream(n, seed=3)
    assert t.num_rows == n and t.schema == KLEENE_SCHEMA


# --------------------------------------------------------------------------------- stock stream


def test_stock_stream():
    t = datagen.stock_stream(20_000, seed=9)
    assert t.schema == STOCK_SCHEMA
    assert t.num_rows == 20_000
    assert _non_decreasing(t)
    assert t.equals(datagen.stock_stream(20_000, seed=9))
    assert set(pc.unique(t["type"]).to_pylist()) == {"AAPL", "AMZN", "GOOG", "MSFT"}
    assert pc.min(t["price"]).as_py() > 0
    assert pc.min(t["volume"]).as_py() >= 1
    assert datagen.mean_run_length(t["type"], "AAPL") > 3.0
    # A random walk: consecutive prices of one ticker are close.
    aapl = pc.filter(t["price"], pc.equal(t["type"], "AAPL")).to_numpy()
    assert np.max(np.abs(np.diff(np.log(aapl)))) < 0.02
    assert datagen.stock_stream(0).num_rows == 0


def test_stock_stream_exact_times():
    """whole_seconds=False: the same ticks with distinct float times, so runs of one ticker are
    bursts (with whole seconds many ticks share a time)."""
    whole = datagen.stock_stream(20_000, seed=9)
    exact = datagen.stock_stream(20_000, seed=9, whole_seconds=False)
    assert exact.schema.field("time").type == pa.float64()
    t = exact["time"].to_numpy()
    assert t[0] == 0.0 and np.all(np.diff(t) > 0)
    assert np.array_equal(np.floor(t).astype(np.int64), _times(whole))
    assert exact.drop_columns(["time"]).equals(whole.drop_columns(["time"]))


# ------------------------------------------------------------------------------------ workloads

RIDE_OTHERS = ("Request", "Pickup", "Dropoff", "Cancel")


def test_kleene_sharing_workload_shares_one_kleene_type():
    from gpu_hamlet import parse_workload
    from gpu_hamlet.engine.sharing import analyze

    n_max = len(RIDE_OTHERS) * (3 * len(RIDE_OTHERS) - 1)
    text = datagen.kleene_sharing_workload(
        n_max,
        "Travel",
        RIDE_OTHERS,
        returns="COUNT(*)",
        where=["[driver]"],
        groupby="district",
        within="10 min",
    )
    wl = parse_workload(text)
    queries = list(wl)
    assert len(queries) == n_max
    assert len({tuple(str(e) for e in q.elements) for q in queries}) == n_max  # all different
    assert all(q.within_ms == 600_000 and q.groupby == ("district",) for q in queries)
    assert all(sum(e.kleene for e in q.elements) == 1 for q in queries)
    sets = analyze(wl).sets
    assert len(sets) == 1 and sets[0].kleene_type == "Travel" and len(sets[0].queries) == n_max
    with pytest.raises(ValueError, match="n_queries"):
        datagen.kleene_sharing_workload(n_max + 1, "Travel", RIDE_OTHERS)
    filtered = datagen.kleene_sharing_workload(
        3, "B", ["A", "C"], per_query_where=["B.x < 1", "B.x < 2"]
    )
    assert filtered.splitlines()[2] == (
        "k2: RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.x < 1 WITHIN 1 min"
    )


def test_diverse_workload_varies_every_clause():
    from gpu_hamlet import parse_workload

    kw = dict(
        kleene_filters=("", "{E}.speed > 20"),
        other_filters=("", "{X}.price > 20"),
        groupby=("", "district"),
        where=["[driver]"],
    )
    text = datagen.diverse_workload(60, ["Travel", "LocationUpdate"], RIDE_OTHERS, "speed", **kw)
    assert text == datagen.diverse_workload(
        60, ["Travel", "LocationUpdate"], RIDE_OTHERS, "speed", **kw
    )
    assert text != datagen.diverse_workload(
        60, ["Travel", "LocationUpdate"], RIDE_OTHERS, "speed", seed=1, **kw
    )
    queries = list(parse_workload(text))
    assert len(queries) == 60
    assert {len(q.elements) for q in queries} == {1, 2, 3}
    assert {q.within_ms // 60_000 for q in queries} == {5, 10, 15, 20}
    assert {a.func for q in queries for a in q.aggregates} == {"COUNT", "SUM", "AVG", "MIN", "MAX"}
    assert {q.groupby for q in queries} == {(), ("district",)}
    assert all(q.partition_attrs[-1:] == ("driver",) for q in queries)
    kleene = [next(e.type for e in q.elements if e.kleene) for q in queries]
    assert set(kleene) == {"Travel", "LocationUpdate"}
    assert any(q.filters_of(k) for q, k in zip(queries, kleene))
    assert any(not q.filters_of(k) for q, k in zip(queries, kleene))


# -------------------------------------------------------------------------------------- loaders


@needs_data
def test_load_nasdaq():
    t = datagen.load_nasdaq(DATA / "NASDAQ_KC.txt")
    assert t.schema == pa.schema(
        [
            ("type", pa.string()),
            ("time", pa.timestamp("s")),
            ("open", pa.float64()),
            ("peak", pa.float64()),
            ("low", pa.float64()),
            ("close", pa.float64()),
            ("volume", pa.int64()),
        ]
    )
    assert t.num_rows == 15
    first = t.slice(0, 1).to_pylist()[0]
    assert first["type"] == "AAPL"
    assert first["time"] == np.datetime64("2008-02-01T09:00", "s").astype(object)
    assert (first["open"], first["peak"], first["low"], first["close"], first["volume"]) == (
        136.2,
        136.2,
        136.0,
        136.0,
        6700,
    )
    assert set(pc.unique(t["type"]).to_pylist()) == {"AAPL", "AMZN", "GOOG"}
    for name, rows in (
        ("NASDAQ_AAPL_AMZN_GOOG.txt", 1365),
        ("NASDAQ_MEDIUM.txt", 1652),
        ("NASDAQ_FREQUENCY_TAILORED.txt", 513),
    ):
        big = datagen.load_nasdaq(DATA / name)
        assert big.num_rows == rows
        assert _non_decreasing(big)


@needs_data
def test_load_hamlet_stream():
    t = datagen.load_hamlet_stream(DATA / "hamlet-synthetic" / "Paper_TestStream.txt")
    assert t.schema == pa.schema(
        [("type", pa.string()), ("time", pa.int64()), ("value", pa.int64())]
    )
    assert t["type"].to_pylist() == [
        "T1",
        "T1",
        "T3",
        "T2",
        "T2",
        "T2",
        "T2",
        "T1",
        "T1",
        "T3",
        "T3",
        "T3",
        "T2",
        "T2",
    ]
    assert t["time"].to_pylist() == list(range(1, 15))
    big = datagen.load_hamlet_stream(DATA / "hamlet-synthetic" / "Stream_shared_5.txt")
    assert big.num_rows == 100_000
    assert np.array_equal(_times(big), np.arange(100_000))
    assert set(pc.unique(big["type"]).to_pylist()) == {f"T{i}" for i in range(1, 15)}


@needs_data
def test_load_hamlet_workload_files():
    text = datagen.load_hamlet_workload(DATA / "hamlet-synthetic" / "HAMLET_DEFAULT_WORKLOAD.txt")
    lines = text.splitlines()
    assert len(lines) == 50
    assert lines[2] == "q3: RETURN COUNT(*) PATTERN SEQ(T3, T8, T2+) WITHIN 100000 s;"
    assert all(
        line.startswith(f"q{i}: RETURN COUNT(*) PATTERN SEQ(") for i, line in enumerate(lines, 1)
    )
    small = datagen.load_hamlet_workload(
        DATA / "hamlet-synthetic" / "Paper_TestQueries.txt", within="20 s"
    )
    assert small == (
        "q1: RETURN COUNT(*) PATTERN SEQ(T1, T2+) WITHIN 20 s;\n"
        "q2: RETURN COUNT(*) PATTERN SEQ(T3, T2+) WITHIN 20 s;\n"
    )


def test_load_hamlet_workload_text(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text("3,8,2+\n\n 12, 5,2+ ,13\n2+")
    assert datagen.load_hamlet_workload(path) == (
        "q1: RETURN COUNT(*) PATTERN SEQ(T3, T8, T2+) WITHIN 100000 s;\n"
        "q2: RETURN COUNT(*) PATTERN SEQ(T12, T5, T2+, T13) WITHIN 100000 s;\n"
        "q3: RETURN COUNT(*) PATTERN SEQ(T2+) WITHIN 100000 s;\n"
    )
    bad = tmp_path / "bad.txt"
    bad.write_text("3,8,2++\n")
    with pytest.raises(ValueError, match="line 1"):
        datagen.load_hamlet_workload(bad)


def test_load_hamlet_workload_parses(tmp_path):
    from gpu_hamlet import parse_workload as parse

    path = tmp_path / "w.txt"
    path.write_text("3,8,2+\n1,2+\n")
    queries = list(parse(datagen.load_hamlet_workload(path)))
    assert [q.name for q in queries] == ["q1", "q2"]
    assert [str(e) for e in queries[0].elements] == ["T3", "T8", "T2+"]
    assert queries[0].within_ms == 100_000_000


def test_mean_run_length():
    assert datagen.mean_run_length(["B", "B", "A", "B", "C", "B", "B", "B"], "B") == 2.0
    assert datagen.mean_run_length(["A"], "B") == 0.0

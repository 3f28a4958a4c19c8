"""`aggregate_stream` (gpu_hamlet/engine/streaming.py): batches in time order, cut into chunks,
answer what `aggregate` answers over the whole stream (and so the oracle), in every numeric mode,
for every pattern form, NEXT conditions and sliding windows; bad streams are named."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gpu_hamlet
from gpu_hamlet.errors import AbsentTypeWarning, EventDataError, NumericOverflowError

try:  # tests/ is a rootdir-inserted folder (no __init__.py) or a package
    from compare import ORACLE_SETTINGS, assert_matches_oracle, events_to_table, same
    from oracle import oracle
    from strategies import event_streams, workload_cases, workload_types
except ImportError:  # pragma: no cover
    from tests.compare import ORACLE_SETTINGS, assert_matches_oracle, events_to_table, same
    from tests.oracle import oracle
    from tests.strategies import event_streams, workload_cases, workload_types


def batches_of(table: pa.Table, cuts: list[int]) -> list[pa.Table]:
    """The time-sorted table in batches ending at the given row counts (an empty table: one
    empty batch, which carries the schema)."""
    table = table.sort_by("time")
    bounds = sorted({min(c, table.num_rows) for c in cuts} | {0, table.num_rows})
    return [table.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])] or [table]


@st.composite
def stream_cases(draw):
    """A workload (any pattern form, or NEXT conditions), its events, batch cuts and a chunk."""
    general = draw(st.booleans())
    text, wl = draw(workload_cases(max_queries=3, general=general, adjacent=not general))
    events = draw(event_streams(workload_types(wl), nulls=True))
    cuts = draw(st.lists(st.integers(0, len(events)), max_size=6))
    return text, wl, events, cuts, draw(st.integers(1, 8))


@ORACLE_SETTINGS
@given(case=stream_cases(), numeric=st.sampled_from(["exact", "bigint", "float"]))
def test_chunks_answer_what_the_whole_stream_answers(case, numeric):
    """Every final window once, from the chunk it ends in: `aggregate`'s very tables, and the
    oracle's counts."""
    text, wl, events, cuts, chunk = case
    table = events_to_table(events)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AbsentTypeWarning)
        whole = gpu_hamlet.aggregate(table, text, backend="cpu", numeric=numeric)
        got = gpu_hamlet.aggregate_stream(
            batches_of(table, cuts), text, rows_per_chunk=chunk, backend="cpu", numeric=numeric
        )
    assert_matches_oracle(got, oracle(events, wl, with_magnitudes=True), wl, numeric)
    for name, want in whole.items():  # (floats to their last bits: a chunk may take the
        assert same(got[name], want), name  # other route of a sliding window)


@pytest.mark.parametrize("time_type", ["float", pa.timestamp("ms", tz="UTC")])
def test_float_and_timestamp_times_cut_alike(time_type):
    """Float seconds (a window end may round onto a cut) and timestamps: `aggregate`'s tables."""
    rng = np.random.default_rng(3)
    events = [
        {"time": int(t), "type": str(k), "g": "u", "k": 0, "x": 1, "y": 0.5, "s": "u"}
        for t, k in zip(np.sort(rng.integers(0, 60, 300)), rng.choice(list("ABBC"), 300))
    ]
    text = (
        "a: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 7 s SLIDE 3 s; "
        "b: RETURN COUNT(*) PATTERN B+ WHERE B.x <= NEXT(B).x WITHIN 5 s"
    )
    table = events_to_table(events, time_type=time_type)
    whole = gpu_hamlet.aggregate(table, text, backend="cpu", numeric="float")
    got = gpu_hamlet.aggregate_stream(
        table.to_batches(max_chunksize=17), text, rows_per_chunk=40, backend="cpu", numeric="float"
    )
    for name in ("a", "b"):
        assert whole[name].num_rows > 5
        assert repr(got[name].to_pylist()) == repr(whole[name].to_pylist()), name


@pytest.mark.parametrize("times", [[3.8, 3.8], [0.3, 0.6], [0.1, 0.3, 0.3, 0.6, 0.7]])
def test_float32_window_ends_rounded_onto_the_cut(times):
    """float32 times: a window end that rounds onto the cut is not final (the next batch may
    hold events at the cut), and a window that is not final keeps its events, though its bounds
    are rounded to float32 (3.8 twice was counted 1 in [3.5, 3.8): the margin below the cut
    was lost in float32)."""
    text = "r: RETURN COUNT(*) PATTERN B+ WITHIN 300 ms SLIDE 100 ms"
    table = pa.table({"time": pa.array(times, pa.float32()), "type": ["B"] * len(times)})
    whole = gpu_hamlet.aggregate(table, text, backend="cpu")
    got = gpu_hamlet.aggregate_stream(
        table.to_batches(max_chunksize=1), text, rows_per_chunk=1, backend="cpu"
    )
    assert got["r"].to_pylist() == whole["r"].to_pylist()


def test_stream_errors_name_the_row_and_value():
    """An event earlier than the last cut, a batch of another schema, one table for the stream
    (was 'batch at row 0 is a ChunkedArray'), an empty stream."""
    text = "q: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 10 s"
    first = pa.table({"time": [1, 2, 3, 4], "type": ["A", "B", "B", "A"]})
    late = pa.table({"time": [5, 2], "type": ["B", "B"]})
    with pytest.raises(EventDataError, match=r"row 5 of the stream: time 2 is earlier than 4"):
        gpu_hamlet.aggregate_stream([first, late], text, rows_per_chunk=4)
    other = pa.table({"time": [5.0], "type": ["B"]})
    with pytest.raises(EventDataError, match="row 4 .* column 'time' is double, not int64$"):
        gpu_hamlet.aggregate_stream([first, other], text)
    strict = pa.schema([pa.field("time", pa.int64(), False), pa.field("type", pa.string())])
    for batch, why in [
        (first.cast(strict), "column 'time' is not nullable, unlike the first batch's"),
        (first.select(["type", "time"]), r"its columns are \['type', 'time'\]"),
        (first.append_column("x", pa.array([0] * 4)), "it adds column 'x'"),
    ]:
        with pytest.raises(EventDataError, match=why):
            gpu_hamlet.aggregate_stream([first, batch], text)
    for whole in (first, first.to_batches()[0], first.to_pandas()):  # (not iterables of batches)
        with pytest.raises(EventDataError, match="an iterable of batches"):
            gpu_hamlet.aggregate_stream(whole, text)
    with pytest.raises(EventDataError, match="no batches"):
        gpu_hamlet.aggregate_stream([], text)
    nulls = pa.table({"time": [5, None, 7], "type": ["B", "B", None]})
    with pytest.raises(EventDataError, match=r"row 6 of the stream: its type \('type'\) is null"):
        gpu_hamlet.aggregate_stream([first, nulls], text)  # (types first, as `aggregate`)
    nulls = nulls.set_column(1, "type", pa.array(["B", "B", "Z"]))
    with pytest.raises(EventDataError, match=r"row 5 of the stream: its time \('time'\) is null"):
        gpu_hamlet.aggregate_stream([first, nulls], text)
    bad = pa.table({"time": [1.0, 2.0, 3.0], "type": ["A", "Z", "B"]})
    for value in (math.nan, math.inf):
        at = bad.set_column(0, "time", pa.array([1.0, 2.0, value]))
        with pytest.raises(EventDataError, match=f"row 2 of the stream: its time .* is {value}"):
            gpu_hamlet.aggregate_stream([at], text)
    reader = pa.RecordBatchReader.from_batches(first.schema, [])
    assert gpu_hamlet.aggregate_stream(reader, text)["q"].num_rows == 0
    with pytest.raises(ValueError, match="rows_per_chunk"):
        gpu_hamlet.aggregate_stream([first], text, rows_per_chunk=0)


def test_absent_types_warn_once_for_the_whole_stream():
    """A type that occurs in a later chunk only is not absent; one that never occurs is, once."""
    text = (
        "q: RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 10 s; "
        "r: RETURN COUNT(*) PATTERN Z+ WITHIN 10 s"
    )
    batches = [
        pa.table({"time": [1, 2], "type": ["A", "B"]}),
        pa.table({"time": [30, 31], "type": ["B", "C"]}),
    ]
    with pytest.warns(AbsentTypeWarning) as record:
        gpu_hamlet.aggregate_stream(batches, text, rows_per_chunk=2)
    assert [str(w.message).split(":")[0] for w in record] == ["query r"]
    assert record[0].filename == __file__


def test_rows_dropped_before_their_times_count_for_rows_and_types():
    """Events of types no pattern names are dropped where their times are null or NaN, before
    the stream counts its rows: a later error named row 3 for row 5, and the absent-type warning
    left out the types of those events (its hint too), or was not given at all when they were
    the whole stream (a helper's hunt)."""
    text = "q: RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 10 s"
    first = pa.table({"time": [1.0, math.nan, None, 2.0], "type": ["A", "Z", "Z", "B"]})
    late = pa.table({"time": [3.0, 1.5], "type": ["B", "B"]})
    with pytest.raises(EventDataError, match=r"^row 5 of the stream: time 1.5 is earlier"):
        gpu_hamlet.aggregate_stream([first, late], text, rows_per_chunk=1)
    nulls = pa.table({"time": [3.0, 4.0], "type": ["B", None]})
    with pytest.raises(EventDataError, match=r"^row 5 of the stream: its type"):
        gpu_hamlet.aggregate_stream([first, nulls], text, rows_per_chunk=1)
    for events, wl in [
        (pa.table({"time": [math.nan, None], "type": ["A", "B"]}), text.replace("A, B", "C, D")),
        (pa.table({"time": [1.0, math.nan, 3.0], "type": ["A", "B", "A"]}), text.replace("B", "b")),
    ]:
        with pytest.warns(AbsentTypeWarning) as whole:
            gpu_hamlet.aggregate(events, wl, backend="cpu")
        with pytest.warns(AbsentTypeWarning) as streamed:
            gpu_hamlet.aggregate_stream([events], wl, backend="cpu")
        assert [str(w.message) for w in streamed] == [str(w.message) for w in whole]


def test_stats_add_up_over_the_chunks():
    """The sharing decisions of every chunk, summed in one RunStats: each burst counted by the
    chunk that answers it, and again by the next one where the chunk's window reaches back."""
    text = (
        "a: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 10 s; "
        "b: RETURN COUNT(*) PATTERN SEQ(B+, C) WITHIN 10 s"
    )
    kinds = "ABBBC" * 40
    table = pa.table({"time": list(range(len(kinds))), "type": list(kinds)})
    stats, whole = gpu_hamlet.RunStats(), gpu_hamlet.RunStats()
    gpu_hamlet.aggregate_stream(
        table.to_batches(max_chunksize=10), text, rows_per_chunk=50, sharing="static", stats=stats
    )
    gpu_hamlet.aggregate(table, text, sharing="static", stats=whole)
    (streamed,) = stats.sets
    assert 1.5 * whole.sets[0].bursts > streamed.bursts >= whole.sets[0].bursts > 0


def test_an_overflow_in_a_final_window_raises_at_its_chunk():
    """An overflow in a window whose events are all in the chunk is raised there: it waited for
    the stream's end, and every later chunk was answered again with the whole buffer (B+ over
    400,000 events took 10 s, quadratic, with memory growing; a helper's hunt). The error names
    the window: a window the cut splits still waits (the test above)."""
    from gpu_hamlet.errors import NumericOverflowError

    text = "big: RETURN COUNT(*) PATTERN B+ WITHIN 1000 s"
    taken = []

    def batches():
        for i in range(100):
            taken.append(i)
            times = np.arange(i * 1000, (i + 1) * 1000, dtype=np.int64)
            yield pa.table({"time": times, "type": ["B"] * 1000})

    with pytest.raises(NumericOverflowError, match=r"query big: .* window \[0, 1000\)") as err:
        gpu_hamlet.aggregate_stream(batches(), text, rows_per_chunk=1000, backend="cpu")
    assert err.value.window_end == 1000
    assert len(taken) <= 2  # raised where the window [0, 1000) was final, not at the end


def test_a_window_the_cut_splits_is_not_checked_and_the_stream_still_cuts():
    """A window the cut splits holds only part of its events in a chunk, where a SUM over values
    of both signs may overflow and not whole: such windows are left to the next chunk unchecked,
    and the chunk is cut as any other. The chunk was answered again with the next one instead,
    so where every chunk's last window overflowed in part the stream never cut: its buffer
    grew with the stream and each chunk read all of it (a helper's review)."""
    from gpu_hamlet.engine.options import Options
    from gpu_hamlet.engine.streaming import Stream

    n = 130  # window k: A and 130 B of x = 1 (2^130 trends each), near its end a B of x = -130

    def window(k: int, part: str) -> pa.Table:
        t = [1000 * k + i for i in range(n + 1)] if part == "head" else [1000 * k + 900]
        kinds, x = (["A"] + ["B"] * n, [0] + [1] * n) if part == "head" else (["B"], [-n])
        return pa.table({"time": pa.array(t, pa.int64()), "type": kinds, "x": x})

    tables = [window(0, "head")]
    for k in range(1, 12):  # each batch: the tail of window k - 1, the head of window k
        tables.append(pa.concat_tables([window(k - 1, "tail"), window(k, "head")]))
    tables.append(window(11, "tail"))
    text = "q: RETURN SUM(B.x) PATTERN SEQ(A, B+) WITHIN 1000 s"
    whole = gpu_hamlet.aggregate(pa.concat_tables(tables), text, backend="cpu")["q"]
    assert whole.num_rows == 12 and set(whole.column("sum_B_x").to_pylist()) == {0}
    wl = gpu_hamlet.parse_workload(text)
    stream = Stream(wl, Options("cpu", "dynamic", "exact", "error", "time", "type"), 100, None)
    held = []
    for table in tables:
        stream.add(table)
        held.append(sum(t.num_rows for t in stream.buffer))
    assert max(held) < 3 * (n + 2), held  # one chunk and one window, not the whole stream
    assert stream.finish(None)["q"].equals(whole)


def _same_as_whole(table: pa.Table, text: str, batch: int, chunk: int, **options) -> None:
    whole = gpu_hamlet.aggregate(table, text, backend="cpu", **options)
    batches = table.to_batches(max_chunksize=batch)
    got = gpu_hamlet.aggregate_stream(batches, text, rows_per_chunk=chunk, backend="cpu", **options)
    assert any(t.num_rows for t in whole.values())
    for name, want in whole.items():
        assert got[name].equals(want), name


@pytest.mark.parametrize("typ", [pa.uint8(), pa.uint16(), pa.uint32()], ids=str)
def test_unsigned_and_extreme_times_are_cut_without_wrapping(typ):
    """The cut minus the longest WITHIN is computed in Python numbers: in an unsigned column's
    own type it wrapped (2 - 10 as 4.29e9) and the open window lost its events; near int64's
    least value as well (a helper's hunt)."""
    text = "q: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 10 s"
    table = pa.table({"time": pa.array([1, 3, 4, 6, 8, 9, 12, 13], typ), "type": list("ABABABAB")})
    _same_as_whole(table, text, 2, 2)
    low = -(2**63)
    table = table.set_column(0, "time", pa.array([low + t for t in range(8)], pa.int64()))
    _same_as_whole(table, text.replace("10 s", "1024 s"), 2, 2)


def test_events_no_pattern_reads_are_dropped_before_their_times_are_read():
    """Events of types no pattern names are dropped first, as `aggregate` drops them: a NaN,
    infinite or null time there made the stream's cut NaN (every window lost), blamed the next
    row, or raised (a helper's hunt)."""
    text = "q: RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 10 s"
    for value in (math.nan, math.inf, None):
        times = pa.array([1.0, 2.0, value, 11.0, 12.0, 21.0])
        table = pa.table({"time": times, "type": ["A", "B", "Z", "A", "B", "A"]})
        for batch, chunk in [(3, 3), (1, 1), (6, 100)]:
            _same_as_whole(table, text, batch, chunk)


def test_windows_answered_before_are_not_checked_again_on_their_last_events():
    """The buffer keeps the last events of windows an earlier chunk answered; a SUM over values
    of both signs overflowed over those alone, where the whole window's did not (exact, and
    float over +-1e300 with sliding windows; a helper's hunt)."""
    big = 10**18
    times = list(range(130))
    events = pa.table(
        {
            "time": [*times, 265, 300],
            "type": ["B"] * 130 + ["Z", "Z"],
            "x": [-big if t < 65 else big for t in times] + [0, 0],
        }
    )
    _same_as_whole(events, "q: RETURN SUM(B.x) PATTERN B+ WITHIN 200 s", 131, 131)
    times = list(range(50))
    events = pa.table(
        {
            "time": [*times, 120, 170],
            "type": ["B"] * 50 + ["Z", "Z"],
            "y": [-1e300 if t < 25 else 1e300 for t in times] + [0.0, 0.0],
        }
    )
    text = "q: RETURN SUM(B.y) PATTERN B+ WITHIN 100 s SLIDE 50 s"
    for numeric in ("exact", "float"):
        _same_as_whole(events, text, 51, 51, numeric=numeric)


def test_columns_arrow_filters_not_are_read_as_the_engine_reads_them():
    """The buffer holds the columns the workload reads, as the types the engine reads: a
    string_view type column, and unused binary_view or run-end encoded columns, raised
    ArrowNotImplementedError once the stream was cut (a helper's hunt)."""
    text = "q: RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 10 s"
    base = pa.table({"time": [1, 2, 11, 12], "type": ["A", "B", "A", "B"]})
    ree = pa.RunEndEncodedArray.from_arrays(pa.array([4], pa.int32()), pa.array([7]))
    for table in (
        base.set_column(1, "type", base.column("type").cast(pa.string_view())),
        base.append_column("blob", pa.array([b"x"] * 4, pa.binary_view())),
        base.append_column("runs", ree),
    ):
        _same_as_whole(table, text, 2, 2)


def test_an_and_query_overflowing_in_a_final_window_raises_at_its_chunk():
    """An AND query's overflow names its window's end, so a final window raises at its chunk
    rather than the stream reading every batch into its buffer (a helper's hunt)."""
    taken = []

    def batches():
        for i in range(20):
            taken.append(i)
            yield pa.table({"time": np.arange(i * 1000, (i + 1) * 1000), "type": ["B"] * 1000})

    text = "big: RETURN COUNT(*) PATTERN B+ AND B WITHIN 1000 s"
    with pytest.raises(NumericOverflowError, match="in window \\[0, 1000\\)") as err:
        gpu_hamlet.aggregate_stream(batches(), text, rows_per_chunk=1000, backend="cpu")
    assert err.value.window_end == 1000 and len(taken) == 2


@pytest.mark.parametrize("batches", [None, 5])
def test_a_stream_of_no_iterable_is_refused_naming_what_it_reads(batches):
    """It raised a bare TypeError ('NoneType' object is not iterable)."""
    with pytest.raises(
        EventDataError, match=r"reads an iterable of batches .*, not (NoneType|int)"
    ):
        gpu_hamlet.aggregate_stream(batches, "q: RETURN COUNT(*) PATTERN A WITHIN 1 s")


@pytest.mark.filterwarnings("ignore::gpu_hamlet.errors.AbsentTypeWarning")  # (X and Y)
def test_chunks_without_results_keep_no_tables():
    """A long stream of chunks that answer nothing holds one empty table per query, not one per
    chunk: 5,000 chunks of two queries held 55 MB of empty tables (a review's measurement)."""
    from gpu_hamlet.engine.options import Options
    from gpu_hamlet.engine.streaming import Stream

    text = (
        "a: RETURN COUNT(*) PATTERN SEQ(X, Y) WITHIN 5 s; c: RETURN COUNT(*) PATTERN Y WITHIN 5 s"
    )
    stream = Stream(gpu_hamlet.parse_workload(text), Options(backend="cpu"), 5, None)
    for i in range(200):
        stream.add(pa.table({"time": np.arange(5 * i, 5 * i + 5), "type": ["A", "B"] * 2 + ["A"]}))
    assert [len(parts) for parts in stream.results.values()] == [1, 1]
    out = stream.finish(None)
    assert [t.num_rows for t in out.values()] == [0, 0]
    assert out["a"].schema.names == ["window_start", "window_end", "count"]


def test_float_epoch_seconds_keep_one_window_past_each_cut():
    """Float times of epoch seconds (1.7e9): the buffer keeps about one window of events past a
    cut. The margin for window ends rounding onto the cut, 1e-9 of the magnitude, was 1.7 s
    there, 17 windows of 100 ms (a review's finding); the results are aggregate's."""
    from gpu_hamlet.engine.options import Options
    from gpu_hamlet.engine.streaming import Stream

    times = 1.7e9 + np.arange(5000) * 0.001  # one event a millisecond
    events = pa.table({"time": times, "type": ["A", "B"] * 2500})
    text = "q: RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 100 ms SLIDE 50 ms"
    stream = Stream(gpu_hamlet.parse_workload(text), Options(backend="cpu"), 1000, None)
    kept = []
    for batch in events.to_batches(max_chunksize=500):
        stream.add(batch)
        kept.append(sum(t.num_rows for t in stream.buffer))
    assert max(kept[2::2]) <= 1000 + 150  # (after a cut: a window, then the new batch)
    whole = gpu_hamlet.aggregate(events, text, backend="cpu")["q"]
    assert stream.finish(None)["q"].equals(whole) and whole.num_rows > 90

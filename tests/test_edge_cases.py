"""Never silently wrong at the edges (issue 16): filters on integer, decimal and float columns
against any literal; -0.0, NaN and null as grouping values; windows near the ends of the time
type; durations too long for it. In-process on both backends, and through Spark."""

from __future__ import annotations

import math
import struct
import sys
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from compare import assert_matches_oracle
from oracle import COMPARISONS, oracle

import gpu_hamlet
from gpu_hamlet.engine.evaluate import result_schemas
from gpu_hamlet.engine.matching import compare, passes
from gpu_hamlet.errors import EventDataError, WorkloadError
from gpu_hamlet.query.parser import parse_workload

BACKENDS = ["cpu", "gpu"]
I64 = 2**63 - 1
_PY_OPS = COMPARISONS  # the query language's operators as Python's


def _run(events: pa.Table, text: str, **options) -> dict[str, pa.Table]:
    return gpu_hamlet.aggregate(events, text, **options)


# --------------------------------------------------------------------------------------------------
# 4. Filters: integer and decimal columns against any literal are exact


#: (column type, values, literals written in the query): values at the column type's ends, and
#: literals between two neighbouring values, beyond the type's range, and past float64's 2^53.
FILTER_CASES = [
    (
        pa.int64(),
        [2**53 + 1, 2**53, 2, 3, -5, I64, -I64 - 1],
        [
            "2.5",
            "-0.5",
            "9007199254740992.5",
            "9007199254740993.5",
            "9007199254740993",
            "12345678901234567890",
            "-12345678901234567890",
            "9223372036854775806.5",
        ],
    ),
    (
        pa.uint64(),
        [0, 1, 2**64 - 1, 2**53 + 1],
        ["-1", "0.5", "18446744073709551614.5", "18446744073709551616", "9007199254740993.5"],
    ),
    (pa.int8(), [-128, -1, 0, 127], ["-128.5", "-0.1", "127", "126.99", "300", "-300"]),
    (pa.uint8(), [0, 200, 255], ["-1", "199.5", "255.0", "256"]),
    (pa.int32(), [-(2**31), 7, 2**31 - 1], ["7.0", "6.999999999999999999999", "2147483647.5"]),
    (
        pa.decimal128(38, 30),
        [Decimal("0.1"), Decimal("1.5"), Decimal("-99999999.999")],
        ["0.1", "1.5", "0.123456789012345678901234567890123", "100000000000", "-100000000"],
    ),
    (
        pa.decimal128(5, 2),
        [Decimal("999.99"), Decimal("-0.01"), Decimal("0")],
        ["999.995", "-0.005", "1000", "-1000.5", "0"],
    ),
]


def _filter_events(arrow_type: pa.DataType, values: list) -> pa.Table:
    """One B event per value (and a null), each its own trend of `PATTERN B`."""
    vals = values + [None]
    return pa.table(
        {
            "time": pa.array(range(len(vals)), pa.int64()),
            "type": ["B"] * len(vals),
            "x": pa.array(vals, arrow_type),
        }
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("arrow_type", "values", "literals"), FILTER_CASES, ids=[str(c[0]) for c in FILTER_CASES]
)
def test_integer_and_decimal_columns_compare_exactly(arrow_type, values, literals, backend):
    """Every operator with every literal: the count of events that pass equals the exact
    comparison of the value with the number written (Arrow compared an int64 column with 2.5 in
    float64 and failed on 2^53 + 1; literals beyond int64 raised OverflowError)."""
    events = _filter_events(arrow_type, values)
    queries = [(op, lit) for op in _PY_OPS for lit in literals]
    if backend == "gpu":  # the same masks on both backends: a few queries suffice there
        queries = queries[::7]
    text = ";".join(
        f"q{i}: RETURN COUNT(*) PATTERN B WHERE B.x {op} {lit} WITHIN 1000 s"
        for i, (op, lit) in enumerate(queries)
    )
    got = _run(events, text, backend=backend)
    for i, (op, lit) in enumerate(queries):
        want = sum(_PY_OPS[op](Fraction(v), Fraction(Decimal(lit))) for v in values)
        count = sum(int(c) for c in got[f"q{i}"].column("count").to_pylist())
        assert count == want, (arrow_type, op, lit)
    wl = gpu_hamlet.parse_workload(text)
    assert_matches_oracle(
        got, oracle(events.to_pylist(), wl), wl, "exact", event_schema=events.schema
    )


def test_literals_keep_the_number_written():
    """A literal a float cannot hold stays a Decimal (a float would round it to a neighbour)."""
    (f,) = (
        gpu_hamlet.parse_workload(
            "RETURN COUNT(*) PATTERN B WHERE B.x > 9007199254740993.5 WITHIN 1 s"
        )
        .queries[0]
        .filters
    )
    assert f.value == Decimal("9007199254740993.5") and str(f) == "B.x > 9007199254740993.5"
    (f,) = (
        gpu_hamlet.parse_workload("RETURN COUNT(*) PATTERN B WHERE B.x > 2.5 WITHIN 1 s")
        .queries[0]
        .filters
    )
    assert type(f.value) is float


FLOAT_LITERALS = ["0.1", "0", "2.5", "1" + "0" * 400, "-1" + "0" * 400, "0.1000000000000000000001"]


@pytest.mark.parametrize(
    ("arrow_type", "values", "literals"),
    [*FILTER_CASES, (pa.float64(), [0.1, -0.0, 2.5, math.inf, -1e300, math.nan], FLOAT_LITERALS)],
    ids=[*(str(c[0]) for c in FILTER_CASES), "double"],
)
def test_filter_masks_without_nulls_equal_arrows(arrow_type, values, literals):
    """Columns without nulls are compared in NumPy (`matching.passes`), the others in Arrow
    (`matching.compare`): every operator and literal gives the same rows both ways, and the
    exact answer."""
    col = pa.chunked_array([pa.array(values, arrow_type)])
    for op in _PY_OPS:
        for lit in literals:
            value = Decimal(lit)
            got = passes(col, op, value)
            assert got.dtype == np.bool_ and got.shape == (len(values),)
            arrow = compare(col, op, value).fill_null(False).to_numpy(zero_copy_only=False)
            assert got.tolist() == arrow.tolist(), (arrow_type, op, lit)
            if not pa.types.is_floating(arrow_type):
                want = [_PY_OPS[op](Fraction(v), Fraction(value)) for v in values]
                assert got.tolist() == want, (arrow_type, op, lit)


@pytest.mark.parametrize("arrow_type", [pa.float64(), pa.float32()])
def test_float_columns_compare_with_the_nearest_float(arrow_type):
    """Float columns meet the literal as the nearest float64 (Spark's cast to double); a literal
    beyond float64 is infinite, not an OverflowError."""
    values = [0.1, -0.0, 2.5, float("inf"), -1e300]
    events = _filter_events(arrow_type, values)
    huge = "1" + "0" * 400
    literals = ["0.1", "0", "2.5", huge, "-" + huge, "0.1000000000000000000001"]
    queries = [(op, lit) for op in _PY_OPS for lit in literals]
    text = ";".join(
        f"q{i}: RETURN COUNT(*) PATTERN B WHERE B.x {op} {lit} WITHIN 1000 s"
        for i, (op, lit) in enumerate(queries)
    )
    got = _run(events, text, backend="cpu")
    stored = events.column("x").to_pylist()[:-1]  # as the column holds them (float32 rounds)
    for i, (op, lit) in enumerate(queries):
        want = sum(_PY_OPS[op](v, float(Decimal(lit))) for v in stored)
        count = sum(int(c) for c in got[f"q{i}"].column("count").to_pylist())
        assert count == want, (op, lit)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", list(_PY_OPS))
def test_null_fails_every_comparison(op, backend):
    """SQL: a comparison with null is not true, `!=` included; the event takes part in no
    trend (and a trend through it does not exist)."""
    events = pa.table(
        {
            "time": pa.array([1, 2, 3], pa.int64()),
            "type": ["A", "B", "B"],
            "x": pa.array([0, None, None], pa.int64()),
            "s": pa.array(["a", None, None], pa.string()),
        }
    )
    text = (
        f"RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.x {op} 5 WITHIN 10 s;"
        f"RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.s {op} 'z' WITHIN 10 s"
    )
    got = _run(events, text, backend=backend)
    assert all(t.num_rows == 0 for t in got.values())


@pytest.mark.parametrize("backend", BACKENDS)
def test_dictionary_columns_filter_by_their_values(backend):
    """Filters on dictionary columns of strings and ints compare their values (they were refused
    as of a type the literal cannot meet), nulls failing as in SQL: the counts of the same
    filters on the plain columns."""
    s = ["a", "c", None, "b", "c", "a"]
    x = [1, 5, None, 3, 2, 7]
    plain = pa.table({"time": list(range(6)), "type": ["A", "B"] * 3, "s": s, "x": x})
    coded = plain.set_column(2, "s", plain.column("s").dictionary_encode()).set_column(
        3, "x", plain.column("x").dictionary_encode()
    )
    text = ";".join(
        f"q{i}: RETURN COUNT(*) PATTERN SEQ(A, B) WHERE {f} WITHIN 10 s"
        for i, f in enumerate(["B.s > 'a'", "A.s = 'a'", "B.x >= 3", "A.x != 3"])
    )
    want = _run(plain, text, backend=backend)
    got = _run(coded, text, backend=backend)
    assert {n: t.to_pylist() for n, t in got.items()} == {n: t.to_pylist() for n, t in want.items()}
    assert any(t.num_rows for t in got.values())


@pytest.mark.parametrize(
    ("column", "literal"),
    [("s", "5"), ("x", "'5'"), ("ts", "5"), ("ts", "'2024-01-01'"), ("flag", "1")],
)
def test_type_mismatch_names_query_filter_and_column(column, literal):
    events = pa.table(
        {
            "time": pa.array([1], pa.int64()),
            "type": ["B"],
            "s": ["a"],
            "x": pa.array([1], pa.int64()),
            "ts": pa.array([1], pa.timestamp("us")),
            "flag": [True],
        }
    )
    with pytest.raises(WorkloadError) as err:
        _run(
            events,
            f"mine: RETURN COUNT(*) PATTERN B WHERE B.{column} < {literal} WITHIN 1 s",
            backend="cpu",
        )
    assert "query mine" in str(err.value) and f"B.{column} < " in str(err.value)
    assert f"column '{column}'" in str(err.value)


# --------------------------------------------------------------------------------------------------
# 5. -0.0 and 0.0, NaN and NaN, null and null: one grouping value each

_NAN_PAYLOAD = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000123))[0]
#: What NaN stands in for in the oracle (which cannot group NaNs): larger than every value, as
#: Arrow sorts NaN after numbers (and before nulls).
_NAN_STAND_IN = 1e300


def _signed_zero_events() -> pa.Table:
    """A, B+ trends whose events alternate between -0.0 and 0.0, between two NaNs of different
    bits, and between nulls; a trend crossing two groups would be counted wrongly."""
    g = [0.0, -0.0, 0.0, -0.0, float("nan"), _NAN_PAYLOAD, -float("nan"), None, None, 1.0, -0.0]
    types = ["A", "B", "B", "C", "A", "B", "C", "A", "B", "A", "B"]
    return pa.table(
        {
            "time": pa.array([1, 2, 3, 4, 1, 2, 3, 2, 3, 1, 5], pa.int64()),
            "type": types,
            "g": pa.array(g, pa.float64()),
            "x": pa.array(range(len(g)), pa.int64()),
        }
    )


WORKLOAD_GROUPS = (
    "grouped: RETURN g, COUNT(*), SUM(B.x), MAX(B.x) PATTERN SEQ(A, B+) GROUPBY g WITHIN 10 s;"
    "equiv: RETURN COUNT(*), COUNT(B) PATTERN SEQ(A, B+) WHERE [g] WITHIN 10 s;"
    "both: RETURN g, COUNT(*) PATTERN SEQ(A, B+, C) WHERE [g] GROUPBY g WITHIN 10 s"
)


def _nan_as_stand_in(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    out = {}
    for name, t in tables.items():
        if "g" in t.column_names:
            g = t.column("g")
            t = t.set_column(0, "g", pc.if_else(pc.is_nan(g), _NAN_STAND_IN, g))
        out[name] = t
    return out


def _check_groups(tables: dict[str, pa.Table], numeric: str = "exact") -> None:
    """Results equal the oracle's over the events with -0.0 made 0.0 and NaN one value, and the
    group of -0.0 and 0.0 is shown as 0.0 (as Spark's grouping normalises it)."""
    events = _signed_zero_events()
    g = events.column("g")
    same = events.set_column(2, "g", pc.if_else(pc.is_nan(g), _NAN_STAND_IN, pc.add(g, 0.0)))
    wl = gpu_hamlet.parse_workload(WORKLOAD_GROUPS)
    assert_matches_oracle(
        _nan_as_stand_in(tables),
        oracle(same.to_pylist(), wl),
        wl,
        numeric,
        event_schema=events.schema,
    )
    zeros = [v for v in tables["grouped"].column("g").to_pylist() if v == 0]
    assert zeros and all(math.copysign(1.0, v) == 1.0 for v in zeros)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sharing", ["dynamic", "none"])
def test_negative_zero_nan_and_null_are_one_group_each(backend, sharing):
    _check_groups(_run(_signed_zero_events(), WORKLOAD_GROUPS, backend=backend, sharing=sharing))


@pytest.mark.parametrize("numeric", ["bigint", "float"])
def test_groups_in_every_numeric_mode(numeric):
    _check_groups(
        _run(_signed_zero_events(), WORKLOAD_GROUPS, backend="cpu", numeric=numeric), numeric
    )


def _dictionary_events() -> pa.Table:
    """`_signed_zero_events` with g dictionary-encoded the hard way: two chunks, each with its
    own dictionary holding every row's value at a place of its own (so values repeat), and
    nulls both as null indices and as null entries of the dictionary."""
    events = _signed_zero_events()
    g = events.column("g").to_pylist()
    chunks = []
    for lo, hi in ((0, 6), (6, len(g))):
        values = g[lo:hi]
        indices = [None if v is None and i % 2 else i for i, v in enumerate(values)]
        chunks.append(
            pa.DictionaryArray.from_arrays(
                pa.array(indices, pa.int32()), pa.array(values, pa.float64())
            )
        )
    return events.set_column(2, "g", pa.chunked_array(chunks))


def _decoded(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    out = {}
    for name, t in tables.items():
        if "g" in t.column_names:
            assert pa.types.is_dictionary(t.schema.field("g").type), name  # the input's type
            t = t.set_column(0, "g", t.column("g").cast(pa.float64()))
        out[name] = t
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sharing", ["dynamic", "none"])
def test_dictionary_columns_group_by_their_values(backend, sharing):
    """A dictionary-typed GROUPBY or equivalence column groups by its values, not by the places
    of its dictionary: a value at several places is one group, a null index and a null in the
    dictionary are one null group, -0.0 and 0.0 are one group shown as 0.0 (indices once
    made a group per place, and a null index a negative partition)."""
    tables = _run(_dictionary_events(), WORKLOAD_GROUPS, backend=backend, sharing=sharing)
    _check_groups(_decoded(tables))


def test_dictionary_groups_come_in_the_order_of_their_values():
    """Rows come sorted by the values of a dictionary group column (Arrow sorts no dictionary
    column by itself)."""
    events = pa.table(
        {
            "time": [1, 2, 3, 4, 5, 6],
            "type": ["A", "B", "A", "B", "A", "B"],
            "g": pa.array(["v", "v", "u", "u", None, None]).dictionary_encode(),
        }
    )
    text = "q: RETURN g, COUNT(*) PATTERN SEQ(A, B) GROUPBY g WITHIN 10 s"
    got = _run(events, text, backend="cpu")["q"]
    assert got.schema.field("g").type == events.schema.field("g").type
    assert [(r["g"], int(r["count"])) for r in got.to_pylist()] == [("u", 1), ("v", 1), (None, 1)]


@pytest.mark.parametrize("tasks", [1, 3])
def test_spark_groups_negative_zero_nan_and_null(spark, tasks):
    """Through Spark too: the shard key (g, which every query groups by) puts -0.0 with 0.0
    and NaNs together, and a cut group (3 tasks: the big 0.0 group is sliced, its slices
    starting with -0.0 or 0.0, and so is the NaN group) composes its slices under one key."""
    # Imported here: the GPU machine runs this module without pyspark.
    from gpu_hamlet.spark import trend_aggregate

    text = ";".join(q for q in WORKLOAD_GROUPS.split(";") if "GROUPBY g" in q)
    events = _signed_zero_events()
    # Two big groups alternating -0.0 and 0.0, or two NaNs, over time, so that their slices
    # start with either.
    n = 40
    big = [
        pa.table(
            {
                "time": pa.array(np.arange(10, 10 + n), pa.int64()),
                "type": ["A", "B"] * (n // 2),
                "g": pa.array([a, b, b, a] * (n // 4), pa.float64()),
                "x": pa.array(np.arange(n), pa.int64()),
            }
        )
        for a, b in ((-0.0, 0.0), (float("nan"), _NAN_PAYLOAD))
    ]
    events = pa.concat_tables([events, *big])
    df = spark.createDataFrame(events.to_pylist(), "time long, type string, g double, x long")
    got = {name: r.toArrow() for name, r in trend_aggregate(df, text, num_tasks=tasks).items()}
    want = _run(events, text, backend="cpu")
    for name in want:
        a = _nan_as_stand_in({name: got[name]})[name].to_pylist()
        b = _nan_as_stand_in({name: want[name]})[name].to_pylist()
        key = lambda r: (r.get("g") is None, r.get("g") or 0, r["window_start"])  # noqa: E731
        assert sorted(a, key=key) == sorted(b, key=key), name
    zeros = [v for v in got["grouped"].column("g").to_pylist() if v == 0]
    assert zeros and all(math.copysign(1.0, v) == 1.0 for v in zeros)


# --------------------------------------------------------------------------------------------------
# 6. Windows near the ends of the time type; 7. durations too long for it


def test_a_float_time_on_a_window_bound_is_where_float64_division_puts_it():
    """semantics.md section 6: float64 0.3 lies just below 3/10, yet 0.3 / 0.3 is 1.0, so B@0.3
    is in [0.3, 0.6): it makes no trend with A@0.1, and A@0.3 makes one with B@0.5."""
    text = "RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 300 ms"
    for times, want in [([0.1, 0.3], []), ([0.3, 0.5], [(0.3, 1)])]:
        events = pa.table({"time": pa.array(times), "type": ["A", "B"]})
        got = _run(events, text, backend="cpu")["q1"].to_pylist()
        assert [(r["window_start"], int(r["count"])) for r in got] == want, times


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("within", "slide"), [(10, 10), (10, 5), (10, 1)])
def test_windows_near_the_int64_ends_are_exact(within, slide, backend):
    """The last windows that fit below 2^63 and the first above -2^63: window bounds, pane and
    window arithmetic exact there, events at both ends in one stream."""
    top = (I64 - within) // slide * slide  # the last window start whose end fits
    times = [
        top + slide - 9,
        top + slide - 5,
        top + slide - 1,  # in windows ending <= max
        -(2**63) + within + 2,
        -(2**63) + within + 4,
        -(2**63) + within + 9,
    ]  # windows >= min
    events = pa.table(
        {
            "time": pa.array(times, pa.int64()),
            "type": ["A", "B", "B"] * 2,
            "x": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
        }
    )
    text = (
        f"RETURN COUNT(*), SUM(B.x), MIN(B.x) PATTERN SEQ(A, B+) WITHIN {within} s SLIDE {slide} s"
    )
    wl = gpu_hamlet.parse_workload(text)
    for numeric in ("exact", "float") if backend == "cpu" else ("exact",):
        got = _run(events, wl, backend=backend, numeric=numeric)
        assert_matches_oracle(
            got, oracle(events.to_pylist(), wl), wl, numeric, event_schema=events.schema
        )
        assert got["q1"].num_rows > 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("time_type", "times", "where"),
    [
        (pa.int64(), [I64 - 5, I64 - 2], "window_end"),
        (pa.int64(), [-(2**63), -(2**63) + 2], "starts before"),
        (pa.int32(), [2**31 - 5, 2**31 - 2], "window_end"),
        (pa.timestamp("ns"), [I64 - 5, I64 - 2], "window_end"),
        (pa.timestamp("s", tz="UTC"), [I64 - 5, I64 - 2], "window_end"),
    ],
)
def test_window_beyond_the_time_type_is_an_error(time_type, times, where, backend):
    """A window holding an event but ending after the type's largest value (or starting before
    its smallest) cannot be returned: an error naming the query and the window, where the bounds
    used to wrap around silently (int64, timestamps) or fail inside Arrow (int32)."""
    events = pa.table({"time": pa.array(times, pa.int64()).cast(time_type), "type": ["A", "B"]})
    with pytest.raises(EventDataError, match=rf"query late: the window starting at .*{where}"):
        _run(events, "late: RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 10 s", backend=backend)


def test_window_check_is_per_query_events():
    """Only the events a query matches count: an event near the end that its filter drops, or
    of a type it does not use, stops no query."""
    events = pa.table(
        {
            "time": pa.array([1, 2, 3, I64 - 1], pa.int64()),
            "type": ["A", "B", "C", "C"],
            "x": pa.array([0, 0, 1, 0], pa.int64()),
        }
    )
    got = _run(
        events,
        "ab: RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 10 s;"
        "ac: RETURN COUNT(*) PATTERN SEQ(A, C) WHERE C.x > 0 WITHIN 10 s",
        backend="cpu",
    )
    assert got["ab"].column("window_end").to_pylist() == [10]
    assert got["ac"].column("window_end").to_pylist() == [10]
    with pytest.raises(EventDataError, match="query late: "):
        _run(events, "late: RETURN COUNT(*) PATTERN SEQ(A, C) WITHIN 10 s", backend="cpu")


@pytest.mark.parametrize(
    ("time_type", "duration"),
    [
        (pa.timestamp("ns"), "99999999999999 days"),
        (pa.timestamp("us"), "999999999999999 d"),
        (pa.int64(), "999999999999999 days"),
    ],
)
def test_duration_too_long_for_the_time_type(time_type, duration):
    """WITHIN longer than int64 ticks of the column: a WorkloadError naming the query and the
    clause, where it was a bare OverflowError."""
    events = pa.table({"time": pa.array([1, 2], pa.int64()).cast(time_type), "type": ["A", "B"]})
    with pytest.raises(WorkloadError, match=r"query long: WITHIN .* longer than the time column"):
        _run(events, f"long: RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN {duration}", backend="cpu")


@pytest.mark.parametrize(
    ("window", "match"),
    [
        ("WITHIN 1e400 s", r"WITHIN 1e400 s is longer than any time column holds \(10\^320 ms\)"),
        ("WITHIN 1e308 d", r"WITHIN 8\.640000E\+315 ms is longer than the time column"),
        ("WITHIN 1e300 s SLIDE 1 ms", r"WITHIN 1e300 s SLIDE 1 ms is more than 2\^63 - 1 panes"),
        ("WITHIN 1e5000 s", r"WITHIN 1e5000 s is longer than any time column holds"),
    ],
)
def test_duration_too_long_for_float_times(window, match):
    """Float times: a WITHIN beyond float64, or more int64 panes than the pane numbers count,
    is a WorkloadError naming the query, where it was a bare OverflowError (or, past 4300
    digits, Python's ValueError from printing the duration); beyond what any time column holds,
    from the parser, with its line and column."""
    events = pa.table({"time": [1.0, 2.0], "type": ["A", "B"]})
    with pytest.raises(WorkloadError, match=rf"query long(, line 1, column \d+)?: {match}"):
        _run(events, f"long: RETURN COUNT(*) PATTERN SEQ(A, B) {window}", backend="cpu")


@pytest.mark.parametrize("window", ["WITHIN 10 s", "WITHIN 10 s SLIDE 5 s"])
def test_float_times_too_many_panes_from_zero(window):
    """Float times are numbered by pane as int64: events 1e20 s from 0 (1e19 panes of 10 s)
    wrapped to one window at -9.2e19 that merged their trends, or vanished with SLIDE. An error
    naming the query and event now, and only for the events a query matches."""
    far = pa.table({"time": [1.0, 2.0, 1e20, 1e20 + 1e10], "type": ["A", "A", "B", "B"]})
    with pytest.raises(EventDataError, match=r"query far: the event at 1\.0000000001e\+20 lies"):
        _run(far, f"far: RETURN COUNT(*) PATTERN B+ {window}", backend="cpu")
    got = _run(far, f"near: RETURN COUNT(*) PATTERN A+ {window}", backend="cpu")["near"]
    assert got.column("count").to_pylist()[0] == 3


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            "RETURN SUM(B.x) PATTERN SEQ(A, B) WITHIN 10 s",
            "attribute column 'x' is in the events 2",
        ),
        ("RETURN MIN(B.l) PATTERN SEQ(A, B) WITHIN 10 s", "MIN.B.l. needs a column with an order"),
        ("RETURN MAX(B.m) PATTERN SEQ(A, B) WITHIN 10 s", "MAX.B.m. needs a column with an order"),
        ("RETURN COUNT(*) PATTERN B+ WHERE B.l < NEXT(B).l WITHIN 10 s", "cannot be compared"),
        ("RETURN COUNT(*) PATTERN B+ WHERE B.m = NEXT(B).m WITHIN 10 s", "cannot be compared"),
    ],
)
def test_columns_of_one_name_or_without_an_order(text, match):
    """Two columns of one name, MIN/MAX or NEXT over lists, structs or intervals: an error
    naming the query and column, where Arrow raised KeyError or ArrowNotImplementedError."""
    events = pa.Table.from_arrays(
        [
            pa.array([1, 2]),
            pa.array(["A", "B"]),
            pa.array([1, 2]),
            pa.array([3, 4]),
            pa.array([[1], [2]]),
            pa.array([(1, 2, 3)] * 2, pa.month_day_nano_interval()),
        ],
        names=["time", "type", "x", "x", "l", "m"],
    )
    with pytest.raises((EventDataError, WorkloadError), match=f"query q1: .*{match}"):
        _run(events, text, backend="cpu")


def test_spark_windows_near_the_end(spark):
    """Spark's statistics, slices and tasks handle times next to 2^63 (a group near the end is
    cut into slices; one spanning both ends, more than int64 ticks, stays whole); a window
    beyond the type is the same error, naming the query."""
    from gpu_hamlet.spark import trend_aggregate

    top = I64 - I64 % 10 - 10  # the last tumbling 10 s window that fits starts here
    text = "RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+) WITHIN 10 s SLIDE 5 s"
    near_end = np.arange(top - 30, top + 10)
    both_ends = np.r_[np.arange(top, top + 10), np.arange(-(2**63) + 10, -(2**63) + 20)]
    for times in (near_end, both_ends):
        events = pa.table(
            {
                "time": pa.array(times, pa.int64()),
                "type": ["A", "B"] * (len(times) // 2),
                "x": pa.array(np.arange(len(times)), pa.int64()),
            }
        )
        df = spark.createDataFrame(events.to_pylist(), "time long, type string, x long")
        got = trend_aggregate(df, text, num_tasks=3)["q1"].toArrow().sort_by("window_start")
        assert got.equals(_run(events, text, backend="cpu")["q1"])
    late = spark.createDataFrame([(I64 - 3, "A"), (I64 - 1, "B")], "time long, type string")
    with pytest.raises(EventDataError, match="query q1: the window starting at"):
        trend_aggregate(late, "RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 10 s", num_tasks=2)


def test_min_max_of_a_dictionary_column_keep_its_type():
    """A dictionary-encoded string column is ranked by its values (it once failed in Arrow's
    index_in), and MIN/MAX come back dictionary-typed, as the result schema says."""
    plain = pa.table(
        {"type": ["A", "B", "B", "B"], "time": [1, 2, 3, 4], "s": ["x", "z", None, "y"]}
    )
    coded = plain.set_column(2, "s", plain.column("s").dictionary_encode())
    text = "RETURN MIN(B.s), MAX(B.s) PATTERN SEQ(A, B+) WITHIN 10 s"
    got = gpu_hamlet.aggregate(coded, text, backend="cpu")["q1"]
    assert pa.types.is_dictionary(got.schema.field("min_B_s").type)
    assert got.column("min_B_s").to_pylist() == ["y"] and got.column("max_B_s").to_pylist() == ["z"]
    want = gpu_hamlet.aggregate(plain, text, backend="cpu")["q1"]
    assert got.column("max_B_s").cast(pa.string()).equals(want.column("max_B_s"))


@pytest.mark.parametrize(
    ("unit", "zone", "tick", "within"),
    [
        ("s", None, 2**63 - 14, "10 s"),  # (the year 2.9e11: no Python datetime)
        ("us", None, 2**63 - 2_000_000, "1 s"),
        ("ns", "+05:30", 2**63 - 2_000_000_002, "1 s"),  # (pandas overflowed into the zone)
    ],
)
def test_and_queries_over_times_python_cannot_hold(unit, zone, tick, within):
    """An AND's counts are joined on their groups' and windows' values, which were Python
    datetimes: times after the year 9999, or near 2262 in a zone east of UTC, raised
    OverflowError or OutOfBoundsDatetime. They are joined as ticks now; a GROUPBY of such
    times, and of a dictionary of timestamps (which Arrow builds from no list), alike."""
    stamp = pa.timestamp(unit, zone)
    times = pa.array([tick - 2, tick - 1], pa.int64()).cast(stamp)
    g = pa.array([tick, tick], pa.int64()).cast(stamp)
    text = (
        f"q: RETURN COUNT(*) PATTERN A+ AND A+ WITHIN {within};"
        f"g: RETURN g, COUNT(*) PATTERN A+ AND A+ GROUPBY g WITHIN {within};"
        f"d: RETURN h, COUNT(*) PATTERN A+ AND A+ GROUPBY h WITHIN {within}"
    )
    events = pa.table({"time": times, "type": ["A", "A"], "g": g, "h": g.dictionary_encode()})
    got = gpu_hamlet.aggregate(events, text, backend="cpu")
    schemas = result_schemas(events.schema, text)
    for name, table in got.items():  # two A's: 3 trends, and 3 * 3 - 3 * 4 / 2 = 3 pairs
        assert table.schema.equals(schemas[name]), name
        assert table.column("count").to_pylist() == [3], name
        assert table.column("window_end").cast(pa.int64()).to_pylist()[0] >= tick - 1, name
    assert got["g"].column("g").equals(pa.chunked_array([g[:1]]))
    assert got["d"].column("h").cast(stamp).equals(pa.chunked_array([g[:1]]))


def test_float_windows_have_the_bounds_nearest_their_exact_ones_or_an_error():
    """Float window bounds are the nearest floats to k * SLIDE and k * SLIDE + WITHIN: k * 0.1
    gave 0.30000000000000004 for 0.3. A WITHIN float64 holds runs (1e308 s raised
    OverflowError, `ms / 1000.0`), and a window whose bound the column's type rounds to
    infinity is an EventDataError naming the query (it was a row ending at inf)."""
    one = pa.table({"time": pa.array([0.35]), "type": ["A"]})
    got = gpu_hamlet.aggregate(one, "q: RETURN COUNT(*) PATTERN A WITHIN 700 ms SLIDE 100 ms")
    rows = got["q"].select(["window_start", "window_end"]).to_pylist()
    assert [(r["window_start"], r["window_end"]) for r in rows] == [
        (float(Fraction(k, 10)), float(Fraction(k + 7, 10))) for k in range(-3, 4)
    ]
    abc = pa.table({"time": [1.0, 2.0, 3.0], "type": ["A", "B", "C"]})
    for within, end in (("1e308 s", 1e308), ("1e306 min", 6e307)):
        got = gpu_hamlet.aggregate(abc, f"q: RETURN COUNT(*) PATTERN SEQ(A, B, C) WITHIN {within}")
        assert got["q"].to_pylist() == [{"window_start": 0.0, "window_end": end, "count": 1}]
    far = pa.table({"time": [1.0, 1.0005, 1e300], "type": ["A", "B", "Z"]})
    with warnings.catch_warnings():  # (the Z event lies past 2^62 of q's panes: no int64 pane)
        warnings.simplefilter("error")  # (NumPy's "invalid value encountered in cast")
        got = gpu_hamlet.aggregate(
            far, "q: RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 1 ms; z: RETURN COUNT(*) PATTERN Z "
            "WITHIN 1e299 s"
        )  # fmt: skip
    assert got["q"].column("count").to_pylist() == [1] and got["z"].num_rows == 1
    for typ, t, within in (
        (pa.float64(), 1.797e308, "1e305 s"),
        (pa.float32(), 3.4e38, "1e38 s"),
        (pa.float64(), -1.75e308, "1e307 s"),  # (below the smallest: no 'largest' in the text)
    ):
        late = pa.table({"time": pa.array([t], typ), "type": ["A"]})
        with pytest.raises(
            EventDataError,
            match=r"^query q: a window holding the event at .*inf.*beyond the range of its values",
        ):
            gpu_hamlet.aggregate(late, f"q: RETURN COUNT(*) PATTERN A WITHIN {within}")


@pytest.mark.parametrize(
    "values",
    [
        pa.array([5, 3, None, 9, 3, 1]),
        pa.array([0.5, -2.0, None, 7.25, -2.0, 1.0]),
        pa.array([5, 3, None, 9, 3, 1], pa.timestamp("s")),
        pa.array([Decimal("1.5"), Decimal("-2"), None, Decimal("9"), Decimal("-2"), Decimal(0)]),
    ],
    ids=lambda v: str(v.type),
)
@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_min_max_of_dictionaries_of_every_value_type(values, backend):
    """MIN/MAX of a dictionary column of numbers, times or decimals are its values' MIN/MAX,
    dictionary-typed as the result schema says (Arrow casts only strings to a dictionary: they
    raised ArrowNotImplementedError, a helper's hunt)."""
    n = len(values)
    plain = pa.table({"time": list(range(n)), "type": ["A", "B", "B", "B", "B", "C"], "x": values})
    coded = plain.set_column(2, "x", values.dictionary_encode())
    text = "RETURN MIN(B.x), MAX(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s SLIDE 2 s"
    got = gpu_hamlet.aggregate(coded, text, backend=backend)["q1"]
    want = gpu_hamlet.aggregate(plain, text, backend=backend)["q1"]
    assert got.schema == result_schemas(coded.schema, text)["q1"]
    assert got.num_rows == want.num_rows > 1
    for name in ("min_B_x", "max_B_x"):
        assert pa.types.is_dictionary(got.schema.field(name).type)
        assert got.column(name).to_pylist() == want.column(name).to_pylist()


def test_sums_of_a_dictionary_column_say_to_decode_it():
    """SUM and AVG read no dictionary column: the error names the query and the column, and
    where the dictionary's values are numbers, the cast that makes it summable."""
    x = pa.array([5, 3, 9]).dictionary_encode()
    table = pa.table({"time": [1, 2, 3], "type": ["A", "B", "B"], "x": x, "s": x.cast(pa.string())})
    text = "q7: RETURN SUM(B.x) PATTERN SEQ(A, B+) WITHIN 10 s"
    with pytest.raises(WorkloadError, match=r"q7.*decode it first \(cast the column to int64\)"):
        gpu_hamlet.aggregate(table, text)
    with pytest.raises(WorkloadError, match=r"needs a numeric column, but 's' is string$"):
        gpu_hamlet.aggregate(table, text.replace("B.x", "B.s"))


@pytest.mark.parametrize(
    "typ", [pa.decimal128(3, -3), pa.decimal256(40, -5), pa.decimal64(10, -2)], ids=str
)
def test_filters_on_negative_scale_decimals(typ):
    """Filters on decimals of a negative scale compare their values exactly, as on any other
    decimal (Arrow compares no such decimal: they raised, `=` with AttributeError)."""
    rng = np.random.default_rng(7)
    step = Decimal(1).scaleb(-typ.scale)
    values = [
        None if rng.random() < 0.2 else int(rng.integers(-999, 999)) * step for _ in range(40)
    ]
    table = pa.table({"time": np.arange(40), "type": ["B"] * 40, "x": pa.array(values, typ)})
    half = Decimal("0.5")
    for op, literal in [(">", step * 3 * half), ("=", values[1] or step), ("<", step * 5 * half)]:
        text = f"RETURN COUNT(*) PATTERN B WHERE B.x {op} {literal:f} WITHIN 1000 s"
        got = gpu_hamlet.aggregate(table, text, backend="cpu")["q1"].column("count").to_pylist()
        want = sum(v is not None and COMPARISONS[op](v, literal) for v in values)
        assert got == ([want] if want else []), (op, literal)


@pytest.mark.parametrize(
    "typ",
    [pa.int8(), pa.uint64(), pa.int64(), pa.decimal128(5, 2), pa.decimal256(70, -40)],
    ids=str,
)
def test_literals_far_beyond_the_column_compare_at_once(typ):
    """1e999999999 and 1e-999999999 against integer and decimal columns: the comparison made
    the literal an exact Fraction (a billion-digit integer: it never ended). Now a literal far
    beyond the column's integers compares as any number of its sign beyond them, and one below
    a hundredth of a unit as a half of its sign."""
    step = Decimal(1).scaleb(-typ.scale) if pa.types.is_decimal(typ) else Decimal(1)
    values = [v * step for v in (0, 1, 2, 3)] + [None]
    table = pa.table({"time": np.arange(5), "type": ["B"] * 5, "x": pa.array(values, typ)})
    for literal in ("1e999999999", "-1e999999999", "1e-999999999", "-1e-999999999", "0e-5000"):
        for op in COMPARISONS:
            text = f"RETURN COUNT(*) PATTERN B WHERE B.x {op} {literal} WITHIN 1000 s"
            got = gpu_hamlet.aggregate(table, text, backend="cpu")["q1"]
            want = sum(v is not None and COMPARISONS[op](v, Decimal(literal)) for v in values)
            assert got.column("count").to_pylist() == ([want] if want else []), (op, literal)


def test_pandas_events_arrow_cannot_convert_and_their_nan():
    """A pandas object column of strings and numbers raised Arrow's bare ArrowTypeError; now an
    EventDataError naming the column. A float NaN from pandas is null, as pandas means it (and
    Spark's createDataFrame reads it): SUM skips it rather than naming a NaN."""
    import pandas as pd

    text = "RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+) WITHIN 10 s"
    mixed = pd.DataFrame({"time": [1, 2, 3], "type": ["A", 1, "B"]})
    with pytest.raises(EventDataError, match=r"do not convert to Arrow: .*column type"):
        gpu_hamlet.aggregate(mixed, text, backend="cpu")
    nan = pd.DataFrame({"time": [1, 2, 3], "type": ["A", "B", "B"], "x": [1.0, np.nan, 3.0]})
    (row,) = gpu_hamlet.aggregate(nan, text, backend="cpu")["q1"].to_pylist()
    assert row["count"] == 3 and row["sum_B_x"] == 6.0  # (3.0 in two trends; the null in two)
    twice = pd.DataFrame([[1, "A", 1, 2]], columns=["time", "type", "x", "x"])  # (a ValueError)
    sparse = nan.assign(x=pd.arrays.SparseArray([1.0, 0.0, 3.0]))  # (a TypeError)
    for frame, why in ((twice, "Duplicate column names"), (sparse, "Sparse pandas data")):
        with pytest.raises(EventDataError, match=f"do not convert to Arrow: {why}"):
            gpu_hamlet.aggregate(frame, text, backend="cpu")


def test_parquet_datasets_and_readers_are_events(tmp_path):
    """DESIGN.md lists Parquet among the event tables: `aggregate` reads a Parquet file or folder
    by its path (as written: `[1]` is no glob), a ParquetFile, a pyarrow dataset and a
    RecordBatchReader, each giving the table's result. A path that is not Parquet, a Spark
    DataFrame and other objects are EventDataErrors that say what to pass instead (only tables,
    batches and pandas frames were accepted)."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    table = pa.table({"time": [1, 2, 3, 4], "type": list("ABBC"), "x": [1, 2, 3, 4]})
    text = "RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s"
    want = gpu_hamlet.aggregate(table, text, backend="cpu")["q1"]
    assert want.to_pylist()[0]["count"] == 3
    one, folder = tmp_path / "events[1].parquet", tmp_path / "parts"
    pq.write_table(table, one)
    folder.mkdir()
    pq.write_table(table.slice(0, 2), folder / "a.parquet")
    pq.write_table(table.slice(2), folder / "b.parquet")
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=1))
    for events in (str(one), one, folder, pq.ParquetFile(one), ds.dataset(folder), reader):
        assert gpu_hamlet.aggregate(events, text, backend="cpu")["q1"].equals(want), events
    (tmp_path / "e.csv").write_text("time,type\n1,A\n")
    with pytest.raises(EventDataError, match=r"'.*e.csv' is not Parquet .* pass the table"):
        gpu_hamlet.aggregate(str(tmp_path / "e.csv"), text, backend="cpu")
    with pytest.raises(EventDataError, match=r"'.*missing.parquet' does not exist"):
        gpu_hamlet.aggregate(tmp_path / "missing.parquet", text, backend="cpu")
    with pytest.raises(EventDataError, match="a Parquet file or folder .* not int"):
        gpu_hamlet.aggregate(42, text, backend="cpu")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "_SUCCESS").write_text("")  # (Spark's marker: not read)
    with pytest.raises(EventDataError, match=r"'.*empty' holds no Parquet files"):
        gpu_hamlet.aggregate(empty, text, backend="cpu")
    with pytest.raises(EventDataError, match=r"not a path .*\.iter_batches\(\)"):
        gpu_hamlet.aggregate_stream(str(one), text, backend="cpu")  # (not its characters)


def test_a_hive_partitioned_parquet_folder_reads_its_keys_as_spark_does(tmp_path):
    """`key=value` subfolders are columns of the type their values show, as Spark reads them
    (Arrow's `read_table` made them dictionaries: SUM over such a key was refused, a GROUPBY
    column came back a dictionary); a key also held in the files is an EventDataError naming
    the path and the file, as Spark refuses it (Arrow took the folder's value for every row, or
    raised its bare ArrowTypeError where the types differed)."""
    import pyarrow.parquet as pq

    table = pa.table(
        {"time": [1, 2, 3, 4, 5], "type": list("ABBCB"), "x": [1, 2, 2, 1, 2], "g": list("uuvuv")}
    )
    text = "RETURN g, SUM(B.x), COUNT(*) PATTERN SEQ(A, B+, C) GROUPBY g WITHIN 100 s"
    want = gpu_hamlet.aggregate(table, text, backend="cpu")["q1"]
    pq.write_to_dataset(table, tmp_path / "h", partition_cols=["x", "g"])
    got = gpu_hamlet.aggregate(tmp_path / "h", text, backend="cpu")["q1"]
    assert got.schema.field("g").type == pa.string()
    assert got.to_pylist() == want.to_pylist()
    (tmp_path / "d" / "g=u").mkdir(parents=True)
    pq.write_table(table, tmp_path / "d" / "g=u" / "p.parquet")  # (g in the file as well)
    with pytest.raises(EventDataError, match=r"'.*d': column 'g' is both in the file .*p.parquet"):
        gpu_hamlet.aggregate(tmp_path / "d", text, backend="cpu")


class _Meters(pa.ExtensionType):
    """A user's extension type, as pyarrow's docs write one: Python cannot hash it."""

    def __init__(self) -> None:
        super().__init__(pa.float64(), "example.meters")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):  # type: ignore[no-untyped-def]
        return cls()


def test_extension_type_columns():
    """A column of a user's extension type that no query reads is ignored (the schema keyed a
    cache: every call was a TypeError); one a query reads, of any extension type, is a
    WorkloadError naming the query and the storage type to cast to (GROUPBY, equivalence,
    MIN/MAX and NEXT over arrow.uuid raised Arrow's bare ArrowNotImplementedError)."""
    events = pa.table(
        {
            "time": [1, 2, 3],
            "type": ["A", "B", "B"],
            "m": pa.ExtensionArray.from_storage(_Meters(), pa.array([1.0, 2.0, 3.0])),
            "id": pa.array([bytes(16), bytes(16), b"1" * 16], pa.uuid()),
        }
    )
    text = "q: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 10 s"
    assert gpu_hamlet.aggregate(events, text, backend="cpu")["q"].column("count").to_pylist() == [3]
    assert gpu_hamlet.aggregate_stream([events], text, backend="cpu")["q"].num_rows == 1
    for use in ("GROUPBY id", "WHERE [id]", "WHERE B.id = NEXT(B).id"):
        with pytest.raises(WorkloadError, match="query q: column 'id' is of the extension type "
                           r"arrow.uuid, .* storage type fixed_size_binary\[16\]"):  # fmt: skip
            gpu_hamlet.aggregate(events, text.replace("WITHIN", f"{use} WITHIN"), backend="cpu")


def test_filters_whose_literals_python_holds_equal_are_apart():
    """0.1 (a float) and the Decimal of float 0.1's exact value are equal in Python, but not on
    a decimal column: queries differing only there ran as one (`run_as`), shared a filter mask,
    and took each other's compiled plan from call to call."""
    exact = "0.1000000000000000055511151231257827021181583404541015625"  # float(0.1), exactly
    x = pa.array([Decimal(v) for v in ("0", "0.1000000000000000001", "0")],
                 pa.decimal128(38, 30))  # fmt: skip
    events = pa.table({"time": [1, 2, 3], "type": ["A", "B", "C"], "x": x})
    lo = "lo: RETURN COUNT(*) PATTERN SEQ(A, B, C) WHERE B.x > 0.1 WITHIN 10 s"
    hi = f"hi: RETURN COUNT(*) PATTERN SEQ(A, B, C) WHERE B.x > {exact} WITHIN 10 s"
    for text in (f"{lo}; {hi}", f"{hi}; {lo}", f"{lo}; {hi.replace('10 s', '20 s')}"):
        got = gpu_hamlet.aggregate(events, text, backend="cpu")
        assert (got["lo"].num_rows, got["hi"].num_rows) == (1, 0), text
    for first, second in ((lo, hi), (hi, lo)):  # (one call after the other)
        gpu_hamlet.aggregate(events, parse_workload(first), backend="cpu")
        name = second[:2]
        got = gpu_hamlet.aggregate(events, parse_workload(second), backend="cpu")[name]
        assert got.num_rows == (name == "lo")


def test_errors_found_in_a_run_name_the_query_asked():
    """An AND query runs as counts `q1[left]`, ...; queries alike but for RETURN as one run
    `q1[return]`: a window not whole in ticks, and a window_end past the int32 time type, named
    those runs, which no user wrote (and `.query` was `q1[left]`)."""
    events = pa.table({"time": [1, 2, 3, 4], "type": ["A", "B", "A", "B"]})
    with pytest.raises(WorkloadError, match=r"^query q1: WITHIN 500 ms is not a whole") as e:
        gpu_hamlet.aggregate(events, "q1: RETURN COUNT(*) PATTERN SEQ(A, B) AND A WITHIN 500 ms")
    assert e.value.query == "q1"
    late = pa.table({"time": pa.array([2**31 - 5, 2**31 - 3], pa.int32()), "type": ["A", "B"]})
    for text in (
        "q1: RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 10 s; "
        "q2: RETURN COUNT(A) PATTERN SEQ(A, B) WITHIN 10 s",
        "q1: RETURN COUNT(*) PATTERN SEQ(A, B) AND B WITHIN 10 s",
    ):
        with pytest.raises(EventDataError, match=r"^query q1: the window starting at 2147483640"):
            gpu_hamlet.aggregate(late, text, backend="cpu")


@pytest.mark.parametrize(
    ("view", "read_as", "values"),
    [
        (pa.float16(), pa.float32(), [1.5, -2.0, None, 3.0, 0.5, 3.0, -0.0, 2.5]),
        (pa.string_view(), pa.large_string(), ["b", "a", None, "c", "a", "bb", "", "c"]),
        ("ree", pa.int64(), [5, 5, None, 3, 3, 3, 1, 9]),
        ("ree", pa.large_string(), ["b", "b", None, "c", "a", "a", "", "c"]),
        ("ree", pa.string_view(), ["b", "b", None, "c", "a", "a", "", "c"]),
        ("ree", "dictionary", ["b", "b", None, "c", "a", "a", "", "c"]),
    ],
)
def test_columns_arrow_cannot_compute_on_are_read_as_a_type_holding_their_values(
    view, read_as, values
):
    """float16, string_view and run-end encoded ("ree") columns (Arrow compares, sums, takes or
    sorts none of them; such a type column too) give the tables of their values as a plain
    column: filters, GROUPBY, [equivalence], NEXT, MIN and MAX (of that type, as
    `result_schemas` says). They raised ArrowNotImplementedError (helpers' hunts; a run-end
    encoded column only once an event of another type was dropped)."""
    n = len(values)
    # A run-end encoding of string_view or dictionary values, read as large_string or string
    encoded = read_as if view == "ree" and read_as in ("dictionary", pa.string_view()) else None
    if encoded is not None:
        read_as = (
            pa.large_string()
            if encoded == pa.string_view()
            else pa.dictionary(pa.int32(), pa.string())
        )
    rng = np.random.default_rng(3)
    base = {
        "time": pa.array(np.arange(n), pa.int64()),
        "g": pa.array(values),
        "k": pa.array(rng.integers(0, 2, n)),
    }
    number = pa.types.is_floating(read_as) or pa.types.is_integer(read_as)
    literal = "1" if number else "'a'"
    text = ";".join(
        [
            "RETURN g, COUNT(*), MIN(B.g), MAX(B.g) PATTERN SEQ(A, B+) GROUPBY g WITHIN 100 s",
            f"RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.g > {literal} WITHIN 100 s",
            "RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE [g] WITHIN 100 s",
            "RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.g < NEXT(B).g WITHIN 100 s",
        ]
    )
    types = ["A", "B", "B", "A", "Z", "B", "A", "B"]
    if encoded is not None:
        # Arrow decodes no run-end encoding of these values (a run per row here): the type and
        # GROUPBY columns raised bare Arrow errors, or the type column was refused as no text.
        def ree(col: pa.Array) -> pa.Array:
            values = col.dictionary_encode() if encoded == "dictionary" else col.cast(encoded)
            ends = pa.array(np.arange(1, len(col) + 1), pa.int32())
            return pa.RunEndEncodedArray.from_arrays(ends, values)

        g = base["g"].cast(read_as) if encoded != "dictionary" else base["g"].dictionary_encode()
        want_events = pa.table({**base, "type": types, "g": g})
        got_events = pa.table({**base, "type": ree(pa.array(types)), "g": ree(base["g"])})
    elif view == "ree":
        want_events = pa.table({**base, "type": types, "g": base["g"].cast(read_as)})
        # (every column: the time, type, GROUPBY and attribute columns alike)
        cols = want_events.column_names
        got_events = pa.table({c: pc.run_end_encode(want_events.column(c)) for c in cols})
    else:
        want_events = pa.table({**base, "type": types, "g": base["g"].cast(read_as)})
        got_events = pa.table(
            {**base, "type": pa.array(types, pa.string_view()), "g": base["g"].cast(view)}
        )
    want = gpu_hamlet.aggregate(want_events, text, backend="cpu")
    got = gpu_hamlet.aggregate(got_events, text, backend="cpu")
    schemas = result_schemas(got_events.schema, text)
    for name, table in got.items():
        assert table.schema.equals(schemas[name]), name
        assert table.equals(want[name]), name
    assert got["q1"].schema.field("g").type == read_as
    assert got["q1"].schema.field("min_B_g").type == read_as


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sharing", ["dynamic", "none"])
def test_bigint_sums_of_wide_decimals_over_hundreds_of_digits(backend, sharing):
    """Counts of 2^800 and sums of decimal(38) values near 10^37 over them take 'modps' passes
    of primes below 2^50, whose products wrap in int64 (gpu_hamlet/core/rings.py `lane_mul`;
    the decimals' limbs modulo such primes, attributes.py `_limbs_mod`). One A, 800 B's, one C:
    SEQ(A, B+, C) has 2^800 - 1 trends, and each B is in 2^799 of them."""
    n = 800
    xs = [Decimal(10**37 - 7 * i) if i % 3 else Decimal(-(10**36) - i) for i in range(n)]
    events = pa.table(
        {
            "time": list(range(n + 2)),
            "type": ["A"] + ["B"] * n + ["C"],
            "x": pa.array([Decimal(0)] + xs + [Decimal(0)], pa.decimal128(38, 0)),
        }
    )
    wl = "q: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 1 hour"
    got = gpu_hamlet.aggregate(events, wl, numeric="bigint", backend=backend, sharing=sharing)
    row = got["q"].to_pylist()[0]
    assert int(row["count"]) == 2**n - 1
    assert int(row["sum_B_x"]) == 2 ** (n - 1) * sum(int(x) for x in xs)


def test_bigint_digits_beyond_pythons_conversion_limit():
    """bigint results of more digits than Python converts between int and str by default
    (4,300): a count of 2^15000 - 1 (4,516 digits), a sum of scaled decimals over it, and an
    AND of two such patterns, whose pairs (9,031 digits) are counted from its parts' digits."""
    n = 15_000
    events = pa.table(
        {
            "time": list(range(n + 2)),
            "type": ["A"] + ["B"] * n + ["C"],
            "x": pa.array([Decimal("0.00")] + [Decimal("1.25")] * n + [Decimal("0.00")],
                          pa.decimal128(10, 2)),
        }
    )  # fmt: skip
    wl = (
        "c: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 1 day;"
        "p: RETURN COUNT(*) PATTERN SEQ(A, B+, C) AND SEQ(A, B+, C) WITHIN 1 day"
    )
    got = gpu_hamlet.aggregate(events, wl, numeric="bigint")
    count, total = got["c"].to_pylist()[0]["count"], got["c"].to_pylist()[0]["sum_B_x"]
    pairs = got["p"].to_pylist()[0]["count"]
    trends = 2**n - 1
    assert len(count) == 4516 and len(pairs) == 9031
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # (to check them here)
    try:
        assert count == str(trends) and pairs == str(trends * (trends - 1) // 2)
        assert total == f"{2 ** (n - 1) * 125 * n // 100}.{2 ** (n - 1) * 125 * n % 100:02d}"
    finally:
        sys.set_int_max_str_digits(before)


def test_an_and_query_keeps_the_two_instants_of_a_fall_back_hour_apart():
    """An AND's counts are joined on their groups' and windows' values: in a zone with daylight
    saving, 01:30 EDT and 01:30 EST are two instants whose Python datetimes compare equal (they
    differ in `fold` alone), and their groups or windows were one. Each table equals the one of
    the same instants in UTC."""
    import datetime as dt

    e1 = int(dt.datetime(2021, 11, 7, 5, 30, tzinfo=dt.UTC).timestamp()) * 10**6
    e2 = e1 + 3600 * 10**6
    ticks = pa.array([e1, e1 + 10**6, e2, e2 + 10**6, e2 + 2 * 10**6], pa.int64())
    text = (
        "g: RETURN g, COUNT(*) PATTERN A AND B GROUPBY g WITHIN 10 s;"
        "w: RETURN COUNT(*) PATTERN A AND B WITHIN 10 min"
    )
    tables = {}
    for zone in ("America/New_York", "UTC"):
        stamps = ticks.cast(pa.timestamp("us", zone))
        groups = pa.array([e1, e1, e2, e2, e2]).cast(stamps.type)
        events = pa.table({"time": stamps, "type": ["A", "B", "A", "B", "B"], "g": groups})
        tables[zone] = gpu_hamlet.aggregate(events, text, backend="cpu")
    for name in ("g", "w"):
        here, utc = tables["America/New_York"][name], tables["UTC"][name]
        assert here.num_rows == 2, name
        assert here.column("count").to_pylist() == utc.column("count").to_pylist() == [1, 2]
        for column in set(here.column_names) - {"count"}:
            as_utc = here.column(column).cast(utc.schema.field(column).type)
            assert as_utc.equals(utc.column(column)), (name, column)


@pytest.mark.parametrize(
    "values",
    [
        pa.array([1, 2, 3, 4], pa.int64()).cast(pa.timestamp("s")),
        pa.array([Decimal(1), Decimal(2), Decimal(3), Decimal(4)], pa.decimal128(10, 2)),
        pa.array([1, 2, 3, 4], pa.float32()).cast(pa.float16()),
        pa.array(["1", "2", "3", "4"], pa.string_view()),
    ],
    ids=lambda v: str(v.type),
)
def test_dictionaries_of_any_values_answer_as_result_schemas_says(values):
    """Dictionary columns of timestamps, decimals, float16 or string_view values: MIN, MAX and
    GROUPBY give tables of the schema `result_schemas` declares (what a Spark job declares), with
    rows, with none and with no trend; they raised ArrowNotImplementedError (a dictionary's
    float16 and string_view values are read as float32 and large_string, as plain columns are,
    and an empty dictionary column is built from its parts). A helper's hunt."""
    at = [0, 1, 2, 3, 0]
    coded = pa.DictionaryArray.from_arrays(pa.array(at, pa.int32()), values)
    events = pa.table({"type": list("ABBCA"), "time": [1, 2, 3, 4, 5], "d": coded})
    plain = events.set_column(2, "d", pa.array([values[i].as_py() for i in at], values.type))
    text = (
        "m: RETURN MIN(B.d), MAX(B.d) PATTERN SEQ(A, B+, C) WITHIN 10 s;"
        "g: RETURN d, COUNT(*) PATTERN SEQ(A, B+, C) GROUPBY d WITHIN 10 s;"
        "none: RETURN MIN(B.d) PATTERN SEQ(C, B) WITHIN 10 s"
    )
    declared = result_schemas(events.schema, text)
    for rows in (events, events.slice(0, 0)):
        got = gpu_hamlet.aggregate(rows, text, backend="cpu")
        assert all(got[n].schema.equals(declared[n]) for n in declared)
    got, want = (gpu_hamlet.aggregate(t, text, backend="cpu") for t in (events, plain))
    assert got["m"].num_rows == 1 and got["none"].num_rows == 0
    for name in ("m", "g"):
        for column in got[name].column_names:
            mine, theirs = got[name].column(column), want[name].column(column)
            if pa.types.is_dictionary(mine.type):
                mine = mine.cast(mine.type.value_type)
            assert mine.to_pylist() == theirs.cast(mine.type).to_pylist(), (name, column)

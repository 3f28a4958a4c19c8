"""Result schemas from the query and the events' schema alone (gpu_hamlet/query/schema.py): the
same as the schemas of the engine's tables, with and without rows, over random workloads, every
numeric mode and many column and time types; and the checks that need no rows raise what the
engine raises on the same events (the Spark driver relies on both, docs/architecture.md
section 5)."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from compare import NUMERIC_MODES, events_to_table, expected_value_type
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import event_streams, workload_cases, workload_types

import gpu_hamlet
from gpu_hamlet.engine.evaluate import result_schemas
from gpu_hamlet.engine.options import Options
from gpu_hamlet.errors import EventDataError, WorkloadError
from gpu_hamlet.query.parser import parse_workload
from gpu_hamlet.query.schema import in_result_order, result_schema
from gpu_hamlet.query.time_axis import time_axis

TIME_TYPES = (
    pa.int64(),
    pa.int32(),
    pa.uint32(),
    pa.float64(),
    pa.float32(),
    pa.timestamp("s"),
    pa.timestamp("ms", tz="UTC"),
    pa.timestamp("ns"),
)
# Types of the strategies' attributes: x (small ints), y (multiples of 0.25), g and s (strings),
# k (0 or 1).
X_TYPES = (
    pa.int64(),
    pa.int8(),
    pa.uint16(),
    pa.uint64(),
    pa.bool_(),
    pa.float32(),
    pa.decimal128(10, 2),
    pa.decimal128(38, 0),
    pa.decimal256(50, 3),
)
Y_TYPES = (pa.float64(), pa.float32(), pa.decimal128(12, 2))
G_TYPES = (pa.string(), pa.large_string())
K_TYPES = (pa.int64(), pa.int16(), pa.bool_())


def retyped(table: pa.Table, time_type: pa.DataType, types: dict[str, pa.DataType]) -> pa.Table:
    """`table` (int64 seconds, the strategies' schema) with its time column as `time_type`
    (1000 s later: the windows of unsigned times start after 0) and attribute columns cast to
    `types`."""
    cols = {}
    for name in table.column_names:
        col = table.column(name)
        t = types.get(name)
        if name == "time":
            col = pc.add(col, 1000)
            if pa.types.is_timestamp(time_type):
                per_second = {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}[time_type.unit]
                col = pc.multiply(col, per_second).cast(pa.int64()).cast(time_type)
            else:
                col = col.cast(time_type)
        elif t is not None:
            if pa.types.is_boolean(t):
                col = pc.not_equal(col, 0)
            elif pa.types.is_unsigned_integer(t):
                col = pc.abs(col).cast(t)
            elif pa.types.is_decimal(t):
                col = pa.array(
                    [None if v is None else decimal.Decimal(v) for v in col.to_pylist()], t
                )
            else:
                col = col.cast(t)
        cols[name] = col
    return pa.table(cols)


def outcome(call):
    """(result, None), or (None, (error type, message)) for the engine's own errors."""
    try:
        return call(), None
    except (WorkloadError, EventDataError) as exc:
        return None, (type(exc), str(exc))


def assert_schemas_match(table: pa.Table, text: str, options: Options) -> dict | None:
    """result_schemas over the table's schema is what the engine's tables have, over the table
    and over none of its rows; or both raise the same error. Returns the schemas (or None)."""
    got, got_err = outcome(lambda: result_schemas(table.schema, text, options))
    for rows in (table, table.slice(0, 0)):
        want, want_err = outcome(lambda rows=rows: engine_tables(rows, text, options))
        assert got_err == want_err
        assert got == (want and {name: t.schema for name, t in want.items()})
    return got


def engine_tables(table: pa.Table, text: str, options: Options) -> dict[str, pa.Table]:
    return gpu_hamlet.aggregate(
        table,
        text,
        backend="cpu",
        sharing=options.sharing,
        numeric=options.numeric,
        on_overflow=options.on_overflow,
        time_col=options.time_col,
        type_col=options.type_col,
    )


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    case=workload_cases(max_queries=3),
    data=st.data(),
    numeric=st.sampled_from(NUMERIC_MODES),
    time_type=st.sampled_from(TIME_TYPES),
    x=st.sampled_from(X_TYPES),
    y=st.sampled_from(Y_TYPES),
    g=st.sampled_from(G_TYPES),
    k=st.sampled_from(K_TYPES),
)
def test_random_workloads_and_types(case, data, numeric, time_type, x, y, g, k):
    text, wl = case
    events = data.draw(event_streams(workload_types(wl), nulls=data.draw(st.booleans())))
    table = retyped(events_to_table(events), time_type, {"x": x, "y": y, "g": g, "s": g, "k": k})
    schemas = assert_schemas_match(table, text, Options(numeric=numeric, on_overflow="null"))
    if schemas is None:  # a filter literal the column's type cannot take: raised alike
        return
    attr_types = {"x": x, "y": y}
    for q in wl:  # as tests/compare.py reads the contract (its SUMs: integers and scale 0)
        schema = schemas[q.name]
        assert schema.names == [*q.groupby, "window_start", "window_end"] + [
            a.name for a in q.aggregates
        ]
        assert schema.field("window_start").type == time_type
        for a in q.aggregates:
            t = attr_types.get(a.attr or "")
            if a.func == "SUM" and (t == pa.bool_() or (pa.types.is_decimal(t) and t.scale)):
                continue
            assert schema.field(a.name).type == expected_value_type(a, numeric, attr_types)


# Column types of the aggregated attribute `x`, with values for it; MIN and MAX take any of them,
# SUM and AVG the numbers.
ATTRIBUTES = {
    "int8": (pa.int8(), [1, 2, 3, 4]),
    "int64": (pa.int64(), [1, 2, 3, 4]),
    "uint32": (pa.uint32(), [1, 2, 3, 4]),
    "uint64": (pa.uint64(), [1, 2, 3, 4]),
    "bool": (pa.bool_(), [True, False, True, True]),
    "float32": (pa.float32(), [1.5, 2.0, 3.0, 4.0]),
    "float64": (pa.float64(), [1.5, 2.0, None, 4.0]),
    "decimal(10,2)": (pa.decimal128(10, 2), [decimal.Decimal("1.25")] * 4),
    "decimal256(50,3)": (pa.decimal256(50, 3), [decimal.Decimal("1.250"), None] * 2),
    "string": (pa.string(), ["a", "b", "c", "d"]),
    "large_string": (pa.large_string(), ["a", "b", None, "d"]),
    "timestamp": (pa.timestamp("ms", tz="UTC"), [1, 2, 3, 4]),
    "date32": (pa.date32(), [1, 2, 3, 4]),
    "binary": (pa.binary(), [b"a", b"b", b"c", b"d"]),
}
NUMBERS = {"int8", "int64", "uint32", "uint64", "bool", "float32", "float64"}
NUMBERS |= {"decimal(10,2)", "decimal256(50,3)"}


@pytest.mark.parametrize("numeric", NUMERIC_MODES)
@pytest.mark.parametrize("attr", list(ATTRIBUTES))
def test_every_aggregate_of_every_column_type(attr, numeric):
    t, values = ATTRIBUTES[attr]
    funcs = ["MIN", "MAX"] + (["SUM", "AVG"] if attr in NUMBERS else [])
    aggs = ", ".join(f"{f}(B.x)" for f in funcs)
    text = (
        f"grouped: RETURN g, COUNT(*), COUNT(B), {aggs} PATTERN SEQ(A, B+, C) GROUPBY g "
        f"WITHIN 10 s; alone: RETURN {aggs} AS last PATTERN SEQ(A, B+) WITHIN 4 s SLIDE 2 s"
    )
    text += "; by_x: RETURN COUNT(*) PATTERN B+ GROUPBY x WITHIN 10 s"
    for time_type in (pa.int64(), pa.float32(), pa.timestamp("us"), pa.int16()):
        events = pa.table(
            {
                "time": pa.array([1, 2, 3, 4]).cast(time_type),
                "type": ["A", "B", "B", "C"],
                "g": pa.array(["g"] * 4, pa.large_string()),
                "x": pa.array(values, t),
            }
        )
        schemas = assert_schemas_match(events, text, Options(numeric=numeric))
        assert schemas is not None
        results = engine_tables(events, text, Options(numeric=numeric))
        assert all(t.num_rows for t in results.values())  # real rows were compared
        assert schemas["by_x"].field("x").type == t
        assert schemas["grouped"].field("min_B_x").type == t


@pytest.mark.parametrize(
    ("column", "numeric", "want"),
    [
        (pa.int32(), "exact", pa.decimal128(38, 0)),
        (pa.int32(), "bigint", pa.string()),
        (pa.int32(), "float", pa.float64()),
        (pa.decimal128(12, 3), "exact", pa.decimal128(38, 3)),
        (pa.decimal256(60, 5), "exact", pa.decimal128(38, 5)),
        (pa.decimal128(12, 3), "bigint", pa.string()),
        (pa.decimal128(12, 3), "float", pa.float64()),
        (pa.float32(), "exact", pa.float64()),
        (pa.bool_(), "exact", pa.decimal128(38, 0)),
    ],
)
def test_sum_types_follow_the_contract(column, numeric, want):
    """docs/semantics.md section 7: SUM of integers, booleans and decimals is exact (scale of the
    input), of floats float64; AVG float64; COUNT like SUM of integers; MIN keeps the type."""
    schema = pa.schema([("time", pa.timestamp("us")), ("type", pa.string()), ("x", column)])
    q = parse_workload(
        "RETURN COUNT(*), SUM(A.x), AVG(A.x), MIN(A.x) PATTERN A+ WITHIN 1 min"
    ).queries[0]
    got = result_schema(q, time_axis(schema.field("time").type, "time"), schema, numeric)
    count = (
        pa.float64()
        if numeric == "float"
        else {"exact": pa.decimal128(38, 0)}.get(numeric, pa.string())
    )
    assert got == pa.schema(
        [
            ("window_start", pa.timestamp("us")),
            ("window_end", pa.timestamp("us")),
            ("count", count),
            ("sum_A_x", want),
            ("avg_A_x", pa.float64()),
            ("min_A_x", column),
        ]
    )


EVENTS = pa.table(
    {
        "time": pa.array([1, 2, 3], pa.int64()),
        "type": ["A", "B", "C"],
        "x": pa.array([1, 2, 3], pa.int64()),
        "s": ["a", "b", "c"],
        "u": pa.array([1, 2, 3], pa.uint64()),
        "n": pa.array([1, 2, 3], pa.int32()),
    }
)


@pytest.mark.parametrize(
    ("table", "text", "options"),
    [
        (EVENTS, "RETURN AVG(B.speed) PATTERN SEQ(A, B+) WITHIN 1 min", Options()),
        (EVENTS, "RETURN COUNT(*) PATTERN SEQ(A, B+) GROUPBY time WITHIN 1 min", Options()),
        (EVENTS, "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min", Options(time_col="u")),
        (EVENTS, "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min", Options(time_col="s")),
        (EVENTS, "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min", Options(type_col="n")),
        (EVENTS, "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 1 min", Options(time_col="clock")),
        (EVENTS, "RETURN SUM(B.s) PATTERN SEQ(A, B+) WITHIN 1 min", Options()),
        (EVENTS, "RETURN AVG(B.s) PATTERN SEQ(A, B+) WITHIN 1 min", Options(numeric="float")),
        (EVENTS, "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 500 ms", Options()),
        (EVENTS, "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 2 s SLIDE 1500 ms", Options()),
        (
            EVENTS.set_column(0, "time", pa.array([1, 2, 3], pa.timestamp("ns"))),
            "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 200000 d",
            Options(),
        ),
        (EVENTS, "RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.x < 'a' WITHIN 1 min", Options()),
        (EVENTS, "RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.s > 2 WITHIN 1 min", Options()),
        (
            EVENTS.append_column("x", pa.array([4, 5, 6])),
            "RETURN SUM(B.x) PATTERN SEQ(A, B+) WITHIN 1 min",
            Options(),
        ),
        (
            EVENTS.append_column("l", pa.array([[1], [2], [3]])),
            "RETURN MIN(B.l) PATTERN SEQ(A, B+) WITHIN 1 min",
            Options(),
        ),
        (
            EVENTS.append_column("st", pa.array([{"a": 1}] * 3)),
            "RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.st = NEXT(B).st WITHIN 1 min",
            Options(),
        ),
        (
            EVENTS,
            "ok: RETURN COUNT(*) PATTERN SEQ(A, B) WHERE B.x > 1 WITHIN 1 min;"
            "bad: RETURN SUM(C.s) PATTERN SEQ(A, C) WITHIN 1 min",
            Options(),
        ),
    ],
)
def test_checks_without_rows_raise_what_the_engine_raises(table, text, options):
    """Missing columns, time and type column types, attributes that are the time column, SUM
    and AVG of strings, durations that are no whole ticks or too long, filter literals of the
    wrong kind: the same error and message with and without the rows."""
    got, got_err = outcome(lambda: result_schemas(table.schema, text, options))
    assert got is None and got_err is not None
    for rows in (table, table.slice(0, 0)):
        assert outcome(lambda rows=rows: engine_tables(rows, text, options)) == (None, got_err)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.one_of(st.none(), st.integers(-3, 3)), st.integers(0, 4)), max_size=12),
    st.sampled_from(["int", "string", "none"]),
    st.booleans(),
)
def test_result_order_is_arrows_sort(rows, group_kind, presort):
    """`in_result_order` gives Arrow's sort by GROUPBY values then window_start, whether the
    rows come in that order (then it checks, for integer keys without nulls) or not."""
    if presort:
        rows = sorted(rows, key=lambda r: (r[0] is None, r[0] or 0, r[1]))
    starts = pa.array([r[1] for r in rows], pa.timestamp("ms"))
    cols = {"window_start": starts, "v": pa.array(range(len(rows)))}
    groupby: tuple[str, ...] = ()
    if group_kind != "none":
        g = [r[0] for r in rows]
        cols["g"] = pa.array(
            [None if x is None else str(x) for x in g] if group_kind == "string" else g,
            pa.string() if group_kind == "string" else pa.int64(),
        )
        groupby = ("g",)
    table = pa.table(cols)
    want = (
        table.sort_by([(k, "ascending") for k in (*groupby, "window_start")])
        if len(rows) > 1
        else table
    )
    assert in_result_order(table, groupby).equals(want)

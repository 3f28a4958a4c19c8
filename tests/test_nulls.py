"""Nulls follow SQL, absent pattern types are no error, and values SUM cannot add are named
(issue 16, points 1, 2, 3 and 7): against the oracle, on both backends, in every numeric mode and
through Spark."""

from __future__ import annotations

import decimal
import fractions
import itertools
import math
import warnings

import numpy as np
import pyarrow as pa
import pytest
from compare import assert_matches_oracle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import oracle

import gpu_hamlet
from gpu_hamlet.engine.evaluate import result_schemas
from gpu_hamlet.engine.options import SHARING_MODES
from gpu_hamlet.errors import AbsentTypeWarning, EventDataError, WorkloadError

try:
    from compare import NUMERIC_MODES, assert_matches_oracle, events_to_table
    from oracle import oracle
    from strategies import event_streams, workload_cases, workload_types
except ImportError:  # pragma: no cover
    from tests.compare import NUMERIC_MODES, assert_matches_oracle, events_to_table
    from tests.oracle import oracle
    from tests.strategies import event_streams, workload_cases, workload_types

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

ALL_AGGREGATES = (
    "RETURN COUNT(*), COUNT(B), SUM(B.x), AVG(B.x), MIN(B.x), MAX(B.x) "
    "PATTERN SEQ(A, B+, C) WITHIN 10 s"
)


@st.composite
def null_cases(draw, max_queries: int = 4):
    text, wl = draw(workload_cases(max_queries=max_queries))
    return text, wl, draw(event_streams(workload_types(wl), nulls=True))


@PROPERTY
@given(null_cases(), st.sampled_from(SHARING_MODES))
def test_nulls_match_oracle_in_every_mode(case, sharing):
    """SUM, AVG, MIN and MAX skip nulls (null when nothing is left); COUNT(*) and COUNT(E) count
    the events; a filter comparison with null is false."""
    text, wl, events = case
    expected = oracle(events, wl, with_magnitudes=True)
    table = events_to_table(events)
    for numeric in NUMERIC_MODES:
        got = gpu_hamlet.aggregate(table, text, backend="cpu", sharing=sharing, numeric=numeric)
        assert_matches_oracle(got, expected, wl, numeric)


@pytest.mark.gpu  # the GPU backend's kernels, in numba's CUDA simulator without a device
@settings(PROPERTY, max_examples=15)
@given(null_cases(max_queries=2), st.sampled_from(SHARING_MODES))
def test_nulls_on_the_gpu_backend_equal_the_cpu(case, sharing):
    text, wl, events = case
    table = events_to_table(events)
    for numeric in NUMERIC_MODES:
        gpu = gpu_hamlet.aggregate(table, text, backend="gpu", sharing=sharing, numeric=numeric)
        cpu = gpu_hamlet.aggregate(table, text, backend="cpu", sharing=sharing, numeric=numeric)
        for name in wl.names:
            assert gpu[name].equals(cpu[name]), (name, numeric, gpu[name], cpu[name])


def _abc(x: list, x_type: pa.DataType) -> pa.Table:
    """A1, then B events with values `x`, then C: every non-empty subset of the Bs is a trend."""
    n = len(x)
    return pa.table(
        {
            "time": pa.array(range(n + 2), pa.int64()),
            "type": ["A"] + ["B"] * n + ["C"],
            "x": pa.array([None] + list(x) + [None], x_type),
        }
    )


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("numeric", NUMERIC_MODES)
def test_sum_over_int64_with_a_null_elsewhere_is_exact(backend, numeric):
    """A null on another row used to send the column through float64 (wrong above 2^53)."""
    big = 2**53 + 1
    table = _abc([big, None], pa.int64())
    got = (
        gpu_hamlet.aggregate(
            table,
            "RETURN SUM(B.x), MIN(B.x), MAX(B.x), AVG(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s",
            backend=backend,
            numeric=numeric,
        )
        .popitem()[1]
        .to_pylist()[0]
    )
    # Trends: {b1}, {b2}, {b1, b2}: b1 occurs twice, b2 (null) twice.
    want_sum = {"exact": decimal.Decimal(2 * big), "bigint": str(2 * big), "float": float(2 * big)}[
        numeric
    ]
    assert got["sum_B_x"] == want_sum
    assert (got["min_B_x"], got["max_B_x"]) == (big, big)
    assert got["avg_B_x"] == float(big)


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_uint64_bool_and_timestamp_columns_with_nulls(backend):
    u = 2**64 - 3
    table = _abc([u, None, 7], pa.uint64())
    got = gpu_hamlet.aggregate(
        table,
        "RETURN SUM(B.x), MIN(B.x), MAX(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s",
        backend=backend,
        numeric="bigint",
    )
    # 7 non-empty subsets of 3 Bs: each B is in 4 of them.
    assert got["q1"].to_pylist()[0] == {
        "window_start": 0,
        "window_end": 10,
        "sum_B_x": str(4 * (u + 7)),
        "min_B_x": 7,
        "max_B_x": u,
    }
    flags = _abc([True, None, True], pa.bool_())
    got = gpu_hamlet.aggregate(
        flags, "RETURN SUM(B.x), AVG(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s", backend=backend
    )
    assert got["q1"].to_pylist()[0]["sum_B_x"] == 8 and got["q1"]["avg_B_x"][0].as_py() == 1.0
    ns = 2**62 + 5  # far above 2^53 nanoseconds
    stamps = _abc([ns, None, ns + 1], pa.timestamp("ns"))
    got = gpu_hamlet.aggregate(
        stamps, "RETURN MIN(B.x), MAX(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s", backend=backend
    )
    assert got["q1"].column("min_B_x").cast(pa.int64()).to_pylist() == [ns]
    assert got["q1"].column("max_B_x").cast(pa.int64()).to_pylist() == [ns + 1]


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("numeric", NUMERIC_MODES)
def test_only_nulls_give_null_aggregates_and_counts_stay(backend, numeric):
    table = _abc([None, None], pa.int64())
    got = gpu_hamlet.aggregate(table, ALL_AGGREGATES, backend=backend, numeric=numeric)[
        "q1"
    ].to_pylist()[0]
    count = {"exact": decimal.Decimal(3), "bigint": "3", "float": 3.0}[numeric]
    assert got["count"] == count
    assert got["count_B"] == {"exact": decimal.Decimal(4), "bigint": "4", "float": 4.0}[numeric]
    assert [got[c] for c in ("sum_B_x", "avg_B_x", "min_B_x", "max_B_x")] == [None] * 4


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_int64_extremes_are_values_not_missing(backend):
    """MIN/MAX keys mark 'no value' with int64's maximum: a column holding it is ranked."""
    top, bottom = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    for x in ([top, top], [bottom, top], [top, None]):
        table = _abc(x, pa.int64())
        got = gpu_hamlet.aggregate(
            table, "RETURN MIN(B.x), MAX(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s", backend=backend
        )["q1"].to_pylist()[0]
        values = [v for v in x if v is not None]
        assert (got["min_B_x"], got["max_B_x"]) == (min(values), max(values))


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("numeric", NUMERIC_MODES)
def test_negative_decimals(backend, numeric):
    """float mode used to add the two 64-bit halves of a negative decimal as if unsigned."""
    d = [decimal.Decimal("-1.25"), decimal.Decimal("-0.01"), None]
    table = _abc(d, pa.decimal128(20, 2))
    got = gpu_hamlet.aggregate(
        table,
        "RETURN SUM(B.x), AVG(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s",
        backend=backend,
        numeric=numeric,
    )["q1"].to_pylist()[0]
    want = {"exact": decimal.Decimal("-5.04"), "bigint": "-5.04", "float": -5.04}[numeric]
    assert got["sum_B_x"] == pytest.approx(want) if numeric == "float" else got["sum_B_x"] == want
    assert got["avg_B_x"] == pytest.approx(-5.04 / 8, rel=1e-12)


@pytest.mark.parametrize(
    "typ", [pa.decimal32(5, 1), pa.decimal64(12, 1), pa.decimal128(5, -2)], ids=str
)
def test_narrow_and_negative_scale_decimals(typ):
    """decimal32, decimal64 and negative scales: sums, MIN/MAX of the column's own type, and as
    GROUPBY, equivalence and NEXT columns, the results of the same values in decimal128 (Arrow
    hashes, ranks and sorts no narrower decimal, and widens a negative scale's MIN/MAX)."""
    values = (
        ["1.5", "1.5", None, "2.5", "0.5"] if typ.scale >= 0 else ["100", "100", None, "200", "0"]
    )
    wide = pa.decimal128(typ.precision, typ.scale)
    text = (
        "agg: RETURN x, COUNT(*), SUM(B.x), AVG(B.x), MIN(B.x), MAX(B.x) "
        "PATTERN SEQ(A, B+) GROUPBY x WITHIN 10 s;"
        "equiv: RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE [x] WITHIN 10 s;"
        "adjacent: RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.x < NEXT(B).x WITHIN 10 s"
    )
    tables = {}
    for t in (typ, wide):
        x = pa.array([None if v is None else decimal.Decimal(v) for v in values], t)
        events = pa.table({"time": [1, 2, 3, 4, 5], "type": ["A", "B", "A", "B", "B"], "x": x})
        tables[t] = gpu_hamlet.aggregate(events, text, backend="cpu")
    for name, got in tables[typ].items():
        want = tables[wide][name]
        assert got.to_pylist() == want.to_pylist(), name
        for field in got.schema:  # the column's own type where results keep it
            assert field.type == (typ if want.schema.field(field.name).type == wide else
                                  want.schema.field(field.name).type), field  # fmt: skip
    assert tables[typ]["agg"].num_rows and tables[typ]["adjacent"].num_rows


@pytest.mark.parametrize("scale", [30, 2, -5])
def test_float_sums_of_decimals_whose_unscaled_sum_is_beyond_float64(scale):
    """A float SUM of a decimal(38, s) column within float64 whose unscaled sum (the value times
    10^s) is not: B+ over 1,000 events of x = 1 sums to 1,000 * 2^999, about 5.4e303, 5.4e333
    unscaled at s = 30. It was scaled after it became float64: an overflow error, or null."""
    # (a negative scale's values are multiples of 10^5: 980 events keep the sum below 1.8e308)
    n, value = (1000, 1) if scale > 0 else (980, 10**5)
    x = pa.array([decimal.Decimal(value)] * n, pa.decimal128(38, scale))
    events = pa.table({"time": range(n), "type": ["B"] * n, "x": x})
    (row,) = gpu_hamlet.aggregate(
        events, "RETURN SUM(B.x), AVG(B.x) PATTERN B+ WITHIN 1 d", backend="cpu", numeric="float"
    )["q1"].to_pylist()
    exact = fractions.Fraction(n * 2 ** (n - 1) * value)
    assert abs(fractions.Fraction(row["sum_B_x"]) - exact) <= exact * fractions.Fraction(1, 10**9)
    assert row["avg_B_x"] == pytest.approx(value, rel=1e-9)


@pytest.mark.parametrize("numeric", NUMERIC_MODES)
@pytest.mark.parametrize("typ", [pa.decimal256(76, -10), pa.decimal256(70, -7)], ids=str)
def test_min_max_of_a_negative_scale_past_76_digits(numeric, typ):
    """MIN and MAX keep a decimal256 whose precision less its (negative) scale passes 76 digits:
    Arrow's if_else widened it by the scale, past any decimal, and raised ArrowInvalid."""
    x = pa.array([None, *(decimal.Decimal(v) for v in ("1E+10", "-5E+10", "2E+10"))], typ)
    events = pa.table({"time": [1, 2, 3, 4], "type": ["A", "B", "B", "B"], "x": x})
    got = gpu_hamlet.aggregate(
        events,
        "RETURN MIN(B.x), MAX(B.x), MAX(A.x) PATTERN SEQ(A, B+) WITHIN 10 s",
        backend="cpu",
        numeric=numeric,
    )["q1"]
    assert got.schema.field("min_B_x").type == typ and got.schema.field("max_A_x").type == typ
    assert got.column("min_B_x").to_pylist() == [decimal.Decimal("-5E+10")]
    assert got.column("max_B_x").to_pylist() == [decimal.Decimal("2E+10")]
    assert got.column("max_A_x").to_pylist() == [None]  # the trends' A has no value


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("numeric", NUMERIC_MODES)
@pytest.mark.parametrize(
    "typ",
    [pa.decimal32(5, -2), pa.decimal64(5, -2), pa.decimal128(5, -2), pa.decimal256(40, -5)],
    ids=str,
)
def test_negative_scale_sums_with_a_null(backend, numeric, typ):
    """SUM and AVG over a negative scale with a null, against exact arithmetic: Arrow's
    fill_null gave the column another scale (1E+2 and a null summed to 1E+4), bigint's strings
    cut digits at a negative scale ('3.'), the exact AVG divided by a rounded 10^scale (100 / 7
    as 14.285714285714285), and decimal256 raised ArrowNotImplementedError (Arrow's abs takes no
    negative scale)."""
    unit = decimal.Decimal(10) ** -typ.scale
    values = [unit, None] + [decimal.Decimal(0)] * 6  # every B in 2^7 trends; 7 have a value
    got = gpu_hamlet.aggregate(
        _abc(values, typ),
        "RETURN SUM(B.x), AVG(B.x) PATTERN SEQ(A, B+, C) WITHIN 1 d",
        backend=backend,
        numeric=numeric,
    )["q1"].to_pylist()[0]
    total = 2**7 * unit
    if numeric == "float":
        assert got["sum_B_x"] == pytest.approx(float(total), rel=1e-12)
        assert got["avg_B_x"] == pytest.approx(float(unit) / 7, rel=1e-12)
        return
    assert got["sum_B_x"] == (str(int(total)) if numeric == "bigint" else total)
    assert got["avg_B_x"] == float(fractions.Fraction(unit) / 7)  # rounded once


def test_decimal_scales_beyond_38():
    """A decimal256 of scale 40 (Arrow formats no decimal128 of it, Spark has none): bigint's
    digits, float's value, and in exact mode a WorkloadError naming the column and the ways out
    (the limit test built 10^(38 - 40) as a float scalar and raised ArrowTypeError)."""
    typ = pa.decimal256(76, 40)
    table = _abc([decimal.Decimal("1E-40"), decimal.Decimal("2E-40"), None], typ)
    text = "q: RETURN SUM(B.x), AVG(B.x) PATTERN SEQ(A, B+, C) WITHIN 1 d"
    got = gpu_hamlet.aggregate(table, text, backend="cpu", numeric="bigint")["q"].to_pylist()[0]
    assert got["sum_B_x"] == "0." + "0" * 38 + "12"  # (1 + 2) * 2^2 trends each
    assert got["avg_B_x"] == pytest.approx(1.5e-40, rel=1e-12)
    got = gpu_hamlet.aggregate(table, text, backend="cpu", numeric="float")["q"].to_pylist()[0]
    assert got["sum_B_x"] == pytest.approx(1.2e-39, rel=1e-12)
    said = r"query q: SUM\(B.x\) over 'x' \(decimal256\(76, 40\)\) would be decimal\(38, 40\)"
    for call in (
        lambda: gpu_hamlet.aggregate(table, text, backend="cpu"),
        lambda: result_schemas(table.schema, text),
    ):
        with pytest.raises(WorkloadError, match=said + r".*numeric='bigint'"):
            call()


def _decimal128_abc(unscaled: list[int], scale: int) -> pa.Table:
    """`_abc` of decimal128(38, scale) values given unscaled: Arrow builds no such array from
    Python Decimals at scales past a few hundred, nor formats them."""
    words = np.array([[u % 2**128 & (2**64 - 1), u % 2**128 >> 64] for u in unscaled], np.uint64)
    x = pa.Array.from_buffers(
        pa.decimal128(38, scale), len(unscaled), [None, pa.py_buffer(words.tobytes())]
    )
    n = len(unscaled)
    return pa.table(
        {
            "time": pa.array(range(n + 2), pa.int64()),
            "type": ["A"] + ["B"] * n + ["C"],
            "x": pa.concat_arrays([pa.nulls(1, x.type), x, pa.nulls(1, x.type)]),
        }
    )


def test_decimal_scales_beyond_a_doubles_powers_of_ten():
    """Arrow allows decimal128(38, 320): float results were divided by 10.0 ** 320, which
    overflows a double, and an AVG quotient beyond float64 was divided in Python ints: bare
    OverflowErrors (a helper's review). Now the division is by 10^320's mantissa and power of
    two, and a quotient beyond float64 is one like any other (null, or an error naming it)."""
    text = "q: RETURN SUM(B.x), AVG(B.x) PATTERN SEQ(A, B+, C) WITHIN 1 d"
    table = _decimal128_abc([10**37, 3 * 10**37], 320)  # 1e-283 and 3e-283
    got = gpu_hamlet.aggregate(table, text, backend="cpu", numeric="float")["q"].to_pylist()[0]
    assert got["sum_B_x"] == pytest.approx(8e-283, rel=1e-15)  # (each B in 2 of 3 trends)
    assert got["avg_B_x"] == pytest.approx(2e-283, rel=1e-15)
    got = gpu_hamlet.aggregate(table, text, backend="cpu", numeric="bigint")["q"].to_pylist()[0]
    assert got["sum_B_x"] == "0." + str(8 * 10**37).rjust(320, "0")
    assert got["avg_B_x"] == 2e-283  # (the exact quotient, rounded once)
    for scale in (-300, -320):  # 1e337 and 1e357: beyond float64
        huge = _decimal128_abc([10**37], scale)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (NumPy's overflow warning leaked at -300)
            got = gpu_hamlet.aggregate(
                huge, text, backend="cpu", numeric="float", on_overflow="null"
            )
        assert got["q"].to_pylist()[0]["sum_B_x"] is None
    for numeric in ("float", "exact", "bigint"):
        with pytest.raises(gpu_hamlet.NumericOverflowError, match=r"query q: \w+\(B.x\)"):
            gpu_hamlet.aggregate(huge, text, backend="cpu", numeric=numeric)
    for numeric in ("exact", "bigint"):
        got = gpu_hamlet.aggregate(huge, text, backend="cpu", numeric=numeric, on_overflow="null")
        assert got["q"].column("avg_B_x").to_pylist() == [None]  # (Arrow formats no SUM here)


@pytest.mark.parametrize("numeric", ["exact", "bigint"])
def test_avg_of_a_cancelling_sum_over_a_count_beyond_decimal38(numeric):
    """COUNT(B) past 10^38 (130 B's) and a sum whose terms cancel (2^60 + 1 and -2^60, which
    float64 adds to 0): exact mode took the float pass's quotient, 0.0, for the divisor was
    certainly beyond decimal(38); the exact sum over the count's float value is 1/130."""
    x = [2**60 + 1, -(2**60)] + [0] * 128
    got = gpu_hamlet.aggregate(
        _abc(x, pa.int64()),
        "RETURN AVG(B.x) PATTERN SEQ(A, B+, C) WITHIN 1 d",
        backend="cpu",
        numeric=numeric,
    )["q1"]
    assert got.column("avg_B_x").to_pylist() == [1 / 130]


def test_bigint_decimal_sums_keep_every_digit_of_their_scale():
    """bigint's decimal strings carry every digit: a sum of 39 digits at scale 10, 4 x 8e27
    (Python's Decimal, which made them, rounds to 28 digits and raised), and a small one with
    all its zeros (Decimal wrote -4E-10)."""
    big = decimal.Decimal("4e27")
    for values, want in [
        ([big, big, decimal.Decimal(0)], "32000000000000000000000000000.0000000000"),
        ([decimal.Decimal("-1E-10"), decimal.Decimal(0), None], "-0.0000000004"),
    ]:
        table = _abc(values, pa.decimal128(38, 10))
        text = "RETURN SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s"
        got = gpu_hamlet.aggregate(table, text, backend="cpu", numeric="bigint")["q1"]
        assert got.column("sum_B_x").to_pylist() == [want]


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_decimal256_beyond_38_digits(backend):
    """bigint adds them exactly; the other modes say to use it, naming the query."""
    big, neg = 10**60 + 7, -(5 * 10**59 + 3)
    table = _abc([decimal.Decimal(big), decimal.Decimal(neg), None], pa.decimal256(70, 0))
    text = "big: RETURN SUM(B.x), MAX(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s"
    got = gpu_hamlet.aggregate(table, text, backend=backend, numeric="bigint")["big"]
    assert got.to_pylist()[0]["sum_B_x"] == str(4 * (big + neg))
    assert got.to_pylist()[0]["max_B_x"] == decimal.Decimal(big)
    for numeric in ("exact", "float"):
        with pytest.raises(
            EventDataError,
            match=r"query big: SUM\(B.x\) reads column 'x', which "
            r"holds values of more than 38 digits.*bigint",
        ):
            gpu_hamlet.aggregate(table, text, backend=backend, numeric=numeric)
    small = _abc([decimal.Decimal(5), None], pa.decimal256(70, 0))  # within 38 digits: fine
    assert gpu_hamlet.aggregate(small, text, backend=backend)["big"]["sum_B_x"][0].as_py() == 10


@pytest.mark.parametrize("numeric", NUMERIC_MODES)
def test_nan_in_a_summed_attribute_is_named_without_bigint_advice(numeric):
    table = _abc([1.5, float("nan")], pa.float64())
    with pytest.raises(
        EventDataError,
        match=r"query q1: AVG\(B.x\) reads column 'x', which holds "
        r"NaN or infinite values on 1 matched B",
    ) as err:
        gpu_hamlet.aggregate(
            table,
            "RETURN AVG(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s",
            backend="cpu",
            numeric=numeric,
        )
    assert "bigint" not in str(err.value)
    # The advice works as written (exponent literals parse).
    advice = str(err.value).split("e.g. ")[1]
    got = gpu_hamlet.aggregate(
        table, f"RETURN AVG(B.x) PATTERN SEQ(A, B+, C) {advice} WITHIN 10 s", backend="cpu"
    )
    assert got["q1"].to_pylist()[0]["avg_B_x"] == 1.5
    # MIN and MAX order NaN above every number, as Spark does.
    got = gpu_hamlet.aggregate(
        table, "RETURN MIN(B.x), MAX(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s", backend="cpu"
    )["q1"].to_pylist()[0]
    assert got["min_B_x"] == 1.5 and np.isnan(got["max_B_x"])


def test_nan_counted_in_one_part_says_so():
    """A stream chunk (or a Spark task) counts the NaN values of its own events only: the
    message says the whole may hold more, where it gave that part's count as the data's."""
    table = _abc([float("nan"), 1.0, float("nan"), float("inf")], pa.float64())
    text = "RETURN SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s"
    with pytest.raises(EventDataError, match=r"on 3 matched B event\(s\); SUM and AVG"):
        gpu_hamlet.aggregate(table, text, backend="cpu")
    with pytest.raises(
        EventDataError,
        match=r"on 1 matched B event\(s\) of one part of the events \(the whole may hold more\)",
    ):
        gpu_hamlet.aggregate_stream([table.slice(0, 2), table.slice(2)], text, rows_per_chunk=2)


@pytest.mark.parametrize("sharing", ["none", "static"])
def test_min_max_order_nan_above_every_number_in_any_event_order(sharing):
    """Over every order of NaN, 1.0, -0.0 and 2.5, MIN and MAX equal the oracle's (which orders
    NaN as Spark does, whatever the order; Python's min and max had depended on it)."""
    text = "RETURN MIN(B.x), MAX(B.x) PATTERN SEQ(A, B+, C) WITHIN 100 s"
    wl = gpu_hamlet.parse_workload(text)
    for values in itertools.permutations([float("nan"), 1.0, -0.0, 2.5]):
        table = _abc(list(values), pa.float64())
        got = gpu_hamlet.aggregate(table, text, backend="cpu", sharing=sharing)
        assert_matches_oracle(got, oracle(table.to_pylist(), wl), wl, event_schema=table.schema)
        row = got["q1"].to_pylist()[0]
        assert row["min_B_x"] == -0.0 and math.isnan(row["max_B_x"])


@pytest.mark.parametrize("sharing", ["none", "static"])
def test_nan_and_null_groups_against_the_oracle(sharing):
    """NaN is one group, null another, -0.0 the group of 0.0 (section 8). The oracle put each
    NaN event in a group of its own (NaN equals nothing), and the comparison read a NaN group's
    rows as missing and extra at once: both take NaN as one value now."""
    g = [None, None, -0.0, 0.0, float("nan"), float("nan"), 2.5, 2.5]  # (A, B) per group
    table = pa.table({"time": range(8), "type": ["A", "B"] * 4, "g": pa.array(g, pa.float64())})
    text = "RETURN g, COUNT(*) PATTERN SEQ(A, B+) GROUPBY g WITHIN 100 s"
    wl = gpu_hamlet.parse_workload(text)
    got = gpu_hamlet.aggregate(table, text, backend="cpu", sharing=sharing)
    assert_matches_oracle(got, oracle(table.to_pylist(), wl), wl, event_schema=table.schema)
    assert [str(v) for v in got["q1"].column("g").to_pylist()] == ["0.0", "2.5", "nan", "None"]


def test_null_times_and_types_are_named_with_their_first_row():
    """A null time or type is an error naming how many there are and the first one's row of
    the events as given (rows of types no query reads are dropped first, and not counted)."""
    text = "RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 10 s"
    table = pa.table({"time": [1, None, None, 4], "type": ["A", "Z", "B", "B"]})
    with pytest.raises(EventDataError, match="time column 'time' has 1 null value.*at row 2$"):
        gpu_hamlet.aggregate(table, text, backend="cpu")
    table = pa.table({"time": [1, 2, 3, 4], "type": ["A", "B", None, None]})
    with pytest.raises(EventDataError, match="type column 'type' has 2 null value.*at row 2$"):
        gpu_hamlet.aggregate(table, text, backend="cpu")


def test_a_null_inside_a_type_dictionary_is_a_null_type():
    """A dictionary type column whose dictionary holds a null that a row points at has a null
    type there: the same error, naming its row, for a whole dataset and for a part (a Spark
    task's). It raised TypeError while naming absent types, and a part dropped the row."""
    from gpu_hamlet.engine.evaluate import evaluate
    from gpu_hamlet.engine.options import DEFAULTS

    names = pa.array(["A", "B", None, "C"])
    text = "RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 10 s"
    coded = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, 3], pa.int8()), names)
    table = pa.table({"time": [1, 2, 3, 4], "type": coded})
    with pytest.raises(EventDataError, match="type column 'type' has 1 null value.*at row 2$"):
        gpu_hamlet.aggregate(table, text, backend="cpu")
    with pytest.raises(EventDataError, match="at row 2$"):
        evaluate(table, text, DEFAULTS, part=True)
    unused = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1, 3], pa.int8()), names)
    got = gpu_hamlet.aggregate(pa.table({"time": [1, 2, 3, 4], "type": unused}), text)["q1"]
    assert got.column("count").to_pylist() == [3]  # a null no row points at is no null type


# --- absent pattern types -------------------------------------------------------------------


def test_absent_type_is_a_warning_and_an_empty_result():
    table = _abc([1, 2], pa.int64())
    text = (
        "rides: RETURN COUNT(*) PATTERN SEQ(A, B+, dropoff) WITHIN 10 s;"
        "other: RETURN COUNT(*) PATTERN SEQ(A, B+, Zebra) WITHIN 10 s;"
        "fine: RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 10 s"
    )
    with pytest.warns(AbsentTypeWarning) as caught:
        got = gpu_hamlet.aggregate(table, text, backend="cpu")
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2  # once per query
    assert {w.filename for w in caught} == {__file__}  # the caller's line, not the library's
    assert "query rides: event type 'dropoff'" in messages[0]
    assert "never occurs in column 'type'" in messages[0]
    assert got["rides"].num_rows == 0 and got["other"].num_rows == 0
    assert got["fine"].num_rows == 1
    assert messages[0].count("did you mean") == 0  # 'dropoff' is close to nothing here
    with pytest.warns(AbsentTypeWarning, match=r"'b' \(did you mean 'B'\?\)"):
        gpu_hamlet.aggregate(table, "RETURN COUNT(*) PATTERN SEQ(A, b+) WITHIN 10 s")
    with pytest.warns(AbsentTypeWarning, match=r"'Dropof' \(did you mean 'Dropoff'\?\)"):
        gpu_hamlet.aggregate(
            pa.table({"time": [1, 2], "type": ["Dropoff", "A"]}),
            "RETURN COUNT(*) PATTERN SEQ(A, Dropof) WITHIN 10 s",
        )


def test_many_absent_types_are_counted_past_the_first_ten():
    """A pattern of 40 types over events of two names the first ten absent ones and counts the
    rest, in a warning of bounded length."""
    types = ", ".join(f"T{i}" for i in range(40))
    text = f"RETURN COUNT(*) PATTERN SEQ(A, {types}) WITHIN 10 s"
    with pytest.warns(AbsentTypeWarning) as caught:
        gpu_hamlet.aggregate(pa.table({"time": [1, 2], "type": ["A", "B"]}), text, backend="cpu")
    (message,) = [str(w.message) for w in caught]
    assert "'T0', 'T1'" in message and "'T9' and 30 more of its pattern never occur" in message
    assert "'T10'" not in message and len(message) < 400


def test_absent_type_in_one_group_or_no_rows_warns_nothing():
    table = pa.table({"time": [1, 2, 3, 4], "type": ["A", "B", "A", "C"], "g": [1, 1, 2, 2]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = gpu_hamlet.aggregate(
            table,
            "RETURN g, COUNT(*) PATTERN SEQ(A, B) GROUPBY g "
            "WITHIN 10 s; RETURN COUNT(*) PATTERN SEQ(A, C) "
            "WITHIN 10 s",
            backend="cpu",
        )
        assert got["q1"].column("g").to_pylist() == [1]
        gpu_hamlet.aggregate(table.slice(0, 0), "RETURN COUNT(*) PATTERN SEQ(A, Z) WITHIN 1 s")


# --- through Spark --------------------------------------------------------------------------


def _spark_frame(spark, table: pa.Table):
    """A Spark DataFrame with the table's own types (pandas would turn null ints into floats)."""
    return spark.createDataFrame(table)


@pytest.mark.spark
@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=null_cases(max_queries=3), numeric=st.sampled_from(NUMERIC_MODES))
def test_nulls_through_spark_match_oracle(spark, case, numeric):
    from gpu_hamlet.spark import trend_aggregate

    text, wl, events = case
    if not events:
        return
    table = events_to_table(events)
    expected = oracle(events, wl, with_magnitudes=True)
    for tasks in (1, 3):
        results = trend_aggregate(
            _spark_frame(spark, table), text, num_tasks=tasks, numeric=numeric
        )
        got = {
            n: r.toArrow().sort_by(
                [(c, "ascending") for c in q.groupby] + [("window_start", "ascending")]
            )
            for (n, r), q in zip(results.items(), wl)
        }
        assert_matches_oracle(got, expected, wl, numeric)


@pytest.mark.spark
def test_nulls_through_spark_with_cut_groups(spark):
    """A group cut into time slices on several tasks: the slices' plans agree (every slice
    gets the divisor channel from the schema, whether its rows hold nulls or not)."""
    from gpu_hamlet.datagen import kleene_stream
    from gpu_hamlet.spark import trend_aggregate

    base = kleene_stream(3000, seed=2, types=("A", "B", "C"), n_groups=1)
    x = base.column("x").to_numpy(zero_copy_only=False).astype(np.int64)
    mask = np.zeros(len(x), bool)
    mask[: len(x) // 3] = True  # nulls only in the first third of the rows (the first slices)
    table = base.set_column(base.column_names.index("x"), "x", pa.array(x, mask=mask))
    text = (
        "RETURN COUNT(*), SUM(B.x), AVG(B.x), MIN(B.x), MAX(B.x) PATTERN SEQ(A, B+, C) "
        "WITHIN 30 s SLIDE 10 s"
    )
    want = gpu_hamlet.aggregate(table, text, backend="cpu", numeric="bigint")["q1"]
    got = (
        trend_aggregate(_spark_frame(spark, table), text, num_tasks=4, numeric="bigint")["q1"]
        .toArrow()
        .sort_by("window_start")
    )
    assert got.to_pylist() == want.to_pylist()


@pytest.mark.spark
def test_absent_type_through_spark_warns_once(spark):
    from gpu_hamlet.spark import trend_aggregate

    table = _abc([1, 2], pa.int64())
    with pytest.warns(AbsentTypeWarning, match=r"query q2: event type 'c' \(did you mean 'C'\?\)"):
        results = trend_aggregate(
            _spark_frame(spark, table),
            "RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 10 s;"
            "RETURN COUNT(*) PATTERN SEQ(A, B+, c) WITHIN 10 s",
            num_tasks=2,
        )
    assert results["q1"].count() == 1 and results["q2"].count() == 0


def test_overflow_advice_names_only_the_ways_out_of_the_mode():
    """float mode's overflow points to bigint and on_overflow, not to float mode itself."""
    table = _abc([1e300, 1e300], pa.float64())
    text = "RETURN SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s"
    with pytest.raises(gpu_hamlet.NumericOverflowError) as err:
        gpu_hamlet.aggregate(_abc([1e308] * 3, pa.float64()), text, backend="cpu")
    assert "bigint" not in str(err.value) and "on_overflow='null'" in str(err.value)
    assert gpu_hamlet.aggregate(table, text, backend="cpu")["q1"]["sum_B_x"][0].as_py() == 4e300
    counts = _abc([1] * 130, pa.int64())
    with pytest.raises(gpu_hamlet.NumericOverflowError) as err:
        gpu_hamlet.aggregate(
            counts,
            "RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 1000 s",
            backend="cpu",
            numeric="exact",
        )
    assert "numeric='bigint'" in str(err.value) and "numeric='float'" in str(err.value)


def test_a_dictionary_of_nulls_in_several_chunks_groups_as_one_null():
    """A GROUPBY column dictionary-encoded from nulls alone (dictionary<values=null>) in a table
    of several chunks, an empty one first, or in a stream's batches: Arrow unifies no such
    dictionaries, and both raised a bare ArrowNotImplementedError (a helper's review)."""
    ev = pa.table(
        {
            "time": pa.array([1, 2], pa.int64()),
            "type": ["A", "B"],
            "g": pa.nulls(2).dictionary_encode(),
        }
    )
    text = "q: RETURN g, COUNT(*) PATTERN SEQ(A, B) GROUPBY g WITHIN 10 s"
    want = gpu_hamlet.aggregate(ev, text, backend="cpu")["q"]
    assert want.to_pylist() == [{"g": None, "window_start": 0, "window_end": 10, "count": 1}]
    parts = [ev.slice(0, 0), ev.slice(0, 1), ev.slice(1)]
    assert gpu_hamlet.aggregate(pa.concat_tables(parts), text, backend="cpu")["q"].equals(want)
    assert gpu_hamlet.aggregate_stream(parts, text, backend="cpu")["q"].equals(want)


def test_a_part_whose_not_nullable_column_holds_a_null_is_refused():
    """With `part=True` the plan follows the schema's nullability (every part gets one plan), so
    a column declared not nullable that holds a null made AVG divide by every occurrence: 1.5
    where 3.0 is right (a helper's hunt). Arrow lets such a table be built; it is refused, naming
    the column and the row. The whole table (`part=False`) reads its nulls as they are."""
    schema = pa.schema(
        [
            pa.field("time", pa.int64()),
            pa.field("type", pa.string()),
            pa.field("x", pa.int64(), False),
        ]
    )
    columns = [pa.array([1, 2, 3, 4]), pa.array(["A", "B", "B", "C"]), pa.array([1, None, 3, 4])]
    events = pa.Table.from_arrays(columns, schema=schema)
    text = "q: RETURN AVG(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s"
    assert (
        gpu_hamlet.aggregate(events, text, backend="cpu")["q"].column("avg_B_x")[0].as_py() == 3.0
    )
    with pytest.raises(EventDataError, match=r"^column 'x' is declared not nullable, .* row 1$"):
        gpu_hamlet.aggregate(events, text, backend="cpu", part=True)
    # A stream answers as `aggregate` does over its whole (its chunks are parts: it refused).
    for rows in (2, 10):
        got = gpu_hamlet.aggregate_stream([events], text, backend="cpu", rows_per_chunk=rows)
        assert got["q"].column("avg_B_x")[0].as_py() == 3.0

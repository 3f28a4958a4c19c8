"""Exact results straight from the float pass (gpu_hamlet/engine/results.py `ExactBounds`).

Where every exact channel of a query stays below 2^FLOAT_EXACT_BITS, the float pass's values are
the exact ints and no residue pass runs. These tests place values on both sides of that bound,
with negative and decimal terms, and check the ints against closed forms and which path gave
them. (Every other test's exact results are also checked against the residue passes:
tests/conftest.py `exact_from_float_checked`.)
"""

from __future__ import annotations

from decimal import Decimal
from unittest import mock

import pyarrow as pa
import pytest

import gpu_hamlet
from gpu_hamlet.core.numeric import FLOAT_EXACT_BITS
from gpu_hamlet.engine.results import QueryResults


def run(events: pa.Table, workload: str, numeric: str, sharing: str = "none"):
    """The tables, and how many queries took their exact ints from the float pass."""
    with mock.patch.object(
        QueryResults, "_float_ints", autospec=True, side_effect=QueryResults._float_ints
    ) as spy:
        tables = gpu_hamlet.aggregate(
            events, workload, backend="cpu", numeric=numeric, sharing=sharing
        )
    return tables, spy.call_count


@pytest.mark.parametrize("numeric", ["exact", "bigint"])
@pytest.mark.parametrize("sharing", ["none", "dynamic"])
def test_counts_on_both_sides_of_the_bound(numeric, sharing):
    """COUNT(*) of SEQ(B+) over one window of n B events is 2^n - 1: from the float pass below
    2^FLOAT_EXACT_BITS, from residues from there on, exact either way."""
    for n, from_float in [(FLOAT_EXACT_BITS - 1, True), (FLOAT_EXACT_BITS + 1, False)]:
        events = pa.table({"time": list(range(n)), "type": ["B"] * n})
        tables, floats = run(
            events, "q: RETURN COUNT(*) PATTERN SEQ(B+) WITHIN 1 h", numeric, sharing
        )
        (value,) = tables["q"].column("count").to_pylist()
        assert int(value) == 2**n - 1
        assert floats == from_float, n


def _sums(values: list[int | Decimal], dtype: pa.DataType) -> pa.Table:
    """One A, then a B per value: SEQ(A, B) has one trend per B, so SUM(B.x) adds the values."""
    n = len(values)
    return pa.table(
        {
            "time": list(range(n + 1)),
            "type": ["A"] + ["B"] * n,
            "x": pa.array([values[0], *values], dtype),
        }
    )


SUM = "q: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B) WITHIN 1 h"


@pytest.mark.parametrize("numeric", ["exact", "bigint"])
def test_signed_sums_take_the_bound_of_their_magnitudes(numeric):
    """A sum that cancels to a small value is still weighed by the sum of its terms' magnitudes:
    below the bound it comes from the float pass, above it from residues; both exact."""
    big = 2 ** (FLOAT_EXACT_BITS - 2)
    below = [big + 3, -(big + 1), 5]  # magnitudes add to under 2^FLOAT_EXACT_BITS
    above = [big + 3, -(big + 1), big, -big + 7]  # magnitudes over it; the sum is 9
    for values, from_float in [(below, True), (above, False)]:
        tables, floats = run(_sums(values, pa.int64()), SUM, numeric)
        got = tables["q"].column("sum_B_x").to_pylist()
        assert [int(v) for v in got] == [sum(values)]
        assert floats == from_float, values


def test_decimal_sums_from_the_float_pass():
    """Decimal values add as unscaled integers: cents here, negative ones among them."""
    values = [Decimal("-5.25"), Decimal("123456789.01"), Decimal("0.07"), Decimal("-0.99")]
    tables, floats = run(_sums(values, pa.decimal128(20, 2)), SUM, "exact")
    assert tables["q"].column("sum_B_x").to_pylist() == [sum(values)]
    assert floats == 1

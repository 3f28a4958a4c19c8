"""The lane rings 'modps8' and 'modps' (residues, one prime per lane) against exact residues
lane by lane, and XFloat's plain-float path for shared blocks against its own arithmetic, in
compiled code and in the Python bodies the CUDA simulator runs (gpu_hamlet/core/rings.py,
recursions.py)."""

from __future__ import annotations

import math
import sys
from decimal import Context, Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from gpu_hamlet import parse_workload
from gpu_hamlet.core.numeric import (
    CRT_BASIS_FROM,
    SMALL_BITS,
    WIDE_PRIME_BITS,
    _is_prime,
    crt,
    decimal38_overflow,
    decimal_array,
    float_nulls,
    int_text,
    primes,
    text_int,
    xfloat_log2,
    xfloat_ratio,
    xfloat_to_float,
)
from gpu_hamlet.core.recursions import block_in, block_terms, xf_block_terms
from gpu_hamlet.core.rings import (
    LANE_PRIME_BITS,
    LANES,
    MODPS8_FROM,
    MODPS_FROM,
    XF_TINY,
    lane_mul,
    lane_primes,
    make_tag,
    pass_moduli,
    r_add,
    r_is_zero,
    r_load,
    r_mul,
    r_one,
    r_store,
    r_zero,
    residue_passes,
    xf_scale,
    xf_scaled_rows,
)
from gpu_hamlet.core.weights import EventWeights, Kind, Source
from gpu_hamlet.engine.attributes import KEPT_LANES, Attributes
from gpu_hamlet.engine.events import prepare_events


def ops(tag, X):
    """Row 2 = row 0 + row 1, row 3 = row 0 * row 1, row 4 = 1 + 0, and whether rows 0 and 5
    are zero, through the ring-generic operations."""
    a = r_load(tag, X, 0, 0)
    b = r_load(tag, X, 1, 0)
    r_store(tag, X, 2, 0, r_add(tag, a, b))
    r_store(tag, X, 3, 0, r_mul(tag, a, b))
    r_store(tag, X, 4, 0, r_add(tag, r_one(tag), r_zero(tag)))
    return r_is_zero(tag, a), r_is_zero(tag, r_load(tag, X, 5, 0))


compiled = njit(ops)


@settings(max_examples=60, deadline=None)
@given(
    ring=st.sampled_from(sorted(LANES)),
    chunk=st.integers(0, 24),
    data=st.data(),
)
def test_lanes_equal_the_exact_residues_per_prime(ring, chunk, data):
    w = LANES[ring]
    ps = lane_primes(ring, chunk)
    assert ps == primes((chunk + 1) * w, LANE_PRIME_BITS[ring])[chunk * w :]
    edge = st.sampled_from(["zero", "max", "any"])

    def residue(p: int, kind: str) -> int:
        if kind == "zero":
            return 0
        return p - 1 if kind == "max" else data.draw(st.integers(0, p - 1))

    kinds = data.draw(st.lists(edge, min_size=2 * w, max_size=2 * w))
    X = np.zeros((6, 1, w), np.int64)
    for q, p in enumerate(ps):
        X[0, 0, q] = residue(p, kinds[q])
        X[1, 0, q] = residue(p, kinds[w + q])
    X[5, 0, data.draw(st.integers(0, w - 1))] = 1  # zero only if every lane is
    tag = make_tag(ring, chunk)
    got_c, got_py = X.copy(), X.copy()
    zeros_c = compiled(tag, got_c)
    zeros_py = ops(tag, got_py)
    for q, p in enumerate(ps):
        a, b = int(X[0, 0, q]), int(X[1, 0, q])
        want = [a, b, (a + b) % p, a * b % p, 1, int(X[5, 0, q])]  # (Python's exact ints)
        if p < 2**31:  # the same as 'modp' lane by lane
            one = X[:, :, q : q + 1].copy()
            ops(make_tag("modp", p), one)
            assert one[:, 0, 0].tolist() == want
        assert got_c[:, 0, q].tolist() == want, f"lane {q} (compiled)"
        assert got_py[:, 0, q].tolist() == want, f"lane {q} (Python)"
    assert zeros_c == zeros_py == (not X[0].any(), False)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_lane_mul_is_exact_for_wide_primes(data):
    """`lane_mul`, compiled one lane at a time (as the GPU runs it) and in Python (as the
    simulator runs it), against exact products modulo the largest and smallest of the 'modps'
    pass primes below 2^50, at 0, 1, p - 1 and at random: its products wrap in int64 and its
    float64 quotient is off by one at most, which it corrects."""
    ps = primes(32 * 12, WIDE_PRIME_BITS)
    p = data.draw(st.sampled_from([ps[0], ps[-1], ps[data.draw(st.integers(0, len(ps) - 1))]]))
    pairs = [(p - 1, p - 1), (p - 1, 1), (0, p - 1), (p - 2, p - 1)]
    residue = st.integers(0, p - 1)
    pairs += data.draw(st.lists(st.tuples(residue, residue), max_size=8))
    a = np.asarray([x for x, _ in pairs], np.int64)
    b = np.asarray([y for _, y in pairs], np.int64)
    want = [x * y % p for x, y in pairs]
    assert _lane_mul_rows(a, b, p).tolist() == want
    assert [int(lane_mul(x, y, p)) for x, y in zip(a, b)] == want


@njit
def _lane_mul_rows(a, b, p):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = lane_mul(a[i], b[i], p)
    return out


@njit
def _lane_rows(tag, A, B):
    """Per row i: A[i] * B[i] into row i of A's lane 1 and A[i] + B[i] into lane 2 (compiled:
    the 'modps' operations run on SIMD vectors, gpu_hamlet/core/lane_vectors.py)."""
    for i in range(A.shape[0]):
        a, b = r_load(tag, A, i, 0), r_load(tag, B, i, 0)
        r_store(tag, A, i, 1, r_mul(tag, a, b))
        r_store(tag, A, i, 2, r_add(tag, a, b))


@pytest.mark.parametrize("ring", sorted(LANES))
def test_vector_lanes_equal_the_exact_residues(ring):
    """Over 20,000 rows per pass, residues drawn near 0, near p and at random: the compiled
    lanes' products and sums are the exact ones (Python's ints: 'modps' primes exceed 2^49)."""
    rng = np.random.default_rng(5)
    w = LANES[ring]
    for chunk in (0, 7, 30):
        p = np.asarray(lane_primes(ring, chunk), np.int64)
        n = 20_000
        kinds = rng.integers(0, 3, (2, n, w))
        low, high = rng.integers(0, 3, (2, n, w)), p - 1 - rng.integers(0, 3, (2, n, w))
        vals = np.where(kinds == 0, low, np.where(kinds == 1, high, rng.integers(0, p, (2, n, w))))
        A = np.zeros((n, 3, w), np.int64)
        A[:, 0] = vals[0]
        B = vals[1][:, None, :].copy()
        _lane_rows(make_tag(ring, chunk), A, B)
        exact = vals.astype(object)
        np.testing.assert_array_equal(A[:, 1], exact[0] * exact[1] % p.astype(object))
        np.testing.assert_array_equal(A[:, 2], (vals[0] + vals[1]) % p)


@pytest.mark.parametrize("ring", sorted(LANES))
def test_compiled_lanes_are_vectors(ring):
    """On the CPU, lane rings' sums, products and zero tests compile to operations on whole LLVM
    vectors (gpu_hamlet/core/lane_vectors.py), not to one scalar operation per lane."""
    w = LANES[ring]
    lane_rows = njit(_lane_rows.py_func)  # (one signature per lane count)
    A = np.zeros((2, 3, w), np.int64)
    lane_rows(make_tag(ring, 0), A, np.ones((2, 1, w), np.int64))
    code = lane_rows.inspect_llvm(lane_rows.signatures[0])
    vec = f"<{w} x i64>"
    assert f"mul {vec}" in code and f"add {vec}" in code and f"fmul <{w} x double>" in code
    zero = njit(lambda tag, a: r_is_zero(tag, a))
    tag = make_tag(ring, 0)
    assert zero(tag, (np.int64(0),) * w)
    assert not zero(tag, (np.int64(0),) * (w - 1) + (np.int64(1),))
    ir = zero.inspect_llvm(zero.signatures[0])  # (LLVM may expand the reduction in shuffles)
    assert "llvm.vector.reduce.or" in ir or f"or {vec}" in ir


def test_residue_passes_cover_the_bits_in_order():
    """The passes' primes, in order, are the first of their family (below 2^31, or below 2^50
    for 'modps'), their product exceeds 2^bits, and one pass fewer would not reach it."""
    narrow = 30.99  # (bits a prime below 2^31 holds at least)
    assert residue_passes(20) == [("modp", primes(1)[0])]
    assert MODPS8_FROM == 2 and residue_passes(4 * narrow) == [("modps8", 0)]
    assert residue_passes((MODPS_FROM - 1) * narrow - 2) == [("modps8", c) for c in range(3)]
    for bits, ring in ((22 * narrow, "modps8"), (MODPS_FROM * narrow, "modps"), (13_500, "modps")):
        passes = residue_passes(bits)
        assert {r for r, _ in passes} == {ring}
        covered = pass_moduli(passes)
        assert covered == primes(len(passes) * LANES[ring], LANE_PRIME_BITS[ring])
        assert math.prod(covered) > 2**bits
        assert math.prod(covered[: -LANES[ring]]) < 2**bits
    assert len(residue_passes(13_500)) == 9  # (14 passes of primes below 2^31)


def _value(m: float, e: float) -> tuple[float, int]:
    """An XFloat's value as (fraction in [0.5, 1), binary exponent): equal values, equal pairs."""
    if m == 0.0:
        return 0.0, 0
    f, x = math.frexp(m)
    return f, x + int(e)


def _span(values: list[tuple[float, int]]) -> int:
    exps = [x for f, x in values if f != 0.0]
    return max(exps) - min(exps) if exps else 0


def _block_case(nch: int, L: int):
    """A template of k = L + 1 states whose block is states 1..L, entered at 1 from state 0 and
    from its own last state (a Kleene cycle), as `run_segments` reads it."""
    k = L + 1
    blk_ptr = np.r_[0, 0, np.full(k - 1, L)].astype(np.int64)
    blk_idx = np.arange(1, L + 1, dtype=np.int64)
    pred_ptr = np.r_[0, 0, 2, np.arange(3, k + 2)].astype(np.int64)[: k + 1]
    pred_idx = np.r_[0, L, np.arange(1, L)].astype(np.int64)
    is_start = np.zeros(k, np.bool_)
    return k, blk_ptr, blk_idx, pred_ptr, pred_idx, is_start


def _terms(fn, tag, X, BM_or_BS, case, nch, L):
    k, blk_ptr, blk_idx, pred_ptr, pred_idx, is_start = case
    Dl = np.zeros_like(X)
    scratch = () if fn in (block_terms, _block_terms_c) else (np.full_like(X, 7.0),)  # Xs
    done = fn(tag, X, Dl, *scratch, 0, 1, BM_or_BS, 0, L, True, blk_idx, pred_ptr, pred_idx,
              is_start, nch, k, 0)  # fmt: skip
    return done, Dl


_block_terms_c = njit(block_terms)
_xf_block_terms_c = njit(xf_block_terms)


@settings(max_examples=300, deadline=None)
@given(
    nch=st.integers(1, 2),
    L=st.integers(1, 4),
    spread=st.sampled_from([20, 200, 600, 3000]),
    signed=st.booleans(),
    data=st.data(),
)
def test_scaled_block_terms_equal_the_xfloat_ones_bit_for_bit(nch, L, spread, signed, data):
    """A block macro row's outputs in plain floats (`xf_block_terms`, the map's rows scaled by
    `xf_scaled_rows`; products far below the others left out where all are non-negative, as
    counts are) have exactly the values of the XFloat ones (`block_terms`), compiled and
    in the Python bodies the CUDA simulator runs. It may decline (False) only where entries and
    inputs are hundreds of binary orders apart, so that products near the subnormal range."""
    case = _block_case(nch, L)
    k = case[0]
    D = nch * (k + 1) + 1
    Dp = nch * (L + 2) + 1

    def xfloats(n: int) -> np.ndarray:
        out = np.zeros((n, 1, 2))
        for i in range(n):
            if data.draw(st.booleans()):  # a mantissa anywhere XFloat keeps one
                f = data.draw(st.floats(0.5, 1.0, exclude_max=True))
                m = math.ldexp(f, data.draw(st.integers(-190, 190)))
                out[i, 0, 0] = -m if signed and data.draw(st.booleans()) else m
                out[i, 0, 1] = data.draw(st.integers(-spread, spread))
        return out

    X = xfloats(D)
    X[D - 1, 0] = (1.0, 0.0) if data.draw(st.booleans()) else (0.0, 0.0)  # 0: a carried column
    BM = xfloats(Dp * Dp)
    BS = xf_scaled_rows(BM[:, 0, 0].reshape(Dp, Dp), BM[:, 0, 1].reshape(Dp, Dp)).reshape(-1, 2)
    tag = make_tag("xfloat")
    k, _, blk_idx, pred_ptr, pred_idx, is_start = case
    inputs = [  # IN per channel, the block's states, the constant
        block_in(tag, X, ch, 1, 0, L, blk_idx, pred_ptr, pred_idx, is_start, k, 0)
        for ch in range(nch)
    ] + [tuple(X[at, 0]) for at in range(D) if at % (k + 1) in blk_idx or at == D - 1]
    # How far below its row's (input's) largest an entry (input) is, in binary orders
    span = max(_span([_value(*a) for a in row]) for row in BM[:, 0].reshape(Dp, Dp, 2))
    span += _span([_value(*v) for v in inputs])
    for terms, scaled in ((block_terms, xf_block_terms), (_block_terms_c, _xf_block_terms_c)):
        _, want = _terms(terms, tag, X, BM, case, nch, L)
        done, got = _terms(scaled, tag, X, BS, case, nch, L)
        assert done or span > 500
        if done:
            for at in range(D):
                assert _value(*got[at, 0]) == _value(*want[at, 0]), at


def test_scaled_block_terms_decline_where_a_left_out_product_would_count():
    """An output holding a product too small to add (2^-1030, scaled) beside an added one that
    is small too (2^-1001): XFloat's sum keeps the first (2^2000 (1 + 2^-29)), so the plain-float
    path must decline rather than leave it out."""
    case = _block_case(1, 1)
    X = np.zeros((4, 1, 2))
    X[0, 0], X[1, 0], X[3, 0] = (1.0, 971.0), (1.0, 2000.0), (1.0, 0.0)  # IN, state 1, constant
    BM = np.zeros((16, 1, 2))
    BM[4, 0], BM[5, 0] = (1.0, 1000.0), (1.0, 0.0)  # state 1's row: 2^1000 IN + state 1
    BS = xf_scaled_rows(BM[:, 0, 0].reshape(4, 4), BM[:, 0, 1].reshape(4, 4)).reshape(-1, 2)
    tag = make_tag("xfloat")
    for terms, scaled in ((block_terms, xf_block_terms), (_block_terms_c, _xf_block_terms_c)):
        _, want = _terms(terms, tag, X, BM, case, 1, 1)
        assert _value(*want[1, 0]) == _value(math.ldexp(1.0 + 2.0**-29, 2000 - 1900), 1900)
        done, _ = _terms(scaled, tag, X, BS, case, 1, 1)
        assert not done


def test_scaled_block_terms_decline_where_a_plain_sum_lost_its_only_product():
    """A row of counts takes its plain sum (no branch per product), but an input lost below
    float64's range (IN, 2^-2000 beside the block's 2^2000) was the output's only product: the
    plain sum is 0 where XFloat's is 1, so the row must decline, not return 0."""
    case = _block_case(1, 1)
    X = np.zeros((4, 1, 2))
    X[0, 0], X[1, 0] = (1.0, 0.0), (1.0, 2000.0)  # IN, state 1; no constant (a carried column)
    BM = np.zeros((16, 1, 2))
    BM[4, 0] = (1.0, 0.0)  # state 1's row: IN only
    BS = xf_scaled_rows(BM[:, 0, 0].reshape(4, 4), BM[:, 0, 1].reshape(4, 4)).reshape(-1, 2)
    tag = make_tag("xfloat")
    for terms, scaled in ((block_terms, xf_block_terms), (_block_terms_c, _xf_block_terms_c)):
        _, want = _terms(terms, tag, X, BM, case, 1, 1)
        assert _value(*want[1, 0]) == _value(1.0, 0)
        done, _ = _terms(scaled, tag, X, BS, case, 1, 1)
        assert not done


def test_scaled_block_terms_need_not_decline_for_a_lost_input_they_never_multiply():
    """The same lost IN, but the block's state reads only itself and the final reads nothing:
    no product was left out, so the row is exact without XFloat (the final's plain sum of 0 is
    checked product by product before the row declines)."""
    case = _block_case(1, 1)
    X = np.zeros((4, 1, 2))
    X[0, 0], X[1, 0] = (1.0, 0.0), (1.0, 2000.0)
    BM = np.zeros((16, 1, 2))
    BM[5, 0] = (0.75, 3.0)  # state 1's row: 6 x state 1
    BS = xf_scaled_rows(BM[:, 0, 0].reshape(4, 4), BM[:, 0, 1].reshape(4, 4)).reshape(-1, 2)
    tag = make_tag("xfloat")
    for terms, scaled in ((block_terms, xf_block_terms), (_block_terms_c, _xf_block_terms_c)):
        _, want = _terms(terms, tag, X, BM, case, 1, 1)
        done, got = _terms(scaled, tag, X, BS, case, 1, 1)
        assert done
        for at in range(4):
            assert _value(*got[at, 0]) == _value(*want[at, 0]), at


def test_float_products_and_sums_go_through_the_rounded_primitives(monkeypatch):
    """XFloat's products and sums, the scaled block terms and the `modps` quotient estimate call
    `f_mul` and `f_add`, which the GPU backend compiles as libdevice's never-fused `dmul_rn` and
    `dadd_rn` (gpu_hamlet/kernels/rounding.py): a float product written with `*` in a recursion
    could be fused into a multiply-add on the GPU and round unlike the CPU."""
    from gpu_hamlet.core import recursions, rings

    calls: list[str] = []

    def counted(name, op):
        def fn(a, b):
            calls.append(name)
            return op(a, b)

        return fn

    for mod in (rings, recursions):
        if hasattr(mod, "f_mul"):
            monkeypatch.setattr(mod, "f_mul", counted("mul", lambda a, b: a * b))
            monkeypatch.setattr(mod, "f_add", counted("add", lambda a, b: a + b))
    assert rings.xf_mul((0.75, 3.0), (0.5, -1.0)) == (0.375, 2.0)
    assert rings.xf_add((0.5, 1.0), (0.5, 1.0)) == (1.0, 1.0)
    assert rings.xf_add((0.5, 3.0), (0.5, 1.0)) == (0.625, 3.0)
    assert rings.lane_mul(np.int64(6), np.int64(7), 11) == 42 % 11
    # an XFloat sum scales both mantissas to the larger exponent (by 1 or a power of two)
    assert calls == ["mul", "mul", "mul", "add", "mul", "mul", "add", "mul", "mul"]
    calls.clear()
    assert recursions.xf_term(0.0, 0, 0.5, 3.0) == (1.5, 0)
    assert calls == ["mul", "add"]


def _scaled_rows_by_definition(m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """`xf_scaled_rows` written out entry by entry: each row scaled to its largest entry's
    binary exponent, stored by column; entries below XF_TINY NaN; column 1's second
    components the row's smallest nonzero |entry|, or -1 for a row with a negative or NaN."""
    n, rows, cols = m.shape
    out = np.zeros((n, cols, rows, 2))
    for i in range(n):
        for r in range(rows):
            tops = [math.frexp(m[i, r, c])[1] + e[i, r, c] for c in range(cols) if m[i, r, c]]
            top = max(tops) if tops else 0.0
            row = []
            for c in range(cols):
                v = m[i, r, c]
                if v != 0.0:
                    v = math.ldexp(v, int(e[i, r, c] - top))
                    v = math.nan if abs(v) < XF_TINY else v
                out[i, c, r] = (v, top)
                row.append(v)
            bad = any(v < 0.0 or v != v for v in row)
            out[i, 1, r, 1] = -1.0 if bad else min((abs(v) for v in row if v), default=math.inf)
    return out


def test_scaled_rows_follow_their_definition():
    """The compiled pass of `xf_scaled_rows` gives its definition's bits (signs of zero and
    NaNs included) over maps of both signs, zeros and exponents from 10 to 3,000 apart."""
    rng = np.random.default_rng(11)
    for spread in (10, 500, 1100, 3000):
        shape = (7, 5, 6)
        m = rng.uniform(0.5, 1.0, shape) * np.where(rng.random(shape) < 0.2, -1.0, 1.0)
        m[rng.random(shape) < 0.3] = 0.0
        m[rng.random(shape) < 0.05] = -0.0
        e = rng.integers(-spread, spread, shape).astype(np.float64)
        for signs in (m, np.abs(m)):
            got, want = xf_scaled_rows(signs, e), _scaled_rows_by_definition(signs, e)
            assert np.array_equal(got, want, equal_nan=True)
            assert np.array_equal(np.signbit(got), np.signbit(want))
    assert xf_scaled_rows(m[0], e[0]).shape == (6, 5, 2)  # one map, without the leading axis


@njit
def _scaled(m, d):
    out = np.empty(m.shape[0])
    for i in range(m.shape[0]):
        out[i] = xf_scale(m[i], d[i])
    return out


def test_xf_scale_rounds_as_ldexp():
    """`xf_scale` gives `math.ldexp(m, -d)`'s bits for mantissas in XFloat's range, at every
    scale: exact, rounded into the subnormals (ties included), and flushed to zero; compiled
    and in Python."""
    rng = np.random.default_rng(7)
    n = 200_000
    m = rng.uniform(0.5, 1.0, n) * np.exp2(rng.integers(-200, 200, n).astype(float))
    m[: n // 10] = np.exp2(rng.integers(-200, 200, n // 10).astype(float))  # powers of two
    m[n // 10 : n // 5] = 1.0 + np.exp2(-52.0) * rng.integers(1, 8, n // 10)  # ties below 2^-1022
    m *= np.where(rng.random(n) < 0.5, -1.0, 1.0)
    d = rng.integers(0, 2400, n).astype(float)
    d[: n // 2] = 1074.0 - np.floor(np.log2(np.abs(m[: n // 2]))) + rng.integers(-60, 60, n // 2)
    d = np.maximum(d, 0.0)
    want = np.array([math.ldexp(a, -int(b)) for a, b in zip(m, d)])
    got = _scaled(m, d)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
    assert all(
        xf_scale(float(a), float(b)) == w for a, b, w in zip(m[:2000], d[:2000], want[:2000])
    )
    assert np.count_nonzero((want != 0) & (np.abs(want) < 2.0**-1022)) > 1000  # subnormals met


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_crt_recovers_the_integers_on_both_paths(data):
    """`crt` gives back integers of magnitude below M/2 from their residues, through Garner's
    digits (few primes) and through the CRT basis (from CRT_BASIS_FROM primes on)."""
    P = data.draw(st.sampled_from([1, 2, CRT_BASIS_FROM - 1, CRT_BASIS_FROM, 9, 40]))
    ps = primes(P)
    half = math.prod(ps) // 2
    signed = data.draw(st.booleans())
    lo = -half + 1 if signed else 0
    values = data.draw(st.lists(st.integers(lo, half), min_size=0, max_size=6))
    values += [lo, half, 0]
    residues = np.asarray([[v % p for v in values] for p in ps], np.int64).reshape(P, -1)
    assert list(crt(residues, signed)) == values
    # Values the caller marks as below 2^SMALL_BITS come from two primes in int64, the others
    # from all of them: the same Python ints.
    lim = min(2**SMALL_BITS, half)
    values += data.draw(st.lists(st.integers(-lim + 1 if signed else 0, lim - 1), max_size=6))
    values += [lim - 1] + ([-lim + 1] if signed else [])
    residues = np.asarray([[v % p for v in values] for p in ps], np.int64).reshape(P, -1)
    small = np.asarray([abs(v) < 2**SMALL_BITS for v in values], bool)
    got = crt(residues, signed, small)
    assert list(got) == values and all(type(v) is int for v in got)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_crt_recovers_the_integers_from_wide_moduli(data):
    """`crt` over the 'modps' lanes' primes below 2^50 (given as `moduli`), marked small or not."""
    P = data.draw(st.sampled_from([16, 32, 45]))
    ps = primes(P, WIDE_PRIME_BITS)
    half = math.prod(ps) // 2
    signed = data.draw(st.booleans())
    lo = -half + 1 if signed else 0
    values = data.draw(st.lists(st.integers(lo, half), max_size=6)) + [lo, half, 0, 1, 2**60]
    residues = np.asarray([[v % p for v in values] for p in ps], np.int64)
    small = np.asarray([abs(v) < 2**SMALL_BITS for v in values], bool)
    for marks in (None, small):
        got = crt(residues, signed, marks, ps)
        assert list(got) == values and all(type(v) is int for v in got)


@pytest.mark.parametrize("scale", [0, 3])
def test_decimal_columns_from_python_ints(scale):
    """decimal(38) columns and their overflow mask from Python ints and None, through int64
    (every value fits it) and through bytes per value (some do not)."""
    small = [None, 0, -1, 5, 2**63 - 1, -(2**63)]
    large = [None, 10**38 - 1, -(10**38) + 1, 2**64, 3]
    for values in (small, large):
        arr = decimal_array(np.asarray(values, object), scale)
        assert arr.type == pa.decimal128(38, scale)
        exact = Context(prec=60)  # (scaleb rounds to the context's precision)
        assert arr.to_pylist() == [
            None if v is None else Decimal(v).scaleb(-scale, exact) for v in values
        ]
    edges = np.asarray([None, 10**38, -(10**38), 10**38 - 1, 5, 2**70], object)
    assert decimal38_overflow(edges).tolist() == [True, True, True, False, False, False]
    assert decimal38_overflow(np.asarray([None, 1], object)).tolist() == [True, False]


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_float_nulls_follow_their_definition(data):
    """`float_nulls`: null where there is no value or it is beyond float64, the first row
    beyond float64 that has a value, and the null rows zeroed, as the NumPy steps it replaced
    give them."""
    n = data.draw(st.integers(0, 30))
    vals = np.asarray(
        data.draw(st.lists(st.sampled_from([0.5, -2.0, np.inf, -np.inf, np.nan]), min_size=n,
                           max_size=n)),
        np.float64,
    )  # fmt: skip
    null = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    bad = ~np.isfinite(vals) & ~null
    want_mask = bad | null
    want_vals = np.where(want_mask, 0.0, vals)
    got = vals.copy()
    mask, first, masked = float_nulls(got, null)
    assert mask.tolist() == want_mask.tolist() and masked == bool(want_mask.any())
    assert first == (int(np.flatnonzero(bad)[0]) if bad.any() else -1)
    assert got.tolist() == want_vals.tolist()


XF_VALUES = [0.0, -0.0, 0.5, -0.75, 1.0, 1e300, 5e-324, np.inf, -np.inf, np.nan]
XF_EXPONENTS = [0.0, 3.7, -1.0, 1024.0, -1075.0, 2000.0, 2001.0, -2001.0, 1e9, -1e9, np.inf,
                np.nan]  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_xfloat_conversions_are_numpys_steps(data):
    """The compiled `xfloat_to_float`, `xfloat_ratio` and `xfloat_log2` give what the NumPy
    steps they replaced gave, bit for bit, on every kind of mantissa (zeros, infinities, NaN)
    and exponent (fractions, beyond +-2000, infinite, NaN), over strided views as the results
    read them."""
    n = data.draw(st.integers(0, 12))

    def column(choices):
        x = np.asarray(data.draw(st.lists(st.sampled_from(choices), min_size=n, max_size=n)))
        wide = np.zeros((n, 2))
        wide[:, 1] = x
        return wide[:, 1]  # a strided view

    m, e, dm, de = column(XF_VALUES), column(XF_EXPONENTS), column(XF_VALUES), column(XF_EXPONENTS)
    with np.errstate(all="ignore"):
        want = np.ldexp(m, np.minimum(np.maximum(e, -2000), 2000).astype(np.int64))
        want_r = np.ldexp(m / dm, np.minimum(np.maximum(e - de, -2000), 2000).astype(np.int64))
        want_l = np.log2(np.abs(m)) + e
    for got, exp in (
        (xfloat_to_float(m, e), want),
        (xfloat_ratio(m, e, dm, de), want_r),
        (xfloat_log2(m, e), want_l),
    ):
        assert np.array_equal(got, exp, equal_nan=True)
        assert np.signbit(got).tolist() == np.signbit(exp).tolist()  # -0.0 stays -0.0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 40_000), st.booleans(), st.sampled_from([None, 640, 0]), st.data())
def test_ints_of_any_size_to_text_and_back(digits, negative, limit, data):
    """`int_text` and `text_int` convert ints of any number of digits, however low the
    interpreter's limit on int-str conversions (None: the default, 4,300 digits; 640, the least
    it allows; 0: none), and leave that limit as it was."""
    v = data.draw(st.integers(10 ** max(digits - 1, 0), 10**digits)) if digits else 0
    v = -v if negative else v
    before = sys.get_int_max_str_digits()
    try:
        if limit is not None:
            sys.set_int_max_str_digits(limit)
        text, back = int_text(v), None
        back = text_int(text)
        assert sys.get_int_max_str_digits() == (before if limit is None else limit)
    finally:
        sys.set_int_max_str_digits(0)
        assert text == str(v) and back == v
        sys.set_int_max_str_digits(before)


@pytest.mark.parametrize("bits", [31, WIDE_PRIME_BITS])
def test_primes_asked_for_in_growing_counts_are_the_largest_below_the_bound(bits):
    """`primes` finds each prime once per process and gives every count a prefix of them (each
    count was found from the start: 10 s of a bigint call's 11): the counts a call's passes ask
    for, in any order, are the largest primes below 2^bits, descending and distinct."""
    for count in (3, 40, 7, 64):
        ps = primes(count, bits)
        assert len(ps) == count and list(ps) == sorted(set(ps), reverse=True)
        assert all(_is_prime(p) and p < 2**bits for p in ps)
        between = range(ps[-1] + 1, 2**bits)  # (no prime skipped above the last)
        assert sum(1 for n in between if n % 2 and _is_prime(n)) == count - 1


@pytest.mark.parametrize(
    "column",
    [
        pa.array([5, None, -7, 2**62, -(2**63), 3], pa.int64()),
        pa.array([2**64 - 1, 0, None, 2**63, 1, 9], pa.uint64()),
        pa.array(
            [Decimal("-1e70"), None, Decimal(3), Decimal("12345678901234567890123456789")] * 2
        )[:6].cast(pa.decimal256(76, 0)),
    ],
)
def test_lane_residues_of_later_passes_are_made_for_the_rows_asked(column):
    """A column's residue lanes are kept for the call only up to KEPT_LANES lanes (bigint's
    first pass, exact mode's); later passes are made for the rows a query asks for alone: kept
    per pass, the lanes of a call of many passes held events x primes of them (3 GB for a burst
    of 10^5 events, a helper's hunt). Either way each row reads its exact residue, 0 for null."""
    n = len(column)
    table = pa.table({"type": ["A", "B"] * (n // 2), "time": np.arange(n), "x": column})
    wl = parse_workload("q: RETURN SUM(B.x) PATTERN SEQ(A, B+) WITHIN 1 h")
    attrs = Attributes(prepare_events(table, wl, "time", "type", True))
    rows = np.asarray([4, 1, 1, 0, 5], np.int64)
    exact = [int(v.as_py()) if v.is_valid else 0 for v in column]
    if pa.types.is_decimal(column.type):
        exact = [int(v.as_py().scaleb(0)) if v.is_valid else 0 for v in column]
    for ring, chunk in (("modps8", 0), ("modps8", 3), ("modps", 0), ("modps", 1), ("modps", 5)):
        values, at = attrs.lanes_at("x", ring, chunk, rows)
        ps = lane_primes(ring, chunk)
        want = [[exact[r] % p for p in ps] for r in rows]
        assert values[at].tolist() == want, (ring, chunk)
        kept = (chunk + 1) * LANES[ring] <= KEPT_LANES
        assert (values.shape[0] == n) == kept and ((("x", ring, chunk) in attrs._lanes) == kept)
        none = np.zeros(0, np.int64)  # (a query of no rows: its lanes were no 2-d array)
        src = Source(attrs, ring, "x", chunk)
        weights = EventWeights(ring, (Kind.VALUE,), (0,), (src,), none, none)
        assert weights.host().shape == (1, 0, LANES[ring])

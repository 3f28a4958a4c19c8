"""Exact numbers from residues: primes, the Chinese remainder theorem, and Arrow output types.

Trend counts are computed modulo primes below 2^31 (products fit in int64 on CPU and GPU) and
rebuilt here. How many primes a query needs follows from a magnitude bound that the float shadow
run gives for every result, so small results cost one prime and 800-digit ones about 90. Lanes of
many primes ('modps', bigint's hundreds of digits) take primes below 2^WIDE_PRIME_BITS instead:
their products wrap in int64 and are corrected from a float64 quotient (rings.py `lane_mul`), so a
lane holds 50 bits where a narrow prime holds 31 (docs/architecture.md section 2).
"""

from __future__ import annotations

import math
import sys
import threading
from functools import cache, lru_cache

import numpy as np
import pyarrow as pa
from numba import njit

#: decimal(38, s) holds unscaled values below this.
DECIMAL38_LIMIT = 10**38
_PRIME_BITS = 31
#: The wide primes' bound: below 2^51 a product's float64 quotient is within one of the true
#: quotient (`lane_mul`); 2^50 leaves a margin.
WIDE_PRIME_BITS = 50


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):  # deterministic below 3.1e23
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


@cache
def primes(count: int, bits: int = _PRIME_BITS) -> tuple[int, ...]:
    """The `count` largest primes below 2^bits, descending. Each is found once per process
    (`_FOUND`): a bigint call's passes ask for 32, 64, ... 2,016 of them, and finding each
    count from the start took 10 of the 11 s of a first call over a burst of 10^5 events (a
    helper's hunt)."""
    with _FOUND_LOCK:  # (passes run on the host threads)
        found = _FOUND.setdefault(bits, [])
        n = found[-1] - 2 if found else 2**bits - 1  # (descending over the odd numbers)
        while len(found) < count:
            if _is_prime(n):
                found.append(n)
            n -= 2
        return tuple(found[:count])


_FOUND: dict[int, list[int]] = {}  # per prime size: the largest primes found so far
_FOUND_LOCK = threading.Lock()


def primes_for_bits(bits: float, prime_bits: int = _PRIME_BITS) -> int:
    """How many primes below 2^prime_bits make a modulus above 2^bits (each of the largest such
    primes exceeds 2^(prime_bits - 0.01))."""
    return max(1, math.ceil((bits + 1) / (prime_bits - 0.01)))


@cache
def _garner_inverses(count: int) -> np.ndarray:
    ps = primes(count)
    inv = np.zeros((count, count), np.int64)
    for i in range(count):
        for j in range(i + 1, count):
            inv[i, j] = pow(ps[i], -1, ps[j])
    return inv


@njit(cache=True, nogil=True)
def _garner(res, ps, inv):
    # Mixed-radix digits d with x = d0 + d1*p0 + d2*p0*p1 + ...
    P, m = res.shape
    d = np.empty((P, m), np.int64)
    for v in range(m):
        for j in range(P):
            x = res[j, v]
            pj = ps[j]
            for i in range(j):
                x = ((x - d[i, v]) % pj) * inv[i, j] % pj
            d[j, v] = x
    return d


#: From this many primes on, `crt` sums the residues times the CRT basis (one dot product of
#: Python integers); below it, Garner's digits in compiled code are cheaper per value. At 431
#: primes (bigint counts of 4,000 digits) the basis took 0.7 ms a value against 3.9 ms.
CRT_BASIS_FROM = 5


@lru_cache(maxsize=16)
def _crt_basis(ps: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """The CRT basis of the moduli `ps` (b_i = 1 modulo p_i, 0 modulo the others, as Python
    ints) and their product M."""
    M = math.prod(ps)
    basis = np.empty(len(ps), object)
    for i, p in enumerate(ps):
        rest = M // p
        basis[i] = rest * pow(rest % p, -1, p)
    return basis, M


#: Values below 2^SMALL_BITS in magnitude are rebuilt from the first two primes alone, whose
#: product exceeds 2^61, in int64 (`crt`'s `small`).
SMALL_BITS = 60

#: An exact channel whose float-pass bound is below 2^FLOAT_EXACT_BITS is already exact there:
#: its weights are integers and every number feeding it was an integer below 2^53, where float64
#: (and XFloat) sums and products are exact (docs/architecture.md section 3, "Exact counts
#: from the float pass"). 52, not 53: room for the rounding of the bound's log2.
FLOAT_EXACT_BITS = 52


@njit(cache=True, nogil=True)
def _crt_small(r0, r1, p0, p1, inv, signed):
    """int64 values from residues modulo p0 and p1, in (-p0*p1/2, p0*p1/2] when `signed`."""
    out = np.empty(r0.shape[0], np.int64)
    M = p0 * p1
    for v in range(r0.shape[0]):
        x = r0[v] + ((r1[v] - r0[v]) % p1) * inv % p1 * p0
        out[v] = x - M if signed and x > M // 2 else x
    return out


def crt(
    residues: np.ndarray,
    signed: bool,
    small: np.ndarray | None = None,
    moduli: tuple[int, ...] | None = None,
) -> np.ndarray:
    """Python ints (object array) from residues of shape (P, m) modulo `moduli` (the passes'
    lanes' primes, rings.py `pass_moduli`; None: the first P primes below 2^31).

    Signed values are taken in (-M/2, M/2]; the caller has made M exceed twice the magnitude.
    `small` marks values the caller knows are below 2^SMALL_BITS in magnitude: those come from
    the first two primes below 2^31 in compiled code, where the general path takes Python
    integers per value (a sixth of bench_engine.py's 50 exact queries over 10^6 events went to
    their CRT and decimal conversion). Wide moduli always take the CRT basis.
    """
    P, m = residues.shape
    narrow = moduli is None or moduli == primes(P)
    if narrow and small is not None and P > 1 and small.any():
        out = np.empty(m, object)
        p0, p1 = primes(2)
        inv = int(_garner_inverses(2)[0, 1])
        out[small] = _crt_small(residues[0, small], residues[1, small], p0, p1, inv, signed)
        rest = ~small
        if rest.any():
            out[rest] = crt(np.ascontiguousarray(residues[:, rest]), signed)
        return out
    if P >= CRT_BASIS_FROM or not narrow:
        basis, M = _crt_basis(primes(P) if moduli is None else moduli)
        x = basis @ residues.astype(object) % M
    else:
        ps = primes(P)
        M = math.prod(ps)
        d = _garner(residues, np.asarray(ps, np.int64), _garner_inverses(P))
        x = d[P - 1].astype(object)
        for j in range(P - 2, -1, -1):
            x = x * ps[j] + d[j].astype(object)
    if signed:
        x = np.where(x > M // 2, x - M, x)
    return x


_NONE = np.array(None, dtype=object)


def _filled(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Python ints with 0 for None, validity) of an object array of ints and None."""
    valid = np.not_equal(values, _NONE)
    if valid.all():
        return values, valid
    return np.where(valid, values, 0), valid


def decimal38_overflow(values: np.ndarray) -> np.ndarray:
    """Where Python ints (None: null) are null or do not fit decimal(38): 10^38 or more. NumPy's
    loops over the objects, not a Python loop (a sixth of bench_engine.py's 50 exact queries
    over 10^6 events went to this, `crt` and `decimal_array`)."""
    filled, valid = _filled(values)
    return ~valid | (np.abs(filled) >= DECIMAL38_LIMIT)


def decimal_array(values: np.ndarray, scale: int) -> pa.Array:
    """decimal128(38, scale) from unscaled Python ints (None for null), all below 10^38: each
    value's two's complement as its low and high 64 bits, split in NumPy's loops."""
    filled, valid = _filled(values)
    words = np.empty((len(values), 2), np.int64)
    words[:, 0] = (filled & 0xFFFF_FFFF_FFFF_FFFF).astype(np.uint64).view(np.int64)
    words[:, 1] = (filled >> 64).astype(np.int64)
    raw = words.tobytes()
    mask = None
    null_count = int((~valid).sum())
    if null_count:
        mask = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.Array.from_buffers(
        pa.decimal128(38, scale), len(values), [mask, pa.py_buffer(raw)], null_count=null_count
    )


def bigint_strings(values: np.ndarray, scale: int) -> pa.Array:
    """Exact decimal strings (with `scale` digits after the point) from Python ints; a
    negative scale's zeros written out (unscaled 3 at scale -2 is '300')."""
    if scale <= 0:
        zeros = "0" * -scale
        return pa.array(
            [None if v is None else int_text(v) + (zeros if v else "") for v in values],
            pa.string(),
        )

    def text(v: int) -> str:
        # From the int's own digits: a Decimal would round to its context's 28 digits.
        digits = int_text(abs(v)).rjust(scale + 1, "0")
        return f"{'-' if v < 0 else ''}{digits[:-scale]}.{digits[-scale:]}"

    return pa.array([None if v is None else text(int(v)) for v in values], pa.string())


def _max_str_digits() -> int:
    """The most digits Python converts between int and str (0: no limit; 4,300 by default
    since 3.11, `sys.set_int_max_str_digits`)."""
    return sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0


def int_text(v: int) -> str:
    """str(v) for an int of any size. Python refuses to convert one of more digits than its
    limit (a guard against slow conversions of untrusted input), which bigint counts pass:
    2^15,000 trends have 4,516 digits. Halves of the digits are converted apart, by divmod with
    a power of ten, leaving the interpreter's limit as it is for other code."""
    v = int(v)  # (NumPy's integers have no bit_length)
    limit = _max_str_digits()
    if limit == 0 or v.bit_length() <= (limit - 1) * 3.3219:  # (log2(10) = 3.32193...)
        return str(v)
    return ("-" if v < 0 else "") + _digits(abs(v), limit)


def _digits(v: int, limit: int) -> str:
    if v.bit_length() <= (limit - 1) * 3.3219:  # below 10^(limit - 1)
        return str(v)
    k = v.bit_length() * 30103 // 200000  # about half its digits (log10(2) = 0.30103)
    high, low = divmod(v, 10**k)
    return _digits(high, limit) + _digits(low, limit).rjust(k, "0")


def text_int(text: str) -> int:
    """int(text) for a decimal string of any length (`int_text`'s inverse)."""
    limit = _max_str_digits()
    if limit == 0 or len(text) < limit:
        return int(text)
    if text[0] in "+-":
        return -text_int(text[1:]) if text[0] == "-" else text_int(text[1:])
    k = len(text) // 2
    return text_int(text[:-k]) * 10**k + text_int(text[-k:])


@njit(cache=True, nogil=True, error_model="numpy")
def _ldexp_clipped(x: float, e: float) -> float:
    """x * 2^e with e truncated and clipped to [-2000, 2000], as NumPy's steps did; a NaN
    exponent is far below (NumPy cast it to the least int64)."""
    if e > 2000.0:
        k = 2000
    elif e >= -2000.0:
        k = int(e)
    else:
        k = -2000 if e == e else -1_000_000
    return math.ldexp(x, k)


@njit(cache=True, nogil=True, error_model="numpy")
def xfloat_to_float(m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """float64 values of (mantissa, exponent) pairs, 1-D; inf where beyond the float64 range.
    Compiled: per result column of a small call, NumPy's five steps (and its error state) cost
    more than the rows (bench_small.py)."""
    out = np.empty(m.shape[0])
    for i in range(m.shape[0]):
        out[i] = _ldexp_clipped(m[i], e[i])
    return out


@njit(cache=True, nogil=True)
def float_nulls(vals: np.ndarray, null: np.ndarray) -> tuple[np.ndarray, int, bool]:
    """Where a float64 result column is null: where there is no value (`null`) or it is beyond
    float64 (infinite or NaN). Returns that mask, the first row beyond float64 that has a value
    (-1: none) and whether any row is null, and zeroes the null rows' `vals` in place (Arrow
    keeps a value under a null). One pass: per column of a small call, the NumPy steps it
    replaces cost more than the rows (bench_small.py)."""
    mask = np.empty(vals.shape[0], np.bool_)
    first = -1
    masked = False
    for i in range(vals.shape[0]):
        beyond = not np.isfinite(vals[i])
        if beyond and not null[i] and first < 0:
            first = i
        mask[i] = beyond or null[i]
        if mask[i]:
            vals[i] = 0.0
            masked = True
    return mask, first, masked


@njit(cache=True, nogil=True, error_model="numpy")
def xfloat_log2(m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """log2 |value| of (mantissa, exponent) pairs, 1-D (-inf for zero). Compiled, as
    `xfloat_to_float` is."""
    out = np.empty(m.shape[0])
    for i in range(m.shape[0]):
        out[i] = np.log2(abs(m[i])) + e[i]
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def xfloat_ratio(nm: np.ndarray, ne: np.ndarray, dm: np.ndarray, de: np.ndarray) -> np.ndarray:
    """num / den for (mantissa, exponent) pairs, 1-D: the scales cancel, so it holds beyond
    float64. (x / 0 is inf or NaN, as in NumPy.)"""
    out = np.empty(nm.shape[0])
    for i in range(nm.shape[0]):
        out[i] = _ldexp_clipped(nm[i] / dm[i], ne[i] - de[i])
    return out

"""The number systems the trend state is propagated in, as numba inline functions.

Every event is a linear map on the trend state (DESIGN.md section 3), so one kernel serves every
numeric need once it is written over a semiring: an element is a tuple of `lanes` numbers of one
dtype, stored in the last axis of the state arrays. `rp` carries a ring's run-time parameter (the
modulus), so that one compiled kernel serves every prime.

- `XFLOAT`: float64 mantissa with its own tracked binary exponent. Trend counts grow like 2^n, so
  plain float64 overflows on bursts of ~1000 events; a per-element exponent also keeps small
  components exact-to-rounding next to huge ones (one shared exponent per state would flush them).
- `MODP`: residues modulo a prime below 2^31 (products fit int64). Exact results come from several
  primes by the Chinese remainder theorem (gpu_hamlet/numeric.py).
- `MINREACH`: (reachable, min rank) pairs: reachability is the boolean semiring and the value is
  the min over the attribute ranks on the path, which gives MIN (and MAX, on negated ranks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import njit

_BIG = 2.0**200
_SMALL = 2.0**-200
#: Sentinel rank meaning "no value" in MINREACH.
NO_RANK = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Ring:
    """A semiring's numba operations plus its storage layout."""

    name: str
    dtype: type
    lanes: int
    zero: Callable
    one: Callable
    add: Callable
    mul: Callable
    is_zero: Callable
    load: Callable
    store: Callable


# --- XFLOAT: (mantissa, exponent) both stored as float64 -------------------------------------


@njit(inline="always")
def _xf_fix(m, e):
    a = abs(m)
    if a == 0.0:
        return 0.0, 0.0
    if a >= _BIG or a < _SMALL:
        f, ex = math.frexp(m)
        return f, e + ex
    return m, e


@njit(inline="always")
def _xf_zero():
    return 0.0, 0.0


@njit(inline="always")
def _xf_one():
    return 1.0, 0.0


@njit(inline="always")
def _xf_add(a, b, rp):
    am, ae = a
    bm, be = b
    if am == 0.0:
        return b
    if bm == 0.0:
        return a
    if ae == be:
        return _xf_fix(am + bm, ae)
    if ae > be:
        d = be - ae
        if d < -1200.0:
            return a
        return _xf_fix(am + math.ldexp(bm, int(d)), ae)
    d = ae - be
    if d < -1200.0:
        return b
    return _xf_fix(bm + math.ldexp(am, int(d)), be)


@njit(inline="always")
def _xf_mul(a, b, rp):
    am, ae = a
    bm, be = b
    if am == 0.0 or bm == 0.0:
        return 0.0, 0.0
    return _xf_fix(am * bm, ae + be)


@njit(inline="always")
def _xf_is_zero(a):
    return a[0] == 0.0


@njit(inline="always")
def _pair_load(X, i, j):
    return X[i, j, 0], X[i, j, 1]


@njit(inline="always")
def _pair_store(X, i, j, v):
    X[i, j, 0] = v[0]
    X[i, j, 1] = v[1]


XFLOAT = Ring("xfloat", np.float64, 2, _xf_zero, _xf_one, _xf_add, _xf_mul, _xf_is_zero,
              _pair_load, _pair_store)


# --- MODP: one int64 residue; rp[0] is the modulus ------------------------------------------


@njit(inline="always")
def _mp_zero():
    return np.int64(0)


@njit(inline="always")
def _mp_one():
    return np.int64(1)


@njit(inline="always")
def _mp_add(a, b, rp):
    s = a + b
    if s >= rp[0]:
        s -= rp[0]
    return s


@njit(inline="always")
def _mp_mul(a, b, rp):
    return (a * b) % rp[0]


@njit(inline="always")
def _mp_is_zero(a):
    return a == 0


@njit(inline="always")
def _one_load(X, i, j):
    return X[i, j, 0]


@njit(inline="always")
def _one_store(X, i, j, v):
    X[i, j, 0] = v


MODP = Ring("modp", np.int64, 1, _mp_zero, _mp_one, _mp_add, _mp_mul, _mp_is_zero,
            _one_load, _one_store)


# --- MINREACH: (reachable 0/1, min rank) stored as int64; unreachable is (0, NO_RANK) -------


@njit(inline="always")
def _mr_zero():
    return np.int64(0), NO_RANK


@njit(inline="always")
def _mr_one():
    return np.int64(1), NO_RANK


@njit(inline="always")
def _mr_add(a, b, rp):
    return a[0] | b[0], min(a[1], b[1])


@njit(inline="always")
def _mr_mul(a, b, rp):
    if a[0] == 0 or b[0] == 0:
        return np.int64(0), NO_RANK
    return np.int64(1), min(a[1], b[1])


@njit(inline="always")
def _mr_is_zero(a):
    return a[0] == 0


MINREACH = Ring("minreach", np.int64, 2, _mr_zero, _mr_one, _mr_add, _mr_mul, _mr_is_zero,
                _pair_load, _pair_store)

RINGS: dict[str, Ring] = {r.name: r for r in (XFLOAT, MODP, MINREACH)}

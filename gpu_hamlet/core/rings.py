"""The number systems the trend state is propagated in, for the numba kernels.

Every event is a linear map on the trend state (docs/architecture.md section 2), so one kernel
serves every numeric need once it is written over a semiring. An element is a tuple of `lanes`
numbers stored in the last axis of the state arrays. A ring is chosen by the *type* of a small tag
namedtuple passed to the kernels: numba compiles one specialisation per ring and caches it on disk,
and the tag carries the ring's run-time parameter (the modulus), so one compiled kernel serves every
prime.

- `XFloat`: float64 mantissa with its own tracked binary exponent. Trend counts grow like 2^n, so
  plain float64 overflows on bursts of ~1000 events; a per-element exponent also keeps small
  components exact-to-rounding next to huge ones (one shared exponent per state would flush them).
- `ModP`: residues modulo a prime below 2^31 (products fit int64). Exact results come from several
  primes by the Chinese remainder theorem (gpu_hamlet/core/numeric.py).
- `MinReach`: (reachable, min rank) pairs: reachability is the boolean semiring and the value is
  the min over the attribute ranks on the path, which gives MIN (and MAX, on negated ranks).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numba import njit, types
from numba.extending import overload

_BIG = 2.0**200
_SMALL = 2.0**-200
#: Sentinel rank meaning "no value" in MinReach.
NO_RANK = np.iinfo(np.int64).max


class XFloat(NamedTuple):
    unused: int = 0


class ModP(NamedTuple):
    p: int


class MinReach(NamedTuple):
    unused: int = 0


#: Storage of each ring: (dtype, lanes).
LAYOUT = {XFloat: (np.float64, 2), ModP: (np.int64, 1), MinReach: (np.int64, 2)}
BY_NAME = {"xfloat": XFloat, "modp": ModP, "minreach": MinReach}


def make_tag(ring: str, param: int = 0) -> tuple:
    """The tag value for a ring name ('modp' takes the prime)."""
    cls = BY_NAME[ring]
    return cls(int(param)) if cls is ModP else cls(0)


def layout(ring: str) -> tuple[type, int]:
    return LAYOUT[BY_NAME[ring]]


def _ring_of(tag) -> type | None:
    if isinstance(tag, (types.NamedTuple, types.NamedUniTuple)):
        return tag.instance_class
    return None


# The generic entry points the kernels call; numba picks the implementation by the tag's type.
def _compiled_only(*args):  # pragma: no cover - the overloads below replace these in numba code
    raise TypeError("ring operations run only inside numba-compiled kernels")


def r_zero(tag):  # pragma: no cover
    _compiled_only()


def r_one(tag):  # pragma: no cover
    _compiled_only()


def r_add(tag, a, b):  # pragma: no cover
    _compiled_only()


def r_mul(tag, a, b):  # pragma: no cover
    _compiled_only()


def r_is_zero(tag, a):  # pragma: no cover
    _compiled_only()


def r_load(tag, X, i, j):  # pragma: no cover
    _compiled_only()


def r_store(tag, X, i, j, v):  # pragma: no cover
    _compiled_only()


# --- scalar arithmetic, shared with the GPU backend ---------------------------------------------


class ScalarOps(NamedTuple):
    """The rings' scalar operations compiled for one target."""

    xf_add: Callable
    xf_mul: Callable
    mp_add: Callable
    mp_mul: Callable
    mr_add: Callable
    mr_mul: Callable


def scalar_ops(jit: Callable) -> ScalarOps:
    """The rings' arithmetic compiled by `jit` (numba.njit here, numba.cuda.jit(device=True) for
    the GPU kernels): written once, so both backends round alike and give identical bits."""

    @jit
    def xf_fix(m, e):
        a = abs(m)
        if a == 0.0:
            return 0.0, 0.0
        if a >= _BIG or a < _SMALL:
            f, ex = math.frexp(m)
            return f, e + ex
        return m, e

    @jit
    def xf_add(a, b):
        am, ae = a
        bm, be = b
        if am == 0.0:
            return b
        if bm == 0.0:
            return a
        if ae == be:
            return xf_fix(am + bm, ae)
        if ae > be:
            d = be - ae
            if d < -1200.0:
                return a
            return xf_fix(am + math.ldexp(bm, int(d)), ae)
        d = ae - be
        if d < -1200.0:
            return b
        return xf_fix(bm + math.ldexp(am, int(d)), be)

    @jit
    def xf_mul(a, b):
        am, ae = a
        bm, be = b
        if am == 0.0 or bm == 0.0:
            return 0.0, 0.0
        return xf_fix(am * bm, ae + be)

    @jit
    def mp_add(a, b, p):
        s = a + b
        if s >= p:
            s -= p
        return s

    @jit
    def mp_mul(a, b, p):
        return (a * b) % p

    # (min() on integers does not compile for the CUDA target: comparisons do the same)
    @jit
    def mr_add(a, b):
        return a[0] | b[0], a[1] if a[1] < b[1] else b[1]

    @jit
    def mr_mul(a, b):
        if a[0] == 0 or b[0] == 0:
            return np.int64(0), NO_RANK
        return np.int64(1), a[1] if a[1] < b[1] else b[1]

    return ScalarOps(xf_add, xf_mul, mp_add, mp_mul, mr_add, mr_mul)


_CPU = scalar_ops(njit)
_xf_add, _xf_mul, _mp_add, _mp_mul, _mr_add, _mr_mul = _CPU


# --- dispatch -----------------------------------------------------------------------------------


@overload(r_zero)
def _ov_zero(tag):
    ring = _ring_of(tag)
    if ring is XFloat:
        return lambda tag: (0.0, 0.0)
    if ring is ModP:
        return lambda tag: np.int64(0)
    if ring is MinReach:
        return lambda tag: (np.int64(0), NO_RANK)
    return None


@overload(r_one)
def _ov_one(tag):
    ring = _ring_of(tag)
    if ring is XFloat:
        return lambda tag: (1.0, 0.0)
    if ring is ModP:
        return lambda tag: np.int64(1)
    if ring is MinReach:
        return lambda tag: (np.int64(1), NO_RANK)
    return None


@overload(r_add)
def _ov_add(tag, a, b):
    ring = _ring_of(tag)
    if ring is XFloat:
        return lambda tag, a, b: _xf_add(a, b)
    if ring is ModP:
        return lambda tag, a, b: _mp_add(a, b, tag.p)
    if ring is MinReach:
        return lambda tag, a, b: _mr_add(a, b)
    return None


@overload(r_mul)
def _ov_mul(tag, a, b):
    ring = _ring_of(tag)
    if ring is XFloat:
        return lambda tag, a, b: _xf_mul(a, b)
    if ring is ModP:
        return lambda tag, a, b: _mp_mul(a, b, tag.p)
    if ring is MinReach:
        return lambda tag, a, b: _mr_mul(a, b)
    return None


@overload(r_is_zero)
def _ov_is_zero(tag, a):
    ring = _ring_of(tag)
    if ring is XFloat:
        return lambda tag, a: a[0] == 0.0
    if ring is ModP:
        return lambda tag, a: a == 0
    if ring is MinReach:
        return lambda tag, a: a[0] == 0
    return None


@overload(r_load)
def _ov_load(tag, X, i, j):
    if _ring_of(tag) is ModP:
        return lambda tag, X, i, j: X[i, j, 0]
    return lambda tag, X, i, j: (X[i, j, 0], X[i, j, 1])


@overload(r_store)
def _ov_store(tag, X, i, j, v):
    if _ring_of(tag) is ModP:

        def store1(tag, X, i, j, v):
            X[i, j, 0] = v

        return store1

    def store2(tag, X, i, j, v):
        X[i, j, 0] = v[0]
        X[i, j, 1] = v[1]

    return store2

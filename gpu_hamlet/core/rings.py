"""The number systems the trend state is propagated in, for every backend.

Every event is a linear map on the trend state (docs/architecture.md section 2), so one recursion
serves every numeric need once it is written over a semiring. An element is a tuple of `lanes`
numbers stored in the last axis of the state arrays. A ring is chosen by the *type* of a small tag
namedtuple passed to the recursions (gpu_hamlet/core/recursions.py): numba compiles one
specialisation per ring, and the tag carries the ring's run-time parameter (the modulus), so one
compiled kernel serves every prime.

- `XFloat`: float64 mantissa with its own tracked binary exponent. Trend counts grow like 2^n, so
  plain float64 overflows on bursts of ~1000 events; a per-element exponent also keeps small
  components exact-to-rounding next to huge ones (one shared exponent per state would flush them).
- `ModP`: residues modulo a prime below 2^31 (products fit int64). Exact results come from several
  primes by the Chinese remainder theorem (gpu_hamlet/core/numeric.py).
- `ModPs`: several such residues at once, one prime per lane: 8 in ring 'modps8' (exact counts
  that need 2 to 23 primes) and 32 in 'modps' (bigint counts of hundreds of digits, whose lanes
  take primes below 2^50, `LANE_PRIME_BITS`: 50 bits a lane, not 31, for the same work). A
  row's control flow (its state, predecessors and branches) then serves every lane of a pass
  instead of being paid once per prime, and the lanes are branch-free arithmetic the compiler
  can vectorise (docs/architecture.md section 4).
- `MinReach`: (reachable, min rank) pairs: reachability is the boolean semiring and the value is
  the min over the attribute ranks on the path, which gives MIN (and MAX, on negated ranks).

Each operation is a plain Python function, registered with numba for every target (`jitable`):
`numba.njit` code (the CPU backend) and `numba.cuda.jit` code (the GPU backend) compile the same
source, and numba's CUDA simulator runs it as Python. The generic `r_*` operations pick the ring
by the tag's type: in compiled code at typing time (the `@overload`s below), in Python by
`isinstance`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any, NamedTuple, TypeVar

import numpy as np
from numba import njit, types
from numba.extending import overload

from gpu_hamlet.core.numeric import WIDE_PRIME_BITS, primes, primes_for_bits

_BIG = 2.0**200
_SMALL = 2.0**-200
#: Sentinel rank meaning "no value" in MinReach.
NO_RANK = np.iinfo(np.int64).max

F = TypeVar("F", bound=Callable[..., Any])


def jitable(fn: F) -> F:
    """Make a plain Python function callable from numba code on every target (CPU and CUDA):
    it is compiled where it is called, with the caller's argument types."""
    overload(fn, target="generic", strict=False)(lambda *args: fn)
    return fn


class XFloat(NamedTuple):
    unused: int = 0


class ModP(NamedTuple):
    p: int


class ModPs(NamedTuple):
    ps: tuple[int, ...]  # one prime per lane


class MinReach(NamedTuple):
    unused: int = 0


#: Primes per element of each `ModPs` ring: pass c of ring r computes residues modulo primes
#: LANES[r] * c .. LANES[r] * (c + 1) - 1 (gpu_hamlet/core/numeric.py `primes`). 'modps': on the
#: authors' workload at 20,000 events (`python benchmarks/bench_bigint.py --events 20000`), 32
#: lanes took 0.35 s, 8 and 16 about 0.5 s, and 64 0.42 s; with the lanes as SIMD vectors, 8
#: lanes took 1.18 s at 100,000 events against 32 lanes' 0.66 s. 'modps8': sized for the exact
#: mode's 2 to 5 primes, one 512-bit vector of int64; on bench_engine.py's 50 queries over
#: 10^6 events the exact call took 2.66 s with 8 lanes, 3.71 s with 16, 2.80 s with 4 and 3.41 s
#: with one prime per pass (docs/architecture.md section 2).
LANES = {"modps8": 8, "modps": 32}
#: The bound of each lane ring's primes: 'modps' lanes take primes below 2^50, whose products
#: wrap in int64 and come back exactly (`lane_mul`), so a bigint pass holds 1,600 bits, not 992:
#: the authors' counts of 4,000 digits at 100,000 events take 9 passes rather than 14
#: (benchmarks/bench_bigint.py). 'modps8' keeps 2^31: exact mode's 2 to 5 primes fit one pass
#: either way, and its residues meet `modp`'s.
LANE_PRIME_BITS = {"modps8": 31, "modps": WIDE_PRIME_BITS}

#: Storage of each ring: (dtype, lanes).
LAYOUT: dict[str, tuple[type, int]] = {
    "xfloat": (np.float64, 2),
    "modp": (np.int64, 1),
    **{ring: (np.int64, lanes) for ring, lanes in LANES.items()},
    "minreach": (np.int64, 2),
}
BY_NAME: dict[str, type] = {
    "xfloat": XFloat,
    "modp": ModP,
    **{ring: ModPs for ring in LANES},
    "minreach": MinReach,
}


@cache
def lane_primes(ring: str, chunk: int) -> tuple[int, ...]:
    """The primes of pass `chunk` of lane ring `ring`, lane by lane."""
    w = LANES[ring]
    return primes((chunk + 1) * w, LANE_PRIME_BITS[ring])[chunk * w :]


def is_residue(ring: str) -> bool:
    """Whether `ring` computes residues (one prime, or one per lane)."""
    return ring == "modp" or ring in LANES


def make_tag(ring: str, param: int = 0) -> tuple:
    """The tag value for a ring name ('modp' takes the prime, a lane ring the pass number)."""
    cls = BY_NAME[ring]
    if cls is ModP:
        return ModP(int(param))
    if cls is ModPs:
        return ModPs(lane_primes(ring, int(param)))
    return cls(0)


def ring_primes(ring: str, param: int) -> tuple[int, ...]:
    """The primes of a residue ring's lanes ('modp': its one prime; a lane ring: its pass's)."""
    return (int(param),) if ring == "modp" else lane_primes(ring, int(param))


#: `residue_passes` runs 'modps8' from `MODPS8_FROM` primes below 2^31 on and 'modps' from
#: `MODPS_FROM` on; one prime runs in 'modp', whose rows cost about half an 8-lane row. A 32-lane
#: pass costs as little as four one-prime passes where rows' control dominates (the HAMLET
#: authors' workload, 87 to 431 such primes) but up to 32 where arithmetic does (sliding windows'
#: map products, several channels): on bench_engine.py's 50 queries over 300,000 events, 3
#: queries of 5 primes took 0.7 s more in 'modps' than 47 queries in 'modp'. From 24 primes
#: below 2^31 (744 bits), 'modps8' would take 3 passes or more where one 'modps' pass of primes
#: below 2^50 holds 1,600 bits.
MODPS8_FROM = 2
MODPS_FROM = 24


def residue_passes(bits: float) -> list[tuple[str, int]]:
    """The (ring, param) runs whose lanes hold residues modulo primes whose product exceeds
    2^bits (`pass_moduli`): 'modp' for one prime below 2^31, 'modps8' passes from `MODPS8_FROM`
    such primes, and from `MODPS_FROM` on 'modps' passes of as many primes below 2^50 as the
    bits need."""
    n_primes = primes_for_bits(bits)
    if n_primes >= MODPS_FROM:
        wide = primes_for_bits(bits, LANE_PRIME_BITS["modps"])
        return [("modps", c) for c in range(-(-wide // LANES["modps"]))]
    if n_primes >= MODPS8_FROM:
        return [("modps8", c) for c in range(-(-n_primes // LANES["modps8"]))]
    return [("modp", p) for p in primes(n_primes)]


def pass_moduli(passes: Iterable[tuple[str, int]]) -> tuple[int, ...]:
    """The primes of the passes' lanes, in order: the moduli `crt` rebuilds their values from."""
    return _moduli(tuple(passes))


@cache
def _moduli(passes: tuple[tuple[str, int], ...]) -> tuple[int, ...]:
    """(Kept: every exact channel of a query asks, and 288 primes took 26 us to gather.)"""
    return tuple(p for ring, param in passes for p in ring_primes(ring, param))


def ring_integers(ring: str, param: int, n: np.ndarray) -> np.ndarray:
    """Non-negative integers n as ring elements [len(n), 1, lanes]: the sum of n ones (in
    MINREACH, reachable for n > 0)."""
    dtype, lanes = layout(ring)
    out: np.ndarray = np.zeros((n.shape[0], 1, lanes), dtype)
    if ring == "xfloat":
        out[:, 0, 0], out[:, 0, 1] = np.frexp(n.astype(np.float64))
    elif ring == "minreach":
        out[:, 0, 0], out[:, 0, 1] = n > 0, NO_RANK
    elif n.size and n.max() >= 2**30:  # primes exceed 2^30
        out[:, 0, :] = n[:, None] % np.asarray(ring_primes(ring, param), np.int64)
    else:
        out[:, 0, :] = n[:, None]
    return out


def kernel_param(ring: str, param: int = 0) -> Any:
    """What a GPU kernel builds its tag from (`Tag(prm)`): the tag's only field."""
    return make_tag(ring, param)[0]


def layout(ring: str) -> tuple[type, int]:
    return LAYOUT[ring]


# --- scalar arithmetic --------------------------------------------------------------------------


@jitable
def f_mul(a, b):
    """a * b in float64, rounded on its own. The GPU backend compiles it as libdevice's
    `dmul_rn` (gpu_hamlet/kernels/rounding.py), which the GPU compiler never fuses with an add
    into one fused multiply-add; the CPU never fuses. So float results are the same bits on both
    (BENCHMARKS.md, GPU kernels)."""
    return a * b


@jitable
def f_add(a, b):
    """a + b in float64, rounded on its own (`f_mul`; libdevice's `dadd_rn` on the GPU)."""
    return a + b


@jitable
def xf_fix(m, e):
    a = abs(m)
    if a == 0.0:
        return 0.0, 0.0
    if a >= _BIG or a < _SMALL:
        f, ex = math.frexp(m)
        return f, e + ex
    return m, e


#: 2^-k for k = 0..1074 (down to the smallest subnormal), then 0: `xf_add` scales a mantissa
#: by one, which rounds exactly as `math.ldexp` (both round the same exact value once).
_POW2 = np.concatenate([np.ldexp(1.0, -np.arange(1075)), np.zeros(25)])


@jitable
def xf_add(a, b):
    """Both mantissas scaled to the larger exponent and added: the same bits as adding the
    smaller one's `ldexp` to the larger (it is 1 times the larger), without a branch on which
    exponent is larger and without a call. Counts grow by bursts, so the exponents of the
    terms differ at random: the branches and `ldexp` made a segment kernel over shared bursts
    1.9x slower (benchmarks/bench_sharing.py, docs/architecture.md section 3). A scale below
    2^-1074 is 0: such a term is below half a unit of the other's last bit, whose mantissa is at
    least 2^-200 (`xf_fix`), so it changed nothing before either."""
    am, ae = a
    bm, be = b
    if am == 0.0:
        return b
    if bm == 0.0:
        return a
    e = ae if ae > be else be
    da = e - ae if e - ae < 1099.0 else 1099.0
    db = e - be if e - be < 1099.0 else 1099.0
    return xf_fix(f_add(f_mul(am, _POW2[int(da)]), f_mul(bm, _POW2[int(db)])), e)


@jitable
def xf_scale(m, d):
    """m * 2^-d for an XFloat mantissa m (2^-200 <= |m| < 2^200, `xf_fix`) and a whole d >= 0,
    the same bits as `math.ldexp(m, -d)` without its call: by two powers of two from the
    table, the first at most 2^-200 (exact: the product stays normal), the second rounding
    once, as `ldexp` rounds; beyond 2^-1074 the table's 0 is what `ldexp` rounds to, as |m|
    times the first is below 1."""
    first = d if d < 200.0 else 200.0
    rest = d - first if d - first < 1099.0 else 1099.0
    return f_mul(f_mul(m, _POW2[int(first)]), _POW2[int(rest)])


@jitable
def xf_mul(a, b):
    am, ae = a
    bm, be = b
    if am == 0.0 or bm == 0.0:
        return 0.0, 0.0
    return xf_fix(f_mul(am, bm), ae + be)


#: Below this a float64 is near the subnormal range, where a product would lose bits
#: (`xf_scaled_rows`).
XF_TINY = 2.0**-1020
#: A shared block's plain-float products (gpu_hamlet/core/recursions.py `xf_block_terms`) are
#: added from XF_FAR up (normal floats: XFloat's roundings) and left out below it. With no
#: negative term, a sum whose added products are all XF_NEAR or more absorbs what is left out:
#: under 2^12 products of less than XF_FAR stay below half the last bit of XF_NEAR.
XF_NEAR = 2.0**-955
XF_FAR = 2.0**-1020


def xf_scaled_rows(m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """XFloat matrices [..., rows, cols] (mantissas m, exponents e) as plain floats scaled to
    their row's largest entry, and that entry's binary exponent, stored by column: [..., cols,
    rows, 2] holding (m * 2^(e - top), top), but for column 1, whose second components hold a
    bound for the row's products instead: the row's smallest nonzero |entry| (inf: none), or
    -1 where the row holds a negative entry or a NaN. With its input scaled alike, a row times a
    vector is then plain float arithmetic with XFloat's roundings while no product nears the
    subnormal range (gpu_hamlet/core/recursions.py `xf_block_terms`); an entry too small
    beside its row's largest is NaN, so that its product shows it. One compiled pass: in
    NumPy's dozen passes, 2,410 maps of 13 x 13 took 30 ms of a shared stage's call."""
    rows, cols = m.shape[-2], m.shape[-1]
    out = np.empty((*m.shape[:-2], cols, rows, 2))
    _scaled_rows(
        np.ascontiguousarray(m).reshape(-1, rows, cols),
        np.ascontiguousarray(e, np.float64).reshape(-1, rows, cols),
        out.reshape(-1, cols, rows, 2),
    )
    return out


@njit(cache=True, nogil=True)
def _scaled_rows(m, e, out):
    """`xf_scaled_rows` over maps [n, rows, cols] into out [n, cols, rows, 2]."""
    for i in range(m.shape[0]):
        for r in range(m.shape[1]):
            top = -math.inf  # the largest entry's binary exponent
            for c in range(m.shape[2]):
                if m[i, r, c] != 0.0:
                    top = max(top, math.frexp(m[i, r, c])[1] + e[i, r, c])
            if top == -math.inf:
                top = 0.0
            least = math.inf  # the smallest nonzero entry, scaled
            signed = False  # a negative entry or a NaN
            for c in range(m.shape[2]):
                v = m[i, r, c]
                if v != 0.0:
                    v = math.ldexp(v, int(min(max(e[i, r, c] - top, -1.0e6), 1.0e6)))
                    if abs(v) < XF_TINY:
                        v = math.nan
                    if v > 0.0:
                        least = min(least, v)
                    else:
                        signed = True
                out[i, c, r, 0] = v
                out[i, c, r, 1] = top
            if m.shape[2] > 1:
                out[i, 1, r, 1] = -1.0 if signed else least


@jitable
def mp_add(a, b, p):
    s = a + b
    if s >= p:
        s -= p
    return s


@jitable
def mp_mul(a, b, p):
    return (a * b) % p


@jitable
def lane_add(a, b, p):
    """`mp_add` without a branch: lanes take either side at random."""
    s = a + b
    return s - p if s >= p else s


@jitable
def lane_mul(a, b, p):
    """`mp_mul` without an integer division (tens of cycles per lane): the quotient from float64,
    off by at most one (three roundings, relative error below 2^-51, on a quotient below 2^50:
    an error below 0.4), then corrected. a * b - q * p is the remainder plus a multiple of p in
    [-p, 2p): exact in int64 though a * b itself wraps there for primes above 2^31.5 (Python's
    ints, which the simulator runs, do not wrap and give the same). Multiplying by the prime's
    reciprocal rather than dividing made bigint on the authors' workload 0.26 -> 0.20 s at
    20,000 events (benchmarks/bench_bigint.py)."""
    q = int(f_mul(f_mul(float(a), float(b)), 1.0 / float(p)))
    r = int(a) * int(b) - q * int(p)
    r = r + p if r < 0 else r
    return r - p if r >= p else r


# (min() on integers does not compile for the CUDA target: comparisons do the same)
@jitable
def mr_add(a, b):
    return a[0] | b[0], a[1] if a[1] < b[1] else b[1]


@jitable
def mr_mul(a, b):
    if a[0] == 0 or b[0] == 0:
        return np.int64(0), NO_RANK
    return np.int64(1), a[1] if a[1] < b[1] else b[1]


# --- the ring-generic operations the recursions call --------------------------------------------
# The Python bodies serve the simulator (and plain Python); compiled code uses the overloads.


def r_zero(tag):
    if isinstance(tag, ModP):
        return np.int64(0)
    if isinstance(tag, ModPs):
        return tuple(np.int64(0) for _ in tag.ps)
    if isinstance(tag, MinReach):
        return np.int64(0), NO_RANK
    return 0.0, 0.0


def r_one(tag):
    if isinstance(tag, ModP):
        return np.int64(1)
    if isinstance(tag, ModPs):
        return tuple(np.int64(1) for _ in tag.ps)
    if isinstance(tag, MinReach):
        return np.int64(1), NO_RANK
    return 1.0, 0.0


def r_add(tag, a, b):
    if isinstance(tag, ModP):
        return mp_add(a, b, tag.p)
    if isinstance(tag, ModPs):
        return tuple(lane_add(x, y, p) for x, y, p in zip(a, b, tag.ps))
    if isinstance(tag, MinReach):
        return mr_add(a, b)
    return xf_add(a, b)


def r_mul(tag, a, b):
    if isinstance(tag, ModP):
        return mp_mul(a, b, tag.p)
    if isinstance(tag, ModPs):
        return tuple(lane_mul(x, y, p) for x, y, p in zip(a, b, tag.ps))
    if isinstance(tag, MinReach):
        return mr_mul(a, b)
    return xf_mul(a, b)


def r_is_zero(tag, a):
    if isinstance(tag, ModP):
        return a == 0
    if isinstance(tag, ModPs):
        return not any(a)
    return a[0] == 0


def r_load(tag, X, i, j):
    if isinstance(tag, ModP):
        return X[i, j, 0]
    if isinstance(tag, ModPs):
        return tuple(X[i, j, q] for q in range(len(tag.ps)))
    return X[i, j, 0], X[i, j, 1]


def r_store(tag, X, i, j, v):
    if isinstance(tag, ModP):
        X[i, j, 0] = v
    elif isinstance(tag, ModPs):
        for q in range(len(tag.ps)):
            X[i, j, q] = v[q]
    else:
        X[i, j, 0] = v[0]
        X[i, j, 1] = v[1]


def ring_of(tag) -> type | None:
    """The ring class of a tag's numba type (in an `@overload`), or None."""
    if isinstance(tag, (types.NamedTuple, types.NamedUniTuple)):
        return tag.instance_class
    return None


@cache
def _lanes(op: str, lanes: int) -> Callable:
    """The compiled form of `op` on ModPs elements of `lanes` lanes: one statement per lane,
    written out so that elements stay tuples in registers (numba cannot build a tuple in a loop)."""
    each = range(lanes)
    body = {
        "zero": ("tag", "return (" + "".join("np.int64(0), " for _ in each) + ")"),
        "one": ("tag", "return (" + "".join("np.int64(1), " for _ in each) + ")"),
        "add": (
            "tag, a, b",
            "return (" + "".join(f"lane_add(a[{q}], b[{q}], tag.ps[{q}]), " for q in each) + ")",
        ),
        "mul": (
            "tag, a, b",
            "return (" + "".join(f"lane_mul(a[{q}], b[{q}], tag.ps[{q}]), " for q in each) + ")",
        ),
        "is_zero": ("tag, a", "return (" + " | ".join(f"a[{q}]" for q in each) + ") == 0"),
        "load": ("tag, X, i, j", "return (" + "".join(f"X[i, j, {q}], " for q in each) + ")"),
        "store": ("tag, X, i, j, v", "; ".join(f"X[i, j, {q}] = v[{q}]" for q in each)),
    }
    args, code = body[op]
    scope: dict[str, Any] = {"np": np, "lane_add": lane_add, "lane_mul": lane_mul}
    exec(f"def {op}({args}):\n    {code}\n", scope)  # noqa: S102 - fixed text, no input
    fn: Callable = scope[op]
    return fn


def _modps_lanes(tag) -> int:
    return int(tag.types[0].count)


@overload(r_zero, target="generic")
def _ov_zero(tag):
    ring = ring_of(tag)
    if ring is XFloat:
        return lambda tag: (0.0, 0.0)
    if ring is ModP:
        return lambda tag: np.int64(0)
    if ring is ModPs:
        return _lanes("zero", _modps_lanes(tag))
    if ring is MinReach:
        return lambda tag: (np.int64(0), NO_RANK)
    return None


@overload(r_one, target="generic")
def _ov_one(tag):
    ring = ring_of(tag)
    if ring is XFloat:
        return lambda tag: (1.0, 0.0)
    if ring is ModP:
        return lambda tag: np.int64(1)
    if ring is ModPs:
        return _lanes("one", _modps_lanes(tag))
    if ring is MinReach:
        return lambda tag: (np.int64(1), NO_RANK)
    return None


@overload(r_add, target="generic")
def _ov_add(tag, a, b):
    ring = ring_of(tag)
    if ring is XFloat:
        return lambda tag, a, b: xf_add(a, b)
    if ring is ModP:
        return lambda tag, a, b: mp_add(a, b, tag.p)
    if ring is ModPs:
        return _lanes("add", _modps_lanes(tag))
    if ring is MinReach:
        return lambda tag, a, b: mr_add(a, b)
    return None


@overload(r_mul, target="generic")
def _ov_mul(tag, a, b):
    ring = ring_of(tag)
    if ring is XFloat:
        return lambda tag, a, b: xf_mul(a, b)
    if ring is ModP:
        return lambda tag, a, b: mp_mul(a, b, tag.p)
    if ring is ModPs:
        return _lanes("mul", _modps_lanes(tag))
    if ring is MinReach:
        return lambda tag, a, b: mr_mul(a, b)
    return None


@overload(r_is_zero, target="generic")
def _ov_is_zero(tag, a):
    if ring_of(tag) is ModP:
        return lambda tag, a: a == 0
    if ring_of(tag) is ModPs:
        return _lanes("is_zero", _modps_lanes(tag))
    return lambda tag, a: a[0] == 0


@overload(r_load, target="generic")
def _ov_load(tag, X, i, j):
    if ring_of(tag) is ModP:
        return lambda tag, X, i, j: X[i, j, 0]
    if ring_of(tag) is ModPs:
        return _lanes("load", _modps_lanes(tag))
    return lambda tag, X, i, j: (X[i, j, 0], X[i, j, 1])


@overload(r_store, target="generic")
def _ov_store(tag, X, i, j, v):
    if ring_of(tag) is ModP:

        def store1(tag, X, i, j, v):
            X[i, j, 0] = v

        return store1
    if ring_of(tag) is ModPs:
        return _lanes("store", _modps_lanes(tag))

    def store2(tag, X, i, j, v):
        X[i, j, 0] = v[0]
        X[i, j, 1] = v[1]

    return store2

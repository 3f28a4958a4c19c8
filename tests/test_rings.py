"""The 'modps' ring (bigint mode's residues, one prime per lane) against 'modp' lane by lane, in
compiled code and in the Python bodies the CUDA simulator runs (gpu_hamlet/core/rings.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from gpu_hamlet.core.numeric import primes
from gpu_hamlet.core.rings import (
    MODPS_FROM,
    MODPS_LANES,
    lane_primes,
    make_tag,
    r_add,
    r_is_zero,
    r_load,
    r_mul,
    r_one,
    r_store,
    r_zero,
    residue_passes,
)


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
    chunk=st.integers(0, 3),
    data=st.data(),
)
def test_modps_lanes_equal_modp_per_prime(chunk, data):
    ps = lane_primes(chunk)
    assert ps == primes((chunk + 1) * MODPS_LANES)[chunk * MODPS_LANES :]
    edge = st.sampled_from(["zero", "max", "any"])

    def residue(p: int, kind: str) -> int:
        if kind == "zero":
            return 0
        return p - 1 if kind == "max" else data.draw(st.integers(0, p - 1))

    kinds = data.draw(st.lists(edge, min_size=2 * MODPS_LANES, max_size=2 * MODPS_LANES))
    X = np.zeros((6, 1, MODPS_LANES), np.int64)
    for q, p in enumerate(ps):
        X[0, 0, q] = residue(p, kinds[q])
        X[1, 0, q] = residue(p, kinds[MODPS_LANES + q])
    X[5, 0, data.draw(st.integers(0, MODPS_LANES - 1))] = 1  # zero only if every lane is
    tag = make_tag("modps", chunk)
    got_c, got_py = X.copy(), X.copy()
    zeros_c = compiled(tag, got_c)
    zeros_py = ops(tag, got_py)
    for q, p in enumerate(ps):
        one = X[:, :, q : q + 1].copy()
        ops(make_tag("modp", p), one)
        np.testing.assert_array_equal(got_c[:, :, q], one[:, :, 0], f"lane {q} (compiled)")
        np.testing.assert_array_equal(got_py[:, :, q], one[:, :, 0], f"lane {q} (Python)")
    assert zeros_c == zeros_py == (not X[0].any(), False)


def test_residue_passes_cover_the_primes_in_order():
    assert residue_passes(3, lanes=False) == [("modp", p) for p in primes(3)]
    assert residue_passes(MODPS_FROM - 1, lanes=True) == [
        ("modp", p) for p in primes(MODPS_FROM - 1)
    ]
    passes = residue_passes(MODPS_LANES + 1, lanes=True)
    assert passes == [("modps", 0), ("modps", 1)]
    covered = [p for _, c in passes for p in lane_primes(c)]
    assert covered == list(primes(2 * MODPS_LANES))

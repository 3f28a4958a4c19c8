"""The semirings of gpu_hamlet/core/rings.py as CUDA device functions.

The CPU kernels pick a ring through numba @overload on a tag type; the simulator runs kernels as
plain Python and cannot use overloads, so here each ring is a record of device functions and every
kernel is built by a factory closing over one record (numba compiles closures over device
functions like calls to globals). The scalar arithmetic itself is the CPU's (`scalar_ops`),
compiled for the device, so both backends round alike. Every operation takes the ring parameter
`prm` (the prime of 'modp', unused elsewhere) as a kernel argument, so one compiled kernel serves
every prime.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numba import cuda

from gpu_hamlet.core.rings import NO_RANK, scalar_ops

device = cuda.jit(device=True)


class DeviceRing(NamedTuple):
    """One ring's element operations; elements live in the last axis of [rows, cols, lanes]."""

    zero: Callable
    one: Callable
    add: Callable  # add(a, b, prm)
    mul: Callable  # mul(a, b, prm)
    is_zero: Callable
    load: Callable  # load(X, i, j) -> element X[i, j]
    store: Callable  # store(X, i, j, v)


@functools.cache
def _ops():
    return scalar_ops(device)


@device
def _load2(X, i, j):
    return X[i, j, 0], X[i, j, 1]


@device
def _store2(X, i, j, v):
    X[i, j, 0] = v[0]
    X[i, j, 1] = v[1]


def _ignoring_prm(op):
    """A binary operation in the rings' common signature (a, b, prm), for rings without a
    parameter."""

    @device
    def binary(a, b, prm):
        return op(a, b)

    return binary


def _xfloat() -> DeviceRing:
    ops = _ops()

    @device
    def zero():
        return 0.0, 0.0

    @device
    def one():
        return 1.0, 0.0

    @device
    def is_zero(a):
        return a[0] == 0.0

    return DeviceRing(
        zero, one, _ignoring_prm(ops.xf_add), _ignoring_prm(ops.xf_mul), is_zero, _load2, _store2
    )


def _modp() -> DeviceRing:
    ops = _ops()

    @device
    def zero():
        return np.int64(0)

    @device
    def one():
        return np.int64(1)

    @device
    def is_zero(a):
        return a == 0

    @device
    def load(X, i, j):
        return X[i, j, 0]

    @device
    def store(X, i, j, v):
        X[i, j, 0] = v

    return DeviceRing(zero, one, ops.mp_add, ops.mp_mul, is_zero, load, store)


def _minreach() -> DeviceRing:
    ops = _ops()

    @device
    def zero():
        return np.int64(0), NO_RANK

    @device
    def one():
        return np.int64(1), NO_RANK

    @device
    def is_zero(a):
        return a[0] == 0

    return DeviceRing(
        zero, one, _ignoring_prm(ops.mr_add), _ignoring_prm(ops.mr_mul), is_zero, _load2, _store2
    )


_RINGS = {"xfloat": _xfloat, "modp": _modp, "minreach": _minreach}


@functools.cache
def device_ring(ring: str) -> DeviceRing:
    """The device functions of a ring ('xfloat', 'modp' or 'minreach'), built once."""
    return _RINGS[ring]()

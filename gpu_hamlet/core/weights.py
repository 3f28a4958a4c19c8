"""Event weights, described by the event table's columns and a query's rows rather than built.

The kernels weigh each event per channel (cpu_fallback/kernels.py): 1 for COUNT(E), the value
for SUM, |value| for the exact mode's bounds, the order key for MIN and MAX, in the ring's number
form. A query reads a few columns at its own event rows, so the weights are handed to a backend
as `EventWeights`: per channel, what to take (`Kind`) from which column (`Source`), and per event,
its row and label. The CPU backend builds the array on the host (`host()`); the GPU backend builds
it on the device from the columns it holds there once per call (through cuDF when installed), so
per query only rows and labels travel, not the weights (gpu_hamlet/kernels/weights.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from gpu_hamlet.core.rings import LANES, NO_RANK, is_residue, layout


class Columns(Protocol):
    """The event table's columns in every number form, converted once per call: what a `Source`
    reads (gpu_hamlet/engine/attributes.py `Attributes` is the one implementation; a protocol here
    keeps the imports one-way)."""

    @property
    def table(self) -> pa.Table: ...

    #: Device copies of converted columns, by `Source.key`, kept for the call by the GPU backend.
    device: dict[tuple, Any]

    def floats(self, attr: str) -> np.ndarray: ...

    def residues(self, attr: str, p: int) -> np.ndarray: ...

    def lane_residues(self, attr: str, ring: str, chunk: int) -> np.ndarray: ...

    def validity(self, form: str, attr: str) -> np.ndarray: ...

    def order_keys(self, attr: str) -> tuple[np.ndarray, Callable[[np.ndarray], pa.Array]]: ...

    def keys_are_values(self, attr: str) -> bool: ...


class Kind(IntEnum):
    """What a channel takes from its source, on the events of its label."""

    NONE = 0  # the trend count: no weight
    ONE = 1  # COUNT(E)
    VALUE = 2  # SUM: the value (float, or residue)
    ABS = 3  # |value|
    KEY = 4  # MIN: the order key
    INV_KEY = 5  # MAX: the bit-inverted order key


@dataclass(frozen=True)
class Source:
    """One column of the event table in one number form: 'float' (float64 values), 'residue'
    (values mod `p`), a lane ring's name such as 'modps' ([rows, lanes]: values mod the primes of
    that ring's pass `p`) or 'key' (int64 order keys, NO_RANK for null), over all event rows; with
    `valid`, the column's validity (1, or 0 for null) in that form instead of its values."""

    attrs: Columns
    form: str
    attr: str
    p: int = 0
    valid: bool = False

    @property
    def key(self) -> tuple[str, str, int, bool]:
        return self.form, self.attr, self.p, self.valid

    def host(self) -> np.ndarray:
        """The values over all event rows, converted once per column (Attributes caches)."""
        if self.valid:
            return self.attrs.validity(self.form, self.attr)
        if self.form == "float":
            return self.attrs.floats(self.attr)
        if self.form == "residue":
            return self.attrs.residues(self.attr, self.p)
        if self.form in LANES:
            return self.attrs.lane_residues(self.attr, self.form, self.p)
        return self.attrs.order_keys(self.attr)[0]


@dataclass(frozen=True)
class EventWeights:
    """Weights [channels, events, lanes] in `ring`, as a description: channel c weighs the
    events whose label is `on[c]`, with `kinds[c]` of `sources[c]` at the event's row; every
    other entry is the ring's zero weight (MIN/MAX: no rank; also for a null key, NO_RANK)."""

    ring: str
    kinds: tuple[Kind, ...]
    on: tuple[int, ...]  # the label each channel weighs
    sources: tuple[Source | None, ...]
    rows: np.ndarray  # int64 event rows
    labels: np.ndarray  # int64 label per event

    @property
    def shape(self) -> tuple[int, int, int]:
        return len(self.kinds), self.rows.shape[0], layout(self.ring)[1]

    def host(self) -> np.ndarray:
        """The weights as a host array."""
        dtype, lanes = layout(self.ring)
        W: np.ndarray = np.zeros(self.shape, dtype)
        if self.ring == "minreach":
            W[:, :, 1] = NO_RANK
        for c, kind in enumerate(self.kinds):
            if kind == Kind.NONE:
                continue
            on = self.labels == self.on[c]  # only these rows weigh anything
            # All of them (a shared burst's events): slices rather than gathers and scatters.
            idx = None if on.all() else np.flatnonzero(on)
            at = slice(None) if idx is None else idx
            size = on.shape[0] if idx is None else idx.size
            src = self.sources[c]
            v = src.host()[self.rows[at]] if src is not None else None
            if self.ring == "xfloat":
                if kind == Kind.ONE:
                    v = np.ones(size)
                assert v is not None, "only COUNT(E) (Kind.ONE) has no source"
                W[c, at, 0], W[c, at, 1] = np.frexp(np.abs(v) if kind == Kind.ABS else v)
            elif is_residue(self.ring):  # residues: one lane per prime
                W[c, at, :] = 1 if v is None else v.reshape(size, -1 if size else 1)
            else:
                assert v is not None, "MIN and MAX channels have a source"
                has = v != NO_RANK
                W[c, at, 0] = has
                W[c, at, 1] = np.where(has, ~v if kind == Kind.INV_KEY else v, NO_RANK)
        return W


def as_array(weights: EventWeights | np.ndarray) -> np.ndarray:
    """Weights as a host array, whether given built or described."""
    return weights.host() if isinstance(weights, EventWeights) else weights

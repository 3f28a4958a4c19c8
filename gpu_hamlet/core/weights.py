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

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
from numba import njit

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

    def lanes_at(
        self, attr: str, ring: str, chunk: int, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]: ...

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

    def at(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Values holding those of event rows `rows`, and each row's place among them: over all
        rows (`host`), or a lane ring's later passes for the rows alone (`Attributes.lanes_at`)."""
        if self.form in LANES and not self.valid:
            return self.attrs.lanes_at(self.attr, self.form, self.p, np.asarray(rows, np.int64))
        return self.host(), rows

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
        """The weights as a host array: one compiled pass per weighted channel over the rows
        (`_FILL`). As NumPy steps (a mask of the channel's label, its indices, a gather of the
        source, frexp, two scatters) they took a tenth of bench_engine.py's 50 queries."""
        dtype, lanes = layout(self.ring)
        W: np.ndarray = np.zeros(self.shape, dtype)
        if self.ring == "minreach":
            W[:, :, 1] = NO_RANK
        for c, kind in enumerate(self.kinds):
            if kind == Kind.NONE:
                continue
            src = self.sources[c]
            if src is None:  # COUNT(E): one on the label's rows
                assert kind == Kind.ONE, "only COUNT(E) (Kind.ONE) has no source"
                values: np.ndarray = np.ones((1, 1), dtype)
                at = self.rows
            else:
                v, at = src.at(self.rows)
                values = v if v.ndim == 2 else v[:, None]  # [event rows, 1 or lanes]
            fill = _FILL["residue" if is_residue(self.ring) else self.ring]
            fill(W, c, self.labels, self.on[c], at, values, src is None, int(kind))
        return W


@njit(cache=True, nogil=True)
def _fill_xfloat(W, c, labels, on, rows, values, one, kind):
    """Channel c of W on the rows whose label is `on`: frexp of the value at the row's event
    (of |value| for ABS; `one`: values[0, 0] at every row), as np.frexp gives it."""
    for i in range(labels.shape[0]):
        if labels[i] == on:
            v = values[0 if one else rows[i], 0]
            m, e = math.frexp(abs(v) if kind == 3 else v)  # (3: Kind.ABS)
            W[c, i, 0] = m
            W[c, i, 1] = e


@njit(cache=True, nogil=True)
def _fill_residues(W, c, labels, on, rows, values, one, kind):
    """`_fill_xfloat` for residues: the value per lane (a column of one lane serves all)."""
    wide = values.shape[1] > 1
    for i in range(labels.shape[0]):
        if labels[i] == on:
            r = 0 if one else rows[i]
            for q in range(W.shape[2]):
                W[c, i, q] = values[r, q if wide else 0]


@njit(cache=True, nogil=True)
def _fill_minreach(W, c, labels, on, rows, values, one, kind):
    """`_fill_xfloat` for MIN/MAX: (whether the row has a key, the key, bit-inverted for
    INV_KEY); a null key (NO_RANK) leaves the row's zero weight."""
    for i in range(labels.shape[0]):
        if labels[i] == on:
            k = values[0 if one else rows[i], 0]
            if k != NO_RANK:
                W[c, i, 0] = 1
                W[c, i, 1] = ~k if kind == 5 else k  # (5: Kind.INV_KEY)


_FILL = {"xfloat": _fill_xfloat, "residue": _fill_residues, "minreach": _fill_minreach}


def as_array(weights: EventWeights | np.ndarray) -> np.ndarray:
    """Weights as a host array, whether given built or described."""
    return weights.host() if isinstance(weights, EventWeights) else weights

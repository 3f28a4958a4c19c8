"""Attribute columns in the forms the rings need, converted once per column for all queries.

Shared bursts combine events of several queries, so every query must see the same numbers for the
same event: the conversions are done over all event rows and then indexed by each query's rows.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_hamlet.events import EventFrame
from gpu_hamlet.plan import Channel
from gpu_hamlet.weights import EventWeights, Kind, Source


class Attributes:
    """Per-column caches over the rows of an EventFrame."""

    def __init__(self, ev: EventFrame) -> None:
        self.ev = ev
        self._floats: dict[str, np.ndarray] = {}
        self._residues: dict[tuple[str, int], np.ndarray] = {}
        self._keys: dict[str, tuple[np.ndarray, Callable[[np.ndarray], pa.Array]]] = {}
        # Device copies of the converted columns (Source.key -> device array), kept for the
        # call by the GPU backend (gpu_hamlet/kernels/weights.py).
        self.device: dict[tuple, object] = {}

    def column(self, attr: str) -> pa.Array:
        return self.ev.table.column(attr).combine_chunks()

    def floats(self, attr: str) -> np.ndarray:
        """float64 values (unscaled for decimals)."""
        if attr not in self._floats:
            col = self.column(attr)
            if pa.types.is_decimal(col.type):
                lo, hi = _decimal_limbs(col)
                v = hi.astype(np.float64) * 2.0**64 + lo.astype(np.float64)
            else:
                v = col.to_numpy(zero_copy_only=False).astype(np.float64)
            self._floats[attr] = v
        return self._floats[attr]

    def residues(self, attr: str, p: int) -> np.ndarray:
        """Values modulo p (unscaled for decimals), for exact sums."""
        key = (attr, p)
        if key not in self._residues:
            col = self.column(attr)
            if pa.types.is_decimal(col.type):
                lo, hi = _decimal_limbs(col)
                r = ((hi % p) * (2**64 % p) + (lo % np.uint64(p)).astype(np.int64)) % p
            elif pa.types.is_uint64(col.type):
                r = (col.to_numpy(zero_copy_only=False) % np.uint64(p)).astype(np.int64)
            else:
                r = np.mod(col.to_numpy(zero_copy_only=False).astype(np.int64), p)
            self._residues[key] = r
        return self._residues[key]

    def order_keys(self, attr: str) -> tuple[np.ndarray, Callable[[np.ndarray], pa.Array]]:
        """int64 keys ordered like the column's values, and the way back (see `order_keys`)."""
        if attr not in self._keys:
            self._keys[attr] = order_keys(self.column(attr))
        return self._keys[attr]

    def weights(self, ring: str, channels: tuple[Channel, ...], rows: np.ndarray,
                labels: np.ndarray, label_of: dict[str, int], p: int = 0) -> EventWeights:
        """Per-channel event weights [channels, rows, lanes] in `ring`, described for a backend
        to build (gpu_hamlet/weights.py): zero except on the events of the channel's type
        (`labels` of the rows equal to `label_of[type]`).

        COUNT(E): 1 on E events; SUM: the value; abs: |value|; MIN/MAX: the (bit-inverted for MAX)
        order key. Channel 0 (the trend count) has no weight."""
        form = {"xfloat": "float", "modp": "residue"}.get(ring, "key")
        kinds, on, sources = [], [], []
        for ch in channels:
            kinds.append(_KINDS[ch.kind])
            on.append(label_of[ch.type] if ch.kind != "count" else -1)
            sources.append(Source(self, form, ch.attr, p if form == "residue" else 0)
                           if ch.attr is not None and ch.kind != "count_e" else None)
        return EventWeights(ring, tuple(kinds), tuple(on), tuple(sources),
                            np.asarray(rows, np.int64), np.asarray(labels, np.int64))


_KINDS = {"count": Kind.NONE, "count_e": Kind.ONE, "sum": Kind.VALUE, "abs": Kind.ABS,
          "min": Kind.KEY, "max": Kind.INV_KEY}


def order_keys(col: pa.Array) -> tuple[np.ndarray, Callable[[np.ndarray], pa.Array]]:
    """int64 keys ordered like the values, and the way back from keys to values.

    Integers and timestamps are their own keys and floats their order-preserving bit patterns
    (no sort needed); other types (strings, decimals) use dense ranks."""
    t = col.type
    if (pa.types.is_integer(t) and not pa.types.is_uint64(t)) or pa.types.is_timestamp(t) \
            or pa.types.is_boolean(t):
        keys = col.cast(pa.int64()).to_numpy(zero_copy_only=False)

        def back(k: np.ndarray) -> pa.Array:
            return pa.array(k, pa.int64()).cast(t)
    elif pa.types.is_floating(t):
        keys = _float_keys(col.to_numpy(zero_copy_only=False).astype(np.float64))

        def back(k: np.ndarray) -> pa.Array:
            return pa.array(_float_keys(k).view(np.float64)).cast(t)
    else:
        uniq = pc.unique(col.drop_null())
        uniq = uniq.take(pc.array_sort_indices(uniq))
        keys = pc.index_in(col, value_set=uniq).fill_null(0).to_numpy(
            zero_copy_only=False).astype(np.int64)

        def back(k: np.ndarray) -> pa.Array:
            return uniq.take(pa.array(k))
    return keys, back


def _float_keys(x: np.ndarray) -> np.ndarray:
    """Order-preserving int64 keys of float64 values (an involution on the bit patterns)."""
    i = np.ascontiguousarray(x).view(np.int64)
    return i ^ ((i >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))


def _decimal_limbs(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Unscaled decimal128 values as (low uint64, high int64) limbs."""
    if arr.type.bit_width != 128:
        arr = arr.cast(pa.decimal128(38, arr.type.scale))
    raw = np.frombuffer(arr.buffers()[1], dtype=np.uint64)
    raw = raw[2 * arr.offset: 2 * (arr.offset + len(arr))]
    return raw[0::2].copy(), raw[1::2].view(np.int64).copy()

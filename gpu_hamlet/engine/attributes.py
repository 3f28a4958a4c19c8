"""Attribute columns in the forms the rings need, converted once per column for all queries.

Shared bursts combine events of several queries, so every query must see the same numbers for the
same event: the conversions are done over all event rows and then indexed by each query's rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from gpu_hamlet.core.numeric import DECIMAL38_LIMIT
from gpu_hamlet.core.rings import LANES, NO_RANK, lane_mul, lane_primes
from gpu_hamlet.core.weights import EventWeights, Kind, Source
from gpu_hamlet.engine.events import EventFrame
from gpu_hamlet.query.plan import Channel
from gpu_hamlet.query.schema import decoded, unscaled, widened

#: The residue lanes per event a column keeps for a call (`Attributes.lane_residues`): 256 bytes
#: an event, exact mode's passes and bigint's first.
KEPT_LANES = 32


class Attributes:
    """Per-column caches over the rows of an EventFrame."""

    def __init__(self, ev: EventFrame) -> None:
        self.ev = ev
        self._floats: dict[str, np.ndarray] = {}
        self._residues: dict[tuple[str, int], np.ndarray] = {}
        self._lanes: dict[tuple[str, str, int], np.ndarray] = {}  # (attr, lane ring, pass)
        self._ints: dict[str, np.ndarray | list[np.ndarray]] = {}
        self._keys: dict[str, tuple[np.ndarray, Callable[[np.ndarray], pa.Array]]] = {}
        self._valid: dict[str, np.ndarray | None] = {}
        self._validity: dict[tuple[str, str], np.ndarray] = {}
        self._unaddable: dict[str, pa.Array | None] = {}
        # Device copies of the converted columns (Source.key -> device array), kept for the
        # call by the GPU backend (gpu_hamlet/kernels/weights.py).
        self.device: dict[tuple, object] = {}

    @property
    def table(self) -> pa.Table:
        """The event table the columns come from."""
        return self.ev.table

    def column(self, attr: str) -> pa.Array:
        return self.ev.table.column(attr).combine_chunks()

    def valid(self, attr: str) -> np.ndarray | None:
        """Where the column holds a value (None when it has no nulls): SUM, AVG, MIN and MAX
        skip nulls, COUNT(*) and COUNT(E) count their events (README: Nulls and absent types)."""
        if attr not in self._valid:
            col = self.column(attr)
            self._valid[attr] = (
                None if not col.null_count else col.is_valid().to_numpy(zero_copy_only=False)
            )
        return self._valid[attr]

    def unaddable(self, attr: str) -> pa.Array | None:
        """Where a float column is NaN or infinite, or a decimal256 column holds more than 38
        digits (None when nowhere): values SUM and AVG cannot add (outside bigint mode, for the
        digits). Found once per column for all queries."""
        if attr not in self._unaddable:
            col = self.column(attr)
            t = col.type
            bad = None
            if pa.types.is_floating(t):
                bad = pc.invert(pc.is_finite(col)).fill_null(False)
            elif pa.types.is_decimal(t) and t.precision > 38:  # (compared as its integers)
                ints = unscaled(col)
                limit = pa.scalar(DECIMAL38_LIMIT, ints.type)
                bad = pc.greater_equal(pc.abs(ints), limit).fill_null(False)
            self._unaddable[attr] = bad if bad is not None and pc.any(bad).as_py() else None
        return self._unaddable[attr]

    def floats(self, attr: str) -> np.ndarray:
        """float64 values (unscaled for decimals), 0 for nulls."""
        if attr not in self._floats:
            col = self.column(attr)
            if pa.types.is_decimal(col.type):
                v = _limbs_to_float(_decimal_limbs(col))
            else:
                v = _filled(col).to_numpy(zero_copy_only=False).astype(np.float64)
            self._floats[attr] = v
        return self._floats[attr]

    def residues(self, attr: str, p: int) -> np.ndarray:
        """Values modulo p (unscaled for decimals), 0 for nulls, for exact sums."""
        key = (attr, p)
        if key not in self._residues:
            self._residues[key] = _values_mod(self._integers(attr), p)
        return self._residues[key]

    def lane_residues(self, attr: str, ring: str, chunk: int) -> np.ndarray:
        """[events, lanes] values modulo the primes of pass `chunk` of lane ring `ring`, 0 for
        nulls. Kept for the call up to KEPT_LANES lanes a column (every query and channel of
        the pass reads them: exact mode's one to three passes, bigint's first); later passes
        are made when asked. Kept per pass, a call of many passes held events x primes of them
        (3 GB for the SUM over a burst of 10^5 events in bigint mode, a helper's hunt)."""
        if not _kept(ring, chunk):
            return self._lanes_of(self._integers(attr), ring, chunk)
        key = (attr, ring, chunk)
        if key not in self._lanes:
            self._lanes[key] = self._lanes_of(self._integers(attr), ring, chunk)
        return self._lanes[key]

    def lanes_at(
        self, attr: str, ring: str, chunk: int, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """`lane_residues` for event rows `rows`, and each row's place among them: the kept
        lanes and the rows themselves, or beyond KEPT_LANES the rows' own lanes alone (what a
        query's kernel pass costs over them)."""
        if _kept(ring, chunk):
            return self.lane_residues(attr, ring, chunk), rows
        values = self._integers(attr)
        values = [v[rows] for v in values] if isinstance(values, list) else values[rows]
        return self._lanes_of(values, ring, chunk), np.arange(rows.shape[0], dtype=np.int64)

    @staticmethod
    def _lanes_of(values: np.ndarray | list[np.ndarray], ring: str, chunk: int) -> np.ndarray:
        return np.stack([_values_mod(values, p) for p in lane_primes(ring, chunk)], 1)

    def _integers(self, attr: str) -> np.ndarray | list[np.ndarray]:
        """The column's unscaled integers, 0 for nulls: int64 or uint64 values, or a decimal's
        64-bit limbs (`_decimal_limbs`), which residues modulo any prime are taken from."""
        if attr not in self._ints:
            col = self.column(attr)
            if pa.types.is_decimal(col.type):
                self._ints[attr] = _decimal_limbs(col)
            else:
                v = _filled(col).to_numpy(zero_copy_only=False)
                self._ints[attr] = v if v.dtype == np.uint64 else v.astype(np.int64)
        return self._ints[attr]

    def validity(self, form: str, attr: str) -> np.ndarray:
        """1 where the column holds a value, 0 for nulls, in a ring's form ('float' or 'residue'):
        the weight of the channel counting non-null occurrences (AVG's divisor). Made once per
        call: every query with that divisor reads it."""
        if (form, attr) not in self._validity:
            valid = self.valid(attr)
            ones = np.ones(self.ev.n, bool) if valid is None else valid
            self._validity[form, attr] = ones.astype(np.float64 if form == "float" else np.int64)
        return self._validity[form, attr]

    def order_keys(self, attr: str) -> tuple[np.ndarray, Callable[[np.ndarray], pa.Array]]:
        """int64 keys ordered like the column's values, and the way back (see `order_keys`)."""
        if attr not in self._keys:
            self._keys[attr] = order_keys(self.column(attr))
        return self._keys[attr]

    def keys_are_values(self, attr: str) -> bool:
        """Whether the order keys are the column's own int64 values (so a backend may read the
        column itself)."""
        return _identity_keys(self.column(attr))

    def weights(
        self,
        ring: str,
        channels: tuple[Channel, ...],
        rows: np.ndarray,
        labels: np.ndarray,
        label_of: dict[str, int],
        p: int = 0,
    ) -> EventWeights:
        """Per-channel event weights [channels, rows, lanes] in `ring`, described for a backend
        to build (gpu_hamlet/core/weights.py): zero except on the events of the channel's type
        (`labels` of the rows equal to `label_of[type]`).

        COUNT(E): 1 on E events; SUM: the value (0 for null); abs: |value|; count_valid: 1 where
        the value is not null; MIN/MAX: the (bit-inverted for MAX) order key, no weight for null.
        Channel 0 (the trend count) has no weight."""
        form = {"xfloat": "float", "modp": "residue"}.get(ring, ring if ring in LANES else "key")
        kinds, on, sources = [], [], []
        for ch in channels:
            kinds.append(_KINDS[ch.kind])
            if ch.kind == "count":
                on.append(-1)
            else:
                assert ch.type is not None, "only the trend count has no event type"
                on.append(label_of[ch.type])
            sources.append(
                Source(
                    self,
                    form,
                    ch.attr,
                    p if form == "residue" or form in LANES else 0,
                    valid=ch.kind == "count_valid",
                )
                if ch.attr is not None and ch.kind != "count_e"
                else None
            )
        return EventWeights(
            ring,
            tuple(kinds),
            tuple(on),
            tuple(sources),
            np.asarray(rows, np.int64),
            np.asarray(labels, np.int64),
        )


_KINDS = {
    "count": Kind.NONE,
    "count_e": Kind.ONE,
    "sum": Kind.VALUE,
    "abs": Kind.ABS,
    "count_valid": Kind.VALUE,
    "min": Kind.KEY,
    "max": Kind.INV_KEY,
}


def order_keys(col: pa.Array) -> tuple[np.ndarray, Callable[[np.ndarray], pa.Array]]:
    """int64 keys ordered like the values, NO_RANK for nulls, and the way back from keys to values.

    Integers and timestamps are their own keys and floats their order-preserving bit patterns (no
    sort needed; every NaN is one NaN, above all numbers, as in Spark); other types (strings,
    decimals), and integer columns with nulls or a value equal to NO_RANK, use dense ranks. So
    NO_RANK never stands for a value: the MINREACH ring reads it as 'no value'."""
    t = col.type
    if pa.types.is_dictionary(t):  # ranked by value; results keep the dictionary type
        keys, back_values = order_keys(decoded(col))

        def back_dictionary(k: np.ndarray) -> pa.Array:
            # (Arrow casts only strings to a dictionary: the values are encoded instead)
            enc = pc.dictionary_encode(back_values(k).cast(t.value_type))
            return pa.DictionaryArray.from_arrays(enc.indices.cast(t.index_type), enc.dictionary)

        return keys, back_dictionary
    if widened(t) != t:  # ranked as decimal128 (Arrow ranks no narrower decimal)
        keys, back_wide = order_keys(col.cast(widened(t)))

        def back_narrow(k: np.ndarray) -> pa.Array:
            return back_wide(k).cast(t)

        return keys, back_narrow
    if _identity_keys(col):
        keys = col.cast(pa.int64()).to_numpy(zero_copy_only=False)

        def back_identity(k: np.ndarray) -> pa.Array:
            return pa.array(k, pa.int64()).cast(t)

        return keys, back_identity
    if pa.types.is_floating(t):
        v = _filled(col).to_numpy(zero_copy_only=False).astype(np.float64)
        keys = _float_keys(np.where(np.isnan(v), np.nan, v))
        if col.null_count:
            keys[~col.is_valid().to_numpy(zero_copy_only=False)] = NO_RANK

        def back_float(k: np.ndarray) -> pa.Array:
            return pa.array(_float_keys(k).view(np.float64)).cast(t)

        return keys, back_float
    uniq = pc.unique(col.drop_null())
    uniq = uniq.take(pc.array_sort_indices(uniq))
    keys = (
        pc.index_in(col, value_set=uniq)
        .cast(pa.int64())
        .fill_null(NO_RANK)
        .to_numpy(zero_copy_only=False)
    )

    def back(k: np.ndarray) -> pa.Array:
        return uniq.take(pa.array(k))

    return keys, back


def _identity_keys(col: pa.Array) -> bool:
    """Integer, timestamp and boolean columns without nulls or a NO_RANK value."""
    t = col.type
    if not (
        (pa.types.is_integer(t) and not pa.types.is_uint64(t))
        or pa.types.is_timestamp(t)
        or pa.types.is_boolean(t)
    ):
        return False
    if col.null_count:
        return False
    return not (t.bit_width == 64 and len(col) and pc.max(col.cast(pa.int64())).as_py() == NO_RANK)


def _filled(col: pa.Array) -> pa.Array:
    """The column with nulls as zero (their weight: nothing to add)."""
    if not col.null_count:
        return col
    zero = pa.scalar(False) if pa.types.is_boolean(col.type) else pa.scalar(0, col.type)
    return col.fill_null(zero)


def _float_keys(x: np.ndarray) -> np.ndarray:
    """Order-preserving int64 keys of float64 values (an involution on the bit patterns)."""
    i = np.ascontiguousarray(x).view(np.int64)
    return i ^ ((i >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))


def _decimal_limbs(arr: pa.Array) -> list[np.ndarray]:
    """Unscaled decimal values as 64-bit limbs, least significant first: uint64 limbs and a
    signed int64 top limb (two's complement, 2 limbs for decimal128, 4 for decimal256); nulls
    are zero (in the limbs: Arrow fills a negative scale's nulls at another scale)."""
    arr = arr.cast(widened(arr.type))  # (decimal32 and decimal64: 64-bit limbs)
    n = arr.type.bit_width // 64
    raw = np.frombuffer(arr.buffers()[1], dtype=np.uint64)
    raw = raw[n * arr.offset : n * (arr.offset + len(arr))]
    limbs = [raw[i::n].copy() for i in range(n)]
    if arr.null_count:
        null = arr.is_null().to_numpy(zero_copy_only=False)
        for limb in limbs:
            limb[null] = 0
    limbs[-1] = limbs[-1].view(np.int64)
    return limbs


def _kept(ring: str, chunk: int) -> bool:
    """Whether a column keeps pass `chunk` of lane ring `ring` for the call (KEPT_LANES)."""
    return (chunk + 1) * LANES[ring] <= KEPT_LANES


def _values_mod(values: np.ndarray | list[np.ndarray], p: int) -> np.ndarray:
    """`Attributes._integers`' values modulo p, in [0, p), as int64."""
    if isinstance(values, list):
        return _limbs_mod(values, p)
    if values.dtype == np.uint64:
        return (values % np.uint64(p)).astype(np.int64)
    return np.mod(values, p)


def _limbs_mod(limbs: list[np.ndarray], p: int) -> np.ndarray:
    """The limbs' value modulo p (in [0, p)), exactly: each step's product by 2^64 modulo p is
    `lane_mul`'s (a prime below 2^50 would overflow a plain product)."""
    r = np.mod(limbs[-1], p)
    base = 2**64 % p
    for limb in reversed(limbs[:-1]):
        r = (_times_mod(r, base, p) + (limb % np.uint64(p)).astype(np.int64)) % p
    return r


@njit(cache=True, nogil=True)
def _times_mod(r: np.ndarray, base: int, p: int) -> np.ndarray:
    """r * base modulo p, entry by entry (all below p)."""
    out = np.empty_like(r)
    for i in range(r.shape[0]):
        out[i] = lane_mul(r[i], base, p)
    return out


def _limbs_to_float(limbs: list[np.ndarray]) -> np.ndarray:
    """The limbs' value as float64, to rounding: negative values are negated in two's complement
    first, so no limb's rounding cancels against another's (2^64 - 5 would round to 2^64)."""
    neg = limbs[-1] < 0
    mag = [limb.view(np.uint64).copy() for limb in limbs]
    carry = neg.astype(np.uint64)  # two's complement: invert, add one, on the negative rows
    for i, limb in enumerate(mag):
        inv = np.where(neg, ~limb, limb)
        mag[i] = inv + carry
        carry = carry & (mag[i] == 0) & neg
    v = np.zeros(neg.shape[0])
    for limb in reversed(mag):
        v = v * 2.0**64 + limb.astype(np.float64)
    return np.where(neg, -v, v)

"""Event weights built on the device from the event table's columns there
(gpu_hamlet/core/weights.py).

A query's weights read a few columns at its own rows; the columns go to the device once per
`aggregate` call (`device_column`: the cuDF column itself when cuDF is installed and the column
is already in the ring's form, else one copy of the converted values), and each launch
(`device_weights`) only uploads the events' rows and labels. The weights of several calls side
by side (the queries of one segment-map launch) are built by one launch per distinct column, plus
one for the entries that read no column, so the number of launches does not grow with the
number of queries. Entries are the same as `EventWeights.host()` bit for bit (frexp is exact).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pyarrow as pa
from numba import cuda, types
from numba.extending import overload

from gpu_hamlet.core.rings import LANES, NO_RANK, is_residue, layout
from gpu_hamlet.core.weights import EventWeights, Kind, Source
from gpu_hamlet.kernels.device_data import arrow_to_device, cudf_available
from gpu_hamlet.kernels.launch import grid, to_device

_NONE, _ABS, _INV_KEY = int(Kind.NONE), int(Kind.ABS), int(Kind.INV_KEY)
_NO_RANK = int(NO_RANK)


def lane(v, q):
    """Lane q of a residue weight: a lane ring's column holds a row of lanes per event."""
    return v[q] if len(getattr(v, "shape", ())) else v  # (the simulator wraps arrays)


@overload(lane, target="generic")
def _ov_lane(v, q):
    if isinstance(v, types.Array):
        return lambda v, q: v[q]
    return lambda v, q: v


def device_column(src: Source):
    """The source's values over all event rows on the device, cached on its Attributes for the
    rest of the call. Read in place from cuDF when the column already has the form (float64
    values, or int64 and timestamp order keys) and no nulls; otherwise converted on the host
    and copied once. A lane ring's passes past those the host keeps (`Attributes.lanes_at`)
    are not asked for here: `device_weights` uploads the launch's rows' lanes alone, or a
    bigint call of many passes would hold events x primes of them on the device."""
    cache = src.attrs.device
    if src.key not in cache:
        col = src.attrs.table.column(src.attr)
        direct = (
            col.null_count == 0
            and not src.valid
            and (
                (src.form == "float" and pa.types.is_float64(col.type))
                or (
                    src.form == "key"
                    and (pa.types.is_int64(col.type) or pa.types.is_timestamp(col.type))
                    and src.attrs.keys_are_values(src.attr)
                )
            )
        )
        if direct and cudf_available():
            cache[src.key] = arrow_to_device(src.attrs.table, [src.attr])[src.attr]
        else:
            cache[src.key] = to_device(src.host())
    return cache[src.key]


def device_weights(parts: list[tuple[EventWeights, int, int]]):
    """Weights [channels, events, lanes] on the device of events a..b-1 of each described call
    (same ring and channel count), side by side in the order given."""
    w0 = parts[0][0]
    ring, nch = w0.ring, w0.shape[0]
    dtype, lanes = layout(ring)
    n_of = [b - a for _, a, b in parts]
    n = int(sum(n_of))
    W = cuda.device_array((nch, n, lanes), dtype)
    if n == 0 or nch == 0:
        return W
    sources: dict[tuple, tuple[int, Source]] = {}  # distinct columns, numbered
    kind = np.zeros((len(parts), nch), np.int64)
    on = np.zeros((len(parts), nch), np.int64)
    src = np.full((len(parts), nch), -1, np.int64)
    for j, (w, _, _) in enumerate(parts):
        kind[j], on[j] = w.kinds, w.on
        for c, s in enumerate(w.sources):
            if s is not None:
                src[j, c] = sources.setdefault(s.key, (len(sources), s))[0]
    args = (
        to_device(np.cumsum([0] + n_of).astype(np.int64)),
        to_device(np.concatenate([w.rows[a:b] for w, a, b in parts])),
        to_device(np.concatenate([w.labels[a:b] for w, a, b in parts])),
        to_device(kind),
        to_device(on),
        to_device(src),
        W,
    )
    kernel = weights_kernel(ring)
    blocks = grid(n * nch)
    kernel[blocks](cuda.device_array(1, np.float64 if ring == "xfloat" else np.int64), -1, *args)
    rows = None  # the launch's event rows on the host, for the sources that read only them
    for num, source in sources.values():
        if source.form in LANES and not source.valid:
            rows = np.concatenate([w.rows[a:b] for w, a, b in parts]) if rows is None else rows
            values, at = source.at(rows)
            if at is not rows:  # a later pass: the rows' own lanes, for this launch only
                kernel[blocks](to_device(values), num, args[0], to_device(at), *args[2:])
                continue
        kernel[blocks](device_column(source), num, *args)
    return W


@functools.cache
def weights_kernel(ring: str):
    """kernel[grid](column, s, offsets, rows, labels, kind, on, src, W): one thread per (event,
    channel). With s = -1 it writes every entry that reads no column (COUNT(E)'s one, and the
    zero weight of unweighted entries); with s >= 0, the entries whose channel reads column s."""

    if ring == "xfloat":

        @cuda.jit(device=True)
        def put(W, c, i, kind, v):
            if kind == _NONE:
                W[c, i, 0] = 0.0
                W[c, i, 1] = 0.0
            else:
                m, e = math.frexp(abs(v) if kind == _ABS else v)
                W[c, i, 0] = m
                W[c, i, 1] = e

        one = 1.0
    elif is_residue(ring):  # one lane per prime: a column of residues has a lane axis

        @cuda.jit(device=True)
        def put(W, c, i, kind, v):
            for q in range(W.shape[2]):
                W[c, i, q] = 0 if kind == _NONE else lane(v, q)

        one = 1
    else:

        @cuda.jit(device=True)
        def put(W, c, i, kind, v):
            if kind == _NONE or v == _NO_RANK:  # no weight, or a null value
                W[c, i, 0] = 0
                W[c, i, 1] = _NO_RANK
            else:
                W[c, i, 0] = 1
                W[c, i, 1] = ~v if kind == _INV_KEY else v

        one = 0

    @cuda.jit
    def kernel(column, s, offsets, rows, labels, kind, on, src, W):
        t = cuda.grid(1)
        nch = W.shape[0]
        if t >= W.shape[1] * nch:
            return
        i, c = t // nch, t % nch
        lo, hi = 0, offsets.shape[0] - 1  # the call of event i: offsets[lo] <= i < offsets[lo+1]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if offsets[mid] <= i:
                lo = mid
            else:
                hi = mid
        k = kind[lo, c]
        weighs = k != _NONE and labels[i] == on[lo, c]
        if s < 0:
            if not weighs:
                put(W, c, i, _NONE, one)
            elif src[lo, c] < 0:
                put(W, c, i, k, one)
        elif weighs and src[lo, c] == s:
            put(W, c, i, k, column[rows[i]])

    return kernel

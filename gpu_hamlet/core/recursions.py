"""The engine's recursions, written once over a ring (gpu_hamlet/core/rings.py) for both backends.

Every function here is plain Python registered with numba for every target (`jitable`): the CPU
backend's `numba.njit` kernels (cpu_fallback/kernels.py) and the GPU backend's `numba.cuda.jit`
kernels (gpu_hamlet/kernels/) call the same source, so both compute the same operations in the
same order and give identical bits; numba's CUDA simulator runs them as Python. The backends only
differ in how they lay work out: the CPU walks runs, windows and bursts one after another, the
GPU gives each its own thread.

State layout (docs/architecture.md section 2). A query with k pattern states and `nch` channels
keeps, per channel, one running sum per state plus the final accumulator, and a constant:
component `ch * (k + 1) + p` is state p of channel ch, `ch * (k + 1) + k` its final value, and
the last component (`D - 1`) the constant 1. Channel 0 counts trends; channel ch > 0 carries a
weighted count (COUNT(E): weight 1 on E events; SUM(E.a): weight a; MIN/MAX: the rank of a).

The automaton is a list of states with predecessor lists (CSR `pred_ptr`, `pred_idx`), start
and end flags. An event row entering state p with weights w does, from the state before its
timestamp:
    c   = [p is a start] * const + sum of channel-0 sums of the predecessors of p
    t   = sum of channel-ch sums of the predecessors + w[ch] * c           (ch > 0)
    then state p of each channel grows by c (or t), and so does the final value if p is an end.
Rows with equal timestamps all read the state from before that timestamp (`run_segments` adds
their deltas together). An event that may enter several states (a type repeated in a pattern, an
OR, nested Kleene) is one row per state at the same timestamp: the same rule then keeps it from
being its own predecessor. A negated event is a clearing row (`CLEAR`) of the state whose
partial trends it ends. Clearing is linear too, so segment maps still compose.

A *segment* (a pane, or a whole tumbling window) is processed from the zero state (its own result,
when a window is a single segment) or, with `full`, into its whole affine map (D x D, so segments
compose into windows).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit
from numba.extending import overload

from gpu_hamlet.core.panes import first_window
from gpu_hamlet.core.rings import (
    XF_FAR,
    XF_NEAR,
    XFloat,
    f_add,
    f_mul,
    jitable,
    r_add,
    r_is_zero,
    r_load,
    r_mul,
    r_one,
    r_store,
    r_zero,
    ring_of,
    xf_fix,
    xf_scale,
)

#: `mseg` of an ordinary row (an event entering a state); a macro row names its burst (>= 0).
EVENT = -1
#: `mseg` of a move row (an event of a negated type, `pos` its label): at its timestamp, every
#: channel's sum of each state `move_from[m]` is added to `move_to[m]` (nothing when -1) and set
#: to zero, before the other rows of that timestamp add theirs, which read the state from before
#: it like every row.
MOVE = -2
#: `mseg` of a block macro row, at or below it: a run of a shared sub-pattern's events
#: (gpu_hamlet/engine/stage_sharing.py) whose map starts at row `BLOCK - mseg` of `BM`
#: (`run_segments`); `pos` is the sub-pattern's entry state.
BLOCK = -3


class Blocks(NamedTuple):
    """The block macro rows' data of one query's rows (`run_segments`): their maps
    BM [rows, 1, lanes]; per state, the block it enters (CSR `blk_ptr` [k + 1], `blk_idx`;
    empty for a state that enters none); and in XFloat, BM's entries scaled per map row
    (`xf_scaled_rows`: BS [rows, 2]; [0, 2] in other rings)."""

    bm: np.ndarray
    blk_ptr: np.ndarray
    blk_idx: np.ndarray
    bs: np.ndarray

    @classmethod
    def none(cls, k: int, dtype, lanes: int) -> Blocks:
        return cls(
            np.zeros((0, 1, lanes), dtype),
            np.zeros(k + 1, np.int64),
            np.zeros(1, np.int64),
            np.zeros((0, 2), np.float64),
        )


#: Timestamp groups per piece of a burst. A burst's coefficients are a product of one linear map
#: per timestamp group (`piece_map`); a burst is cut into pieces of this many groups whose maps are
#: computed apart and folded in order (`fold_pieces`), so a long burst is not one GPU thread's
#: sequential work. The CPU cuts and folds the same pieces, so the two agree bit for bit.
PIECE_GROUPS = 64


# --- segments: per-event recursion --------------------------------------------------------------


@jitable
def apply_event(
    tag, X, Dst, i, p, W, MU, K, mseg, pred_ptr, pred_idx, is_start, is_end, nch, k, ncols, snap
):
    """Row i (entering state p) read from X, added into Dst.

    Dst may be X itself for a lone row: every channel reads its own predecessors before writing,
    and channel 0, which the others read through c, is written last. A macro event (a shared
    burst, gpu_hamlet/engine/sharing.py; mseg[i] >= 0 names its coefficients) adds MU*c and
    MU*z + K*c instead of c and z + W*c; its c, the burst's snapshot, is recorded in `snap`
    unless that has no rows (nobody reads it: a bigint pass would write 32 lanes a row)."""
    stride = k + 1
    cst = X.shape[0] - 1
    m = mseg[i]
    is_macro = m >= 0
    for col in range(ncols):
        if is_start[p]:
            c = r_load(tag, X, cst, col)
        else:
            c = r_zero(tag)
        for qi in range(pred_ptr[p], pred_ptr[p + 1]):
            c = r_add(tag, c, r_load(tag, X, pred_idx[qi], col))
        if is_macro and col == 0 and snap.shape[0] > 0:
            r_store(tag, snap, i, 0, c)
        cz = r_is_zero(tag, c)
        for ch in range(1, nch):
            base = ch * stride
            t = r_zero(tag)
            for qi in range(pred_ptr[p], pred_ptr[p + 1]):
                t = r_add(tag, t, r_load(tag, X, base + pred_idx[qi], col))
            if is_macro:
                t = r_mul(tag, r_load(tag, MU, m, 0), t)
                if not cz:
                    t = r_add(tag, t, r_mul(tag, r_load(tag, K, m, ch), c))
            elif not cz:
                t = r_add(tag, t, r_mul(tag, r_load(tag, W, ch, i), c))
            if not r_is_zero(tag, t):
                r_store(tag, Dst, base + p, col, r_add(tag, r_load(tag, Dst, base + p, col), t))
                if is_end[p]:
                    r_store(tag, Dst, base + k, col, r_add(tag, r_load(tag, Dst, base + k, col), t))
        if not cz:
            if is_macro:
                c = r_mul(tag, r_load(tag, MU, m, 0), c)
            r_store(tag, Dst, p, col, r_add(tag, r_load(tag, Dst, p, col), c))
            if is_end[p]:
                r_store(tag, Dst, k, col, r_add(tag, r_load(tag, Dst, k, col), c))


@jitable
def move_states(tag, X, label, move_ptr, move_from, move_to, k, nch):
    """The moves of a negated event of `label`, in every channel and column of X. No state is
    both a source and a target of one label's moves, so their order does not matter."""
    for m in range(move_ptr[label], move_ptr[label + 1]):
        a = move_from[m]
        b = move_to[m]
        for ch in range(nch):
            for col in range(X.shape[1]):
                v = r_load(tag, X, ch * (k + 1) + a, col)
                r_store(tag, X, ch * (k + 1) + a, col, r_zero(tag))
                if b >= 0 and not r_is_zero(tag, v):
                    at = ch * (k + 1) + b
                    r_store(tag, X, at, col, r_add(tag, r_load(tag, X, at, col), v))


@jitable
def clear(tag, X, rows, cols):
    for a in range(rows):
        for b in range(cols):
            r_store(tag, X, a, b, r_zero(tag))


@jitable
def reset(tag, X, carry):
    """The start of a run. Column 0 starts from the zero state (constant 1); column 1 + j from the
    unit input at channel-0 state carry[j] (the states some row reads as a predecessor)."""
    D = X.shape[0]
    clear(tag, X, D, X.shape[1])
    r_store(tag, X, D - 1, 0, r_one(tag))
    for j in range(X.shape[1] - 1):
        r_store(tag, X, carry[j], j + 1, r_one(tag))


@jitable
def run_segments(
    tag, X, Dl, Xs, bounds, r0, r1, t, pos, W, MU, K, mseg, pred_ptr, pred_idx, is_start, is_end,
    move_ptr, move_from, move_to, k, full, carry, snap, BM, blk_ptr, blk_idx, BS, maps,
):  # fmt: skip
    """Runs r0..r1-1 (rows bounds[r] to bounds[r + 1] - 1 of run r, sorted by time), each from
    the zero state (`reset`) to its output maps[r] (`finish_run`); `Dl` and `Xs` are scratch of
    X's shape, for the deltas of an equal-timestamp group and a block row's inputs in XFloat.

    A block macro row (`BLOCK`) is a run of a shared sub-pattern's events, entered at state s,
    as one map, alone at its timestamp (the engine cuts a shared run where another row of the
    query shares one). The block is the states blk_idx[blk_ptr[s]:blk_ptr[s + 1]] (s first, the
    only one entered from outside it). The run's map was computed once for every query sharing
    it, over the sub-template SEQ(IN, block) (docs/architecture.md section 10): per channel ch
    its state ch * (L + 2) + p is IN's input (p = 0: the sum of s's predecessors outside the
    block, plus the constant at a start), block state p (1..L) or the block's final value
    (L + 1), and D' = nch * (L + 2) + 1 components in all, row-major at BM[off:off + D' * D']
    with off = BLOCK - mseg. The block's states take their new values; the final grows by the
    block's if its last state is an end.

    The CPU walks all its runs in one call and the GPU one run per thread: a call that passes
    this many arrays costs about 200 ns on the CPU (numba counts a reference to each on entry
    and exit), more than a window of a few rows (docs/architecture.md section 3). For the same
    reason a block row's steps are written here rather than in a function called per row (a
    fifth of a block row's cost at L = 10). A CPU call without block rows passes BM = None, and
    numba compiles that kernel without their code: with it, bigint's rows took up to a quarter
    longer."""
    nch = W.shape[0]
    D = X.shape[0]
    ncols = X.shape[1]
    for r in range(r0, r1):
        reset(tag, X, carry)
        i = bounds[r]
        end = bounds[r + 1]
        while i < end:
            j = i + 1
            while j < end and t[j] == t[i]:
                j += 1
            if j == i + 1 and mseg[i] == MOVE:
                move_states(tag, X, pos[i], move_ptr, move_from, move_to, k, nch)
            elif BM is not None and j == i + 1 and mseg[i] <= BLOCK:  # a block macro row
                off = BLOCK - mseg[i]
                s = pos[i]
                b0 = blk_ptr[s]
                L = blk_ptr[s + 1] - b0
                last = blk_idx[b0 + L - 1]
                fin = is_end[last]  # the block's final is an output only where it is read
                for col in range(ncols):
                    if not scaled_block_terms(
                        tag, X, Dl, Xs, off, s, BS, b0, L, fin, blk_idx, pred_ptr, pred_idx,
                        is_start, nch, k, col,
                    ):  # fmt: skip
                        block_terms(
                            tag, X, Dl, off, s, BM, b0, L, fin, blk_idx, pred_ptr, pred_idx,
                            is_start, nch, k, col,
                        )  # fmt: skip
                    for ch in range(nch):  # the block's states take their new values
                        for p in range(1, L + 1):
                            at = ch * (k + 1) + blk_idx[b0 + p - 1]
                            r_store(tag, X, at, col, r_load(tag, Dl, at, col))
                        if is_end[last]:  # the final grows by the block's
                            at = ch * (k + 1) + k
                            grown = r_add(tag, r_load(tag, X, at, col), r_load(tag, Dl, at, col))
                            r_store(tag, X, at, col, grown)
            elif j == i + 1:
                apply_event(
                    tag, X, X, i, pos[i], W, MU, K, mseg, pred_ptr, pred_idx, is_start, is_end,
                    nch, k, ncols, snap,
                )  # fmt: skip
            else:
                clear(tag, Dl, D, ncols)
                for e in range(i, j):
                    if mseg[e] != MOVE:
                        apply_event(
                            tag, X, Dl, e, pos[e], W, MU, K, mseg, pred_ptr, pred_idx, is_start,
                            is_end, nch, k, ncols, snap,
                        )  # fmt: skip
                for e in range(i, j):
                    if mseg[e] == MOVE:
                        move_states(tag, X, pos[e], move_ptr, move_from, move_to, k, nch)
                for a in range(D - 1):
                    for b in range(ncols):
                        d = r_load(tag, Dl, a, b)
                        if not r_is_zero(tag, d):
                            r_store(tag, X, a, b, r_add(tag, r_load(tag, X, a, b), d))
            i = j
        finish_run(tag, X, carry, nch, k, full, maps[r])


@jitable
def block_in(tag, X, ch, s, b0, L, blk_idx, pred_ptr, pred_idx, is_start, k, col):
    """Channel ch's IN of the sub-template (`run_segments`), read from the query's state X: the
    entry s's predecessors outside the block, and the constant at a start. (The other inputs
    are the block's states as they are, and the constant.)"""
    base = ch * (k + 1)
    v = r_zero(tag)
    if ch == 0 and is_start[s]:
        v = r_load(tag, X, X.shape[0] - 1, col)
    for qi in range(pred_ptr[s], pred_ptr[s + 1]):
        src = pred_idx[qi]
        inside = False
        for b in range(L):
            if blk_idx[b0 + b] == src:
                inside = True
        if not inside:
            v = r_add(tag, v, r_load(tag, X, base + src, col))
    return v


@jitable
def block_terms(
    tag, X, Dl, off, s, BM, b0, L, fin, blk_idx, pred_ptr, pred_idx, is_start, nch, k, col
):  # fmt: skip
    """A block macro row's outputs in column col, into Dl at the block's states and, with fin
    (the block's last state is an end), the final:
    each input read once (IN from `block_in`; the block's final value adds its growth only, so it
    is no input) and spread over the outputs; every output adds its terms in input order, from
    zero."""
    sd = L + 2
    Dp = nch * sd + 1
    stride = k + 1
    for ch in range(nch):
        for p in range(1, L + 1 + fin):
            at = ch * stride + (blk_idx[b0 + p - 1] if p <= L else k)
            r_store(tag, Dl, at, col, r_zero(tag))
    for ch in range(nch):
        for p in range(L + 1):  # IN, then the block's states (its final value: growth only)
            if p == 0:
                v = block_in(tag, X, ch, s, b0, L, blk_idx, pred_ptr, pred_idx, is_start, k, col)
            else:
                v = r_load(tag, X, ch * stride + blk_idx[b0 + p - 1], col)
            input_terms(tag, Dl, BM, off + ch * sd + p, Dp, v, b0, L, fin, blk_idx, nch, k, col)
    v = r_load(tag, X, X.shape[0] - 1, col)
    input_terms(tag, Dl, BM, off + Dp - 1, Dp, v, b0, L, fin, blk_idx, nch, k, col)


@jitable
def input_terms(tag, Dl, BM, entries, Dp, v, b0, L, fin, blk_idx, nch, k, col):
    """One input v times its column of a block's map (BM[entries + r * D'] for output r),
    added into the outputs in Dl (`block_terms`)."""
    if r_is_zero(tag, v):
        return
    sd = L + 2
    stride = k + 1
    for ch in range(nch):
        for p in range(1, L + 1 + fin):
            a = r_load(tag, BM, entries + (ch * sd + p) * Dp, 0)
            if not r_is_zero(tag, a):
                at = ch * stride + (blk_idx[b0 + p - 1] if p <= L else k)
                r_store(tag, Dl, at, col, r_add(tag, r_load(tag, Dl, at, col), r_mul(tag, a, v)))


#: `xf_term`'s flags: a product was left out, a term is negative, the path declines, a product
#: below XF_NEAR was added.
XF_DROPPED, XF_NEGATIVE, XF_DECLINE, XF_SMALL = 1, 2, 4, 8


@jitable
def xf_block_terms(
    tag, X, Dl, Xs, off, s, BS, b0, L, fin, blk_idx, pred_ptr, pred_idx, is_start, nch, k, col
):  # fmt: skip
    """`block_terms` in XFloat as plain float arithmetic, with the same values, or False (Dl
    then holds nothing of use) where that cannot be shown (docs/architecture.md section 10).

    The map's rows come scaled to their largest entry, stored by column (BS, `xf_scaled_rows`:
    entry (r, m) of a map at off is BS[off + m * D' + r]), and the inputs are scaled here to
    the largest input exponent, so each output is a plain sum of products in `block_terms`'
    order, with its roundings while they are normal floats. A product from XF_FAR up is added;
    one below is left out, which changes nothing where every term is non-negative and the
    output's added products are all XF_NEAR or more (the sum, never smaller than the first of
    them, absorbs it, as XFloat's alignment does); else the row declines. Saves an exponent
    alignment per multiply-add: the block rows' cost at L = 10 (benchmarks/bench_gloria.py).

    The scaled inputs wait in Xs, scratch of X's shape, and each output's sum in a register
    (an output's terms added into Dl in turn took 3.5 ns a product). A row whose products
    are all added unmarked, as a count's are, takes them without a branch (`plain` below)."""
    if BS.shape[0] == 0:  # no scaled maps given
        return False
    sd = L + 2
    Dp = nch * sd + 1
    stride = k + 1
    cst = X.shape[0] - 1
    nin = nch * (L + 1)  # the inputs but the constant (Xs[nin])
    # The scale: the largest exponent among the inputs' parts (IN sums some of s's predecessors;
    # the constant is 0 in the columns of carried states). -inf: every input is zero.
    top = X[cst, col, 1] if X[cst, col, 0] != 0.0 else -math.inf
    for ch in range(nch):
        base = ch * stride
        for b in range(L):
            at = base + blk_idx[b0 + b]
            if X[at, col, 0] != 0.0 and X[at, col, 1] > top:
                top = X[at, col, 1]
        for qi in range(pred_ptr[s], pred_ptr[s + 1]):
            at = base + pred_idx[qi]
            if X[at, col, 0] != 0.0 and X[at, col, 1] > top:
                top = X[at, col, 1]
    # The inputs, scaled, at Xs[ch (L + 1) + p, col, 1] (p = 0: IN, then the block's states;
    # its final value grows only, so it is no input) and Xs[nin, col, 1] (the constant); NaN: a
    # zero input, whose products are not taken. Beside each, its column's offset in the map
    # (a whole number), so that an output reads its inputs in one loop: nested loops over
    # channels and positions cost more than the products at L = 2. The inputs' smallest
    # positive value, whether one is negative and whether one is lost below float64's range
    # (0 from a nonzero input) tell which outputs may take plain sums.
    least = math.inf
    negative = False
    lost = False
    for ch in range(nch + 1):
        for p in range(L + 1 if ch < nch else 1):
            if ch == nch:
                v = r_load(tag, X, cst, col)
            elif p == 0:
                v = block_in(tag, X, ch, s, b0, L, blk_idx, pred_ptr, pred_idx, is_start, k, col)
            else:
                v = r_load(tag, X, ch * stride + blk_idx[b0 + p - 1], col)
            x = math.nan
            if v[0] != 0.0:
                x = xf_scale(v[0], top - v[1])
                negative |= v[0] < 0.0
                lost |= x == 0.0
                if x > 0.0 and x < least:
                    least = x
            Xs[ch * (L + 1) + p, col, 1] = x
            Xs[ch * (L + 1) + p, col, 0] = (Dp - 1 if ch == nch else ch * sd + p) * Dp
    flags = 0
    for cho in range(nch):
        for po in range(1, L + 1 + fin):
            o = off + cho * sd + po  # output (cho, po)'s entry in the map's column 0
            acc = 0.0
            mark = 0
            # A row of non-negative entries whose smallest nonzero one times the smallest input
            # is XF_NEAR or more adds every product (the row's bound at column 1,
            # `xf_scaled_rows`), unmarked but for the inputs lost (XF_DROPPED).
            plain = not negative and f_mul(BS[o + Dp, 1], least) >= XF_NEAR
            if plain:
                for i in range(nin + 1):
                    x = Xs[i, col, 1]
                    term = f_mul(BS[o + int(Xs[i, col, 0]), 0], x)
                    acc = f_add(acc, term if x == x else 0.0)
                mark = XF_DROPPED if lost else 0
            if not plain or lost and acc == 0.0:  # each product on its own
                acc = 0.0
                mark = 0
                for i in range(nin + 1):
                    a = BS[o + int(Xs[i, col, 0]), 0]
                    acc, mark = xf_term(acc, mark, a, Xs[i, col, 1])
            if mark & XF_DECLINE or mark & XF_DROPPED and (mark & XF_SMALL or acc == 0.0):
                return False  # a product left out might count beside the ones added
            flags |= mark
            Dl[cho * stride + (blk_idx[b0 + po - 1] if po <= L else k), col, 0] = acc
    if flags & XF_DROPPED and flags & XF_NEGATIVE:
        return False
    for ch in range(nch):
        for p in range(1, L + 1 + fin):
            at = ch * stride + (blk_idx[b0 + p - 1] if p <= L else k)
            mm, ee = xf_fix(Dl[at, col, 0], BS[off + ch * sd + p, 1] + top)
            Dl[at, col, 0] = mm
            Dl[at, col, 1] = ee
    return True


@jitable
def xf_term(acc, mark, a, x):
    """An output's plain sum acc plus the product of a map entry a and a scaled input x (NaN:
    none) where it is XF_FAR or more (`xf_block_terms`), and the output's XF_ marks. Adding a
    zero leaves the sum as it is (never -0: every term added is nonzero), so the sum takes no
    branch; the marks take one, which the common product (a count's: XF_NEAR or more,
    positive) and the products not taken pass by."""
    term = f_mul(a, x)
    size = abs(term)
    acc = f_add(acc, term if size >= XF_FAR else 0.0)
    if (size >= XF_NEAR or a == 0.0 or x != x) and term >= 0.0:
        return acc, mark
    if a == 0.0 or x != x:
        return acc, mark
    if size >= XF_FAR:
        if size < XF_NEAR:
            mark |= XF_SMALL
        if term < 0.0:
            mark |= XF_NEGATIVE
    elif size < XF_FAR:
        mark |= XF_DROPPED
        if (a < 0.0) != (x < 0.0):
            mark |= XF_NEGATIVE
    else:
        mark |= XF_DECLINE  # a is NaN: an entry too small beside its row's largest
    return acc, mark


def scaled_block_terms(
    tag, X, Dl, Xs, off, s, BS, b0, L, fin, blk_idx, pred_ptr, pred_idx, is_start, nch, k, col
):  # fmt: skip
    """`xf_block_terms` in XFloat, else False: `block_terms` does the work."""
    return isinstance(tag, XFloat) and xf_block_terms(
        tag, X, Dl, Xs, off, s, BS, b0, L, fin, blk_idx, pred_ptr, pred_idx, is_start, nch, k, col
    )


@overload(scaled_block_terms, target="generic")
def _ov_scaled_block_terms(
    tag, X, Dl, Xs, off, s, BS, b0, L, fin, blk_idx, pred_ptr, pred_idx, is_start, nch, k, col
):  # fmt: skip
    if ring_of(tag) is XFloat:
        return xf_block_terms

    def declined(tag, X, Dl, Xs, off, s, BS, b0, L, fin, blk_idx, pred_ptr, pred_idx, is_start,
                 nch, k, col):  # fmt: skip
        return False

    return declined


@jitable
def finish_run(tag, X, carry, nch, k, full, M):
    """A run's output into M: with `full`, its D x D map, from the columns computed for the
    constant and the carried states; else its result from the zero state (column 0).

    A weighted channel's response to its own input is the count channel's response to the count
    input (the same recursion, with no weight term since c is zero there), so those blocks are
    copied; inputs nobody reads (finals, states that are no predecessor) map to themselves."""
    D = X.shape[0]
    if not full:
        for a in range(D):
            r_store(tag, M, a, 0, r_load(tag, X, a, 0))
        return
    stride = k + 1
    clear(tag, M, D, D)
    for a in range(D):
        r_store(tag, M, a, a, r_one(tag))
    for a in range(D):
        r_store(tag, M, a, D - 1, r_load(tag, X, a, 0))
    for j in range(carry.shape[0]):
        q = carry[j]
        for a in range(D - 1):
            r_store(tag, M, a, q, r_load(tag, X, a, j + 1))
        for ch in range(1, nch):
            for r in range(stride):
                r_store(tag, M, ch * stride + r, ch * stride + q, r_load(tag, X, r, j + 1))


# --- windows: composing segment maps ------------------------------------------------------------


@jitable
def matmul(tag, A, B, C):
    """C = A @ B over the ring (C must not alias A or B); zero entries are skipped (maps are
    sparse)."""
    D = A.shape[0]
    clear(tag, C, D, D)
    for i in range(D):
        for m in range(D):
            a = r_load(tag, A, i, m)
            if r_is_zero(tag, a):
                continue
            for j in range(D):
                b = r_load(tag, B, m, j)
                if not r_is_zero(tag, b):
                    r_store(tag, C, i, j, r_add(tag, r_load(tag, C, i, j), r_mul(tag, a, b)))


@jitable
def copy_map(tag, src, dst):
    D = src.shape[0]
    for i in range(D):
        for j in range(D):
            r_store(tag, dst, i, j, r_load(tag, src, i, j))


@jitable
def walk_windows(run_seg, s0, s1, a, n, lo_out, hi_out, flip_out, k_out, w0, fill):
    """Windows [k*a, k*a + n) (in segment units) holding runs s0..s1-1 of one partition, in order:
    for each, its first run, its end run, and the flip point of a two-stack sliding aggregation
    (the front stack holds suffix products of runs [lo, flip), the back the product of runs
    [flip, hi) pushed since); written from w0 on with `fill`. Returns how many there are."""
    kk = first_window(run_seg[s0], a, n)  # the first window holding the segment
    lo = s0
    hi = s0
    flip_end = s0
    w = 0
    while True:
        while hi < s1 and run_seg[hi] < kk * a + n:
            hi += 1
        while lo < hi and run_seg[lo] < kk * a:
            lo += 1
        if lo < hi:
            if lo >= flip_end:
                flip_end = hi
            if fill:
                lo_out[w0 + w] = lo
                hi_out[w0 + w] = hi
                flip_out[w0 + w] = flip_end
                k_out[w0 + w] = kk
            w += 1
            kk += 1
        else:
            if hi == s1:
                break
            nk = first_window(run_seg[hi], a, n)  # (max() of ints does not compile for CUDA)
            kk = nk if nk > kk + 1 else kk + 1
    return w


@jitable
def window_finals(tag, G, B, back, finals, out, w):
    """A window's final values into out[w]: (back @ front) applied to the zero state, where G is
    the front product and B the back one (absent unless `back`)."""
    D = G.shape[0]
    cst = D - 1
    for f in range(finals.shape[0]):
        row = finals[f]
        if back:
            val = r_zero(tag)
            for m in range(D):
                bm = r_load(tag, B, row, m)
                if not r_is_zero(tag, bm):
                    val = r_add(tag, val, r_mul(tag, bm, r_load(tag, G, m, cst)))
        else:
            val = r_load(tag, G, row, cst)
        r_store(tag, out, w, f, val)


# --- bursts: graphlet coefficients --------------------------------------------------------------


@njit(cache=True, nogil=True)
def pieces(seg_id, t, groups, nseg):
    """(first event of every piece, then the number of events; first piece of every burst, then
    the number of pieces) for events sorted by burst `seg_id` (0 .. nseg - 1) and time: a piece
    is `groups` consecutive timestamp groups of one burst, the last one of a burst possibly
    fewer. Host code for both backends, one compiled pass: a query asks for a few bursts at a
    time (gpu_hamlet/engine/sharing.py `coefficients`), where a dozen NumPy calls cost more
    than the bursts."""
    n = seg_id.shape[0]
    event_bounds = np.empty(n + 1, np.int64)
    per_burst = np.zeros(nseg + 1, np.int64)
    m = 0
    g = 0  # the event's timestamp group within its burst
    for i in range(n):
        new_burst = i == 0 or seg_id[i] != seg_id[max(i - 1, 0)]
        new_group = new_burst or t[i] != t[max(i - 1, 0)]
        g = 0 if new_burst else g + new_group
        start = new_group and g % groups == 0
        event_bounds[m] = i  # every event writes; only a piece's first moves on
        per_burst[seg_id[i] + 1] += start
        m += start
    event_bounds[m] = n
    return event_bounds[: m + 1].copy(), np.cumsum(per_burst)


@jitable
def piece_map(tag, t, W, i, end, K, row, A, G, MU):
    """Graphlet coefficients of a burst's timestamp groups in events i..end-1, as the map
    (g, MU, K) from (1, 0, 0), into G, MU and K at `row`; `A` is [channels, 1, lanes] scratch.

    Over the groups j with m_j events and weight sums A_j (per channel): g_0 = 1,
    g_{j+1} = g_j (1 + m_j); MU = sum m_j g_j; K_0 = 0, K_{j+1} = K_j (1 + m_j) + A_j g_j. Then a
    burst with snapshot y = c (start + predecessor sums) and channel snapshot z adds MU*y to the
    count and MU*z + K*y to each channel: every event's count is y times a prefix product
    (HAMLET's graphlet propagation), computed once however many queries share it."""
    nch = W.shape[0]
    g = r_one(tag)
    mu = r_zero(tag)
    for ch in range(nch):
        r_store(tag, K, row, ch, r_zero(tag))
    while i < end:
        j = i
        m = r_zero(tag)
        for ch in range(nch):
            r_store(tag, A, ch, 0, r_zero(tag))
        while j < end and t[j] == t[i]:
            m = r_add(tag, m, r_one(tag))
            for ch in range(nch):
                r_store(tag, A, ch, 0, r_add(tag, r_load(tag, A, ch, 0), r_load(tag, W, ch, j)))
            j += 1
        one_m = r_add(tag, r_one(tag), m)
        for ch in range(nch):
            kk = r_mul(tag, r_load(tag, K, row, ch), one_m)
            r_store(tag, K, row, ch, r_add(tag, kk, r_mul(tag, r_load(tag, A, ch, 0), g)))
        mu = r_add(tag, mu, r_mul(tag, m, g))
        g = r_mul(tag, g, one_m)
        i = j
    r_store(tag, G, row, 0, g)
    r_store(tag, MU, row, 0, mu)


@jitable
def fold_pieces(tag, G, PMU, PK, p, end, MU, K, b):
    """A burst's coefficients into MU and K at row b from the maps of its pieces p..end-1 (rows
    of G, PMU, PK), folded in order: a piece (g2, MU2, K2) after the pieces before it
    (g1, MU1, K1) gives (g1 g2, MU1 + g1 MU2, g2 K1 + g1 K2)."""
    nch = PK.shape[1]
    g = r_load(tag, G, p, 0)
    mu = r_load(tag, PMU, p, 0)
    for ch in range(nch):
        r_store(tag, K, b, ch, r_load(tag, PK, p, ch))
    for q in range(p + 1, end):
        g2 = r_load(tag, G, q, 0)
        mu = r_add(tag, mu, r_mul(tag, g, r_load(tag, PMU, q, 0)))
        for ch in range(nch):
            r_store(
                tag,
                K,
                b,
                ch,
                r_add(
                    tag,
                    r_mul(tag, g2, r_load(tag, K, b, ch)),
                    r_mul(tag, g, r_load(tag, PK, q, ch)),
                ),
            )
        g = r_mul(tag, g, g2)
    r_store(tag, MU, b, 0, mu)


# --- sums of runs of rows -----------------------------------------------------------------------


@jitable
def reduce_run(tag, vals, lo, hi, f, out, g):
    """out[g, f] = the ring sum of vals[lo..hi-1, f], added in order."""
    acc = r_load(tag, vals, lo, f)
    for i in range(lo + 1, hi):
        acc = r_add(tag, acc, r_load(tag, vals, i, f))
    r_store(tag, out, g, f, acc)

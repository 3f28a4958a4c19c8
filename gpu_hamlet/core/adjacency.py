"""Trends with predicates between adjacent events (`X.a op NEXT(Y).b`), written once over a ring
for both backends (docs/architecture.md section 3, docs/semantics.md section 2).

Such a predicate makes an event extend only the partial trends whose last event satisfies it, so
a state's running sum no longer suffices: for each edge q -> p of the automaton that carries
conditions (a *class*: the conditions of one pair of types), the partial trends of state q are
also kept in a segment tree over the ranks of their last events' keys. The host
(gpu_hamlet/engine/adjacent.py) ranks the keys of each run and turns every comparison into at
most two ranges of leaves, so the recursion only adds points and sums ranges: O(log n) per event
and edge, in any ring, with adds only (MIN has no inverse, so no prefix difference is taken).

A run is a whole window from the zero state (windows are not composed from pane maps: the state
depends on the last events' values). Rows of one timestamp all read before any of them writes,
then negated events move states (and their trees), then the rows' values are added: the order of
`run_segments` in gpu_hamlet/core/recursions.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu_hamlet.core.recursions import MOVE, move_states, reset
from gpu_hamlet.core.rings import (
    jitable,
    r_add,
    r_is_zero,
    r_load,
    r_mul,
    r_one,
    r_store,
    r_zero,
)


@dataclass(frozen=True)
class AdjacentRuns:
    """One query's rows cut into runs (windows), with what the trees need.

    `starts` (runs + 1) bounds the runs; per row `time` and `pos` (the state entered, or the
    label of a move row). Per template edge (aligned with `pred_idx`) `pred_cls`
    is its class or -1; `tree[q, c]` numbers state q's tree among the trees of class c (-1: none).
    Per run and class, the trees start at `toff` and have `tsize` leaves (2 * tsize nodes each).
    Per row and class, `slot` is the leaf its values are added at (-1: none) and `rng` the two
    leaf ranges [lo, hi) it reads.

    Window macro rows (`wburst` >= 0: the burst's number in its shared set) stand for a burst
    of a Kleene type whose E -> E conditions the queries of a set share
    (gpu_hamlet/engine/window_sharing.py): `wprev` chains each to the previous one of its run
    (-1: none). Snapshots are numbered bursts first (s < B = eptr.shape[0] - 1), then the
    event-level ones (B + j: `eptr[s]`..`eptr[s + 1]` are burst s's); the responses of snapshot
    x on burst b are K[doff[x] + b] and on event snapshot j K[goff[x] + j]. A macro row of a
    query that takes ties keeps its burst's event snapshots at `wesnap` (-1: none) of an array
    of `eslots`."""

    starts: np.ndarray
    time: np.ndarray
    pos: np.ndarray
    pred_cls: np.ndarray
    tree: np.ndarray
    toff: np.ndarray
    tsize: np.ndarray
    slot: np.ndarray
    rng: np.ndarray
    nodes: int
    wburst: np.ndarray
    wprev: np.ndarray
    doff: np.ndarray
    wesnap: np.ndarray
    eptr: np.ndarray
    goff: np.ndarray
    eslots: int

    @property
    def runs(self) -> int:
        return self.starts.shape[0] - 1


@jitable
def tree_add(tag, T, base, m, leaf, V, e, nch):
    """Row e's values V[e, ch] added at `leaf` of the tree at `base` with m leaves."""
    j = leaf + m
    while j >= 1:
        for ch in range(nch):
            r_store(
                tag,
                T,
                base + j,
                ch,
                r_add(tag, r_load(tag, T, base + j, ch), r_load(tag, V, e, ch)),
            )
        j = j // 2


@jitable
def tree_sum(tag, T, base, m, lo, hi, A, nch):
    """A[ch] grows by the sum of leaves lo..hi-1 of the tree at `base` with m leaves."""
    left = lo + m
    right = hi + m
    while left < right:
        if left & 1:
            for ch in range(nch):
                r_store(
                    tag,
                    A,
                    ch,
                    0,
                    r_add(tag, r_load(tag, A, ch, 0), r_load(tag, T, base + left, ch)),
                )
            left += 1
        if right & 1:
            right -= 1
            for ch in range(nch):
                r_store(
                    tag,
                    A,
                    ch,
                    0,
                    r_add(tag, r_load(tag, A, ch, 0), r_load(tag, T, base + right, ch)),
                )
        left = left // 2
        right = right // 2


@jitable
def add_response(tag, out, o, R, d, src, f, nch):
    """out[o] grows by the snapshot src[f] (count and channels) carried by its responses R[d]. A
    channel's weight term only counts on snapshots that exist (as in `apply_event`)."""
    c = r_load(tag, src, f, 0)
    cz = r_is_zero(tag, c)
    d0 = r_load(tag, R, d, 0)
    r_store(tag, out, o, 0, r_add(tag, r_load(tag, out, o, 0), r_mul(tag, d0, c)))
    for ch in range(1, nch):
        v = r_mul(tag, d0, r_load(tag, src, f, ch))
        if not cz:
            v = r_add(tag, v, r_mul(tag, r_load(tag, R, d, ch), c))
        r_store(tag, out, o, ch, r_add(tag, r_load(tag, out, o, ch), v))


@jitable
def gather(tag, out, o, e, at, off, upto, snap, wburst, wprev, wesnap, eptr, K, ES, nch):
    """out[o] = every snapshot of window macro row e's run so far (following `wprev` from e)
    times its responses K[off[x] + at]: each burst's, and where the query keeps them its event
    snapshots' (in e's own burst only those before `upto`)."""
    nb = eptr.shape[0] - 1
    for ch in range(nch):
        r_store(tag, out, o, ch, r_zero(tag))
    f = e
    while f >= 0:
        s = wburst[f]
        add_response(tag, out, o, K, off[s] + at, snap, f, nch)
        if wesnap[f] >= 0:
            top = upto if f == e else eptr[s + 1]
            for i in range(eptr[s], top):
                add_response(tag, out, o, K, off[nb + i] + at, ES, wesnap[f] + i - eptr[s], nch)
        f = wprev[f]


@jitable
def resolve_window(tag, V, e, b, snap, wburst, wprev, doff, K, nch, wesnap, eptr, goff, ES):
    """V[e] of a window macro row of burst b: every snapshot of its run so far times its
    responses on burst b. First, for a query that takes ties, the value of each event snapshot
    j of burst b (ES[wesnap[e] + j - eptr[b]]): its tie edges' input, every earlier snapshot
    times its responses on j."""
    if wesnap[e] >= 0:
        for j in range(eptr[b], eptr[b + 1]):
            o = wesnap[e] + j - eptr[b]
            gather(tag, ES, o, e, j, goff, j, snap, wburst, wprev, wesnap, eptr, K, ES, nch)
    gather(tag, V, e, e, b, doff, eptr[b + 1], snap, wburst, wprev, wesnap, eptr, K, ES, nch)


@jitable
def move_trees(tag, T, label, move_ptr, move_from, move_to, tree, toff, tsize, nch):
    """The moves of a negated event of `label` on the trees: a moved state's trees are added into
    its target's (a state and its target end with the same type, so both have them) and cleared."""
    for mv in range(move_ptr[label], move_ptr[label + 1]):
        a = move_from[mv]
        b = move_to[mv]
        for c in range(tree.shape[1]):
            if tree[a, c] < 0 or tsize[c] == 0:
                continue
            size = 2 * tsize[c]
            src = toff[c] + tree[a, c] * size
            dst = toff[c] + tree[b, c] * size if b >= 0 else -1
            for node in range(1, size):
                for ch in range(nch):
                    v = r_load(tag, T, src + node, ch)
                    r_store(tag, T, src + node, ch, r_zero(tag))
                    if dst >= 0:
                        r_store(
                            tag, T, dst + node, ch, r_add(tag, r_load(tag, T, dst + node, ch), v)
                        )


@jitable
def run_adjacent(
    tag, maps, T, V, A, starts, r0, r1, no_carry, t, pos, mseg, W, MU, K, pred_ptr, pred_idx,
    pred_cls, is_start, is_end, move_ptr, move_from, move_to, k, tree, toffs, tsizes, slot, rng,
    snap, wburst, wprev, doff, wesnap, eptr, goff, ES,
):  # fmt: skip
    """Runs r0..r1-1 (rows starts[r] to starts[r + 1] - 1 of run r, sorted by time), each from
    the zero state in maps[r] [D, 1, lanes], where its finals end. T holds the runs' trees
    (cleared per run), V [rows, channels, lanes] the rows' values, A [channels, 1, lanes] is
    scratch; run r's trees are at toffs[r] with sizes tsizes[r]. The CPU walks all its runs in
    one call, the GPU one per thread (as `run_segments`: a call passing this many arrays costs
    more than a small window).

    `mseg` is EVENT, MOVE, or a macro row's burst (a shared burst of a Kleene type no condition
    touches, so its events form one macro event as in `apply_event`: MU*c and MU*z + K*c, its
    snapshot c recorded in `snap`). A window macro row (`wburst` >= 0) records its input (count
    and channels) in `snap` [rows, channels, lanes] and resolves every snapshot of its run so far
    against its burst (`resolve_window`: sum over s of c_s * D[s, b], with D = K[doff[s] + b],
    the responses of snapshot s's basis pass, channel 0 the count's; event-level snapshots in
    ES; docs/architecture.md section 9)."""
    nch = W.shape[0]
    stride = k + 1
    ncls = tree.shape[1]
    for r in range(r0, r1):
        X = maps[r]
        reset(tag, X, no_carry)
        i = starts[r]
        end = starts[r + 1]
        toff, tsize = toffs[r], tsizes[r]
        for c in range(ncls):  # the run's trees start empty (the ring's zero: not 0 in MINREACH)
            n_trees = 0
            for q in range(tree.shape[0]):
                if tree[q, c] >= 0:
                    n_trees += 1
            for node in range(toff[c], toff[c] + n_trees * 2 * tsize[c]):
                for ch in range(nch):
                    r_store(tag, T, node, ch, r_zero(tag))
        while i < end:
            j = i + 1
            while j < end and t[j] == t[i]:
                j += 1
            for e in range(i, j):
                if mseg[e] == MOVE:
                    continue
                p = pos[e]
                for ch in range(nch):
                    r_store(tag, A, ch, 0, r_zero(tag))
                for qi in range(pred_ptr[p], pred_ptr[p + 1]):
                    q = pred_idx[qi]
                    c = pred_cls[qi]
                    if c < 0:
                        for ch in range(nch):
                            v = r_load(tag, X, ch * stride + q, 0)
                            r_store(tag, A, ch, 0, r_add(tag, r_load(tag, A, ch, 0), v))
                    elif tsize[c] > 0:
                        base = toff[c] + tree[q, c] * 2 * tsize[c]
                        tree_sum(tag, T, base, tsize[c], rng[e, c, 0], rng[e, c, 1], A, nch)
                        tree_sum(tag, T, base, tsize[c], rng[e, c, 2], rng[e, c, 3], A, nch)
                cnt = r_load(tag, A, 0, 0)
                if is_start[p]:
                    cnt = r_add(tag, cnt, r_one(tag))
                # A weight only counts on partial trends that exist: in MINREACH a key times an
                # unreached count is not zero (as in `apply_event`).
                cz = r_is_zero(tag, cnt)
                b = wburst[e]
                if b >= 0:
                    r_store(tag, snap, e, 0, cnt)
                    for ch in range(1, nch):
                        r_store(tag, snap, e, ch, r_load(tag, A, ch, 0))
                    resolve_window(
                        tag, V, e, b, snap, wburst, wprev, doff, K, nch, wesnap, eptr, goff, ES
                    )
                    continue
                m = mseg[e]
                if m >= 0:
                    r_store(tag, snap, e, 0, cnt)
                    mu = r_load(tag, MU, m, 0)
                    r_store(tag, V, e, 0, r_mul(tag, mu, cnt))
                    for ch in range(1, nch):
                        v = r_mul(tag, mu, r_load(tag, A, ch, 0))
                        if not cz:
                            v = r_add(tag, v, r_mul(tag, r_load(tag, K, m, ch), cnt))
                        r_store(tag, V, e, ch, v)
                    continue
                r_store(tag, V, e, 0, cnt)
                for ch in range(1, nch):
                    v = r_load(tag, A, ch, 0)
                    if not cz:
                        v = r_add(tag, v, r_mul(tag, r_load(tag, W, ch, e), cnt))
                    r_store(tag, V, e, ch, v)
            for e in range(i, j):
                if mseg[e] == MOVE:
                    move_states(tag, X, pos[e], move_ptr, move_from, move_to, k, nch)
                    move_trees(tag, T, pos[e], move_ptr, move_from, move_to, tree, toff, tsize, nch)
            for e in range(i, j):
                if mseg[e] == MOVE:
                    continue
                p = pos[e]
                for ch in range(nch):
                    v = r_load(tag, V, e, ch)
                    r_store(
                        tag,
                        X,
                        ch * stride + p,
                        0,
                        r_add(tag, r_load(tag, X, ch * stride + p, 0), v),
                    )
                    if is_end[p]:
                        r_store(
                            tag,
                            X,
                            ch * stride + k,
                            0,
                            r_add(tag, r_load(tag, X, ch * stride + k, 0), v),
                        )
                for c in range(ncls):
                    if slot[e, c] >= 0:
                        base = toff[c] + tree[p, c] * 2 * tsize[c]
                        tree_add(tag, T, base, tsize[c], slot[e, c], V, e, nch)
            i = j

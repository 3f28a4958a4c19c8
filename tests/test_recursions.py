"""The core recursions (gpu_hamlet/core/recursions.py) on hand-built automata: move rows that clear
(negation) and an event entering several states, on both backends, against a brute force over the
trends (the engine's own automata are checked against the oracle in test_patterns.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpu_fallback import CpuBackend
from gpu_hamlet.core.recursions import EVENT, MOVE, pieces
from gpu_hamlet.query.pattern import PatternElement
from gpu_hamlet.query.plan import Template

P = 2_147_483_647  # a prime: counts here stay far below it


def template(pred_ptr, pred_idx, moves=()):
    """Two states, 0 a start and 1 the end, and the moves of label 0 (a B)."""
    flat = Template.of(PatternElement("A"))
    return Template(
        k=2,
        pred_ptr=np.array(pred_ptr, np.int64),
        pred_idx=np.array(pred_idx, np.int64),
        is_start=np.array([True, False]),
        is_end=np.array([False, True]),
        labels={},
        enter_ptr=flat.enter_ptr,
        enter_idx=flat.enter_idx,
        move_ptr=np.array([0, len(moves)], np.int64),
        move_from=np.array([a for a, _ in moves], np.int64),
        move_to=np.array([b for _, b in moves], np.int64),
        automaton=flat.automaton,
    )


# State 0 (A, a start, reads itself), state 1 (C, the end, reads state 0); a B clears state 0:
# SEQ(A+, C) where a B between any two events ends the trend.
NEGATION = template([0, 1, 2], [0, 0], moves=[(0, -1)])
# SEQ(A, A): an A event may be the first or the second element: one row per state.
REPEATED = template([0, 0, 1], [0])

events = st.lists(st.tuples(st.integers(0, 6), st.sampled_from("ABC")), min_size=1, max_size=9).map(
    sorted
)


def negation_trends(evs: list[tuple[int, str]]) -> int:
    """Trends a_1 < ... < a_m < c (strictly increasing times) with no B strictly between two
    consecutive elements."""
    a = [t for t, x in evs if x == "A"]
    bs = [t for t, x in evs if x == "B"]
    total = 0
    for c in (t for t, x in evs if x == "C"):
        for m in range(1, len(a) + 1):
            for pick in itertools.combinations(range(len(a)), m):
                times = [a[i] for i in pick] + [c]
                if all(x < y for x, y in itertools.pairwise(times)) and not any(
                    x < b < y for x, y in itertools.pairwise(times) for b in bs
                ):
                    total += 1
    return total


def repeated_trends(evs: list[tuple[int, str]]) -> int:
    a = [t for t, x in evs if x == "A"]
    return sum(1 for x, y in itertools.combinations(a, 2) if x < y)


def rows(evs, template):
    """(time, state, mseg) rows of the events, sorted by time: A, C or B as the template says."""
    out = []
    for t, x in evs:
        if template is NEGATION:
            out.append((t, {"A": 0, "C": 1, "B": 0}[x], MOVE if x == "B" else EVENT))
        elif x == "A":
            out += [(t, 0, EVENT), (t, 1, EVENT)]
    return out


def count(backend, template, evs, split: int | None) -> int:
    """The trend count over the rows: one segment from zero, or two segments' maps (times below
    `split`, the rest) composed into one window."""
    r = rows(evs, template)
    if not r:
        return 0
    t = np.array([x[0] for x in r], np.int64)
    pos = np.array([x[1] for x in r], np.int64)
    mseg = np.array([x[2] for x in r], np.int64)
    n = t.shape[0]
    seg = np.zeros(n, np.int64) if split is None else (t >= split).astype(np.int64)
    W = np.ones((1, n, 1), np.int64)
    none = np.zeros((0, 1, 1), np.int64)
    snap = np.zeros((n, 1, 1), np.int64)
    args = (np.zeros(n, np.int64), seg, t, pos, W, none, none, mseg, template)
    maps, run_pid, run_seg = backend.segment_maps("modp", *args, split is not None, snap, P)
    if split is None:
        return int(maps[0, template.k, 0, 0])
    finals = np.array([template.k], np.int64)
    out, _, _ = backend.compose_windows("modp", maps, run_pid, run_seg, 2, 2, finals, P)
    return int(out[0, 0, 0])


@settings(max_examples=150, deadline=None)
@given(evs=events, split=st.one_of(st.none(), st.integers(1, 6)))
@pytest.mark.parametrize(
    "template, trends", [(NEGATION, negation_trends), (REPEATED, repeated_trends)]
)
def test_cpu_recursions_count_the_trends(template, trends, evs, split):
    assert count(CpuBackend(), template, evs, split) == trends(evs)


@pytest.mark.gpu
@settings(max_examples=15, deadline=None)
@given(evs=events, split=st.one_of(st.none(), st.integers(1, 6)))
@pytest.mark.parametrize(
    "template, trends", [(NEGATION, negation_trends), (REPEATED, repeated_trends)]
)
def test_gpu_recursions_count_the_trends(template, trends, evs, split):
    from gpu_hamlet.kernels import GpuBackend

    assert count(GpuBackend(), template, evs, split) == trends(evs)


def test_the_brute_forces_count_by_hand():
    evs = [(1, "A"), (2, "A"), (3, "B"), (4, "A"), (5, "C")]
    assert negation_trends(evs) == 1  # only (A@4, C@5): B ends the others
    # (A@3, C@5) and (A@1, A@3, C@5): A@3 reads the state from before the B of its timestamp
    assert negation_trends([(1, "A"), (3, "A"), (3, "B"), (5, "C")]) == 2
    assert repeated_trends([(1, "A"), (1, "A"), (2, "A")]) == 2


def _pieces_definition(seg_id, t, groups, nseg):
    """`pieces` as array operations: every `groups`-th timestamp group of a burst starts one."""
    n = seg_id.shape[0]
    new = np.ones(n, bool)
    new[1:] = (seg_id[1:] != seg_id[:-1]) | (t[1:] != t[:-1])
    group_start = np.flatnonzero(new)
    group_seg = seg_id[group_start]
    first = np.ones(group_start.shape[0], bool)
    first[1:] = group_seg[1:] != group_seg[:-1]
    index = np.arange(group_start.shape[0])
    within = index - np.maximum.accumulate(np.where(first, index, 0))
    at = np.flatnonzero(within % groups == 0)
    return np.r_[group_start[at], n], np.searchsorted(group_seg[at], np.arange(nseg + 1))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6)), max_size=60),
    st.integers(1, 4),
    st.sampled_from([np.int64, np.float64]),
)
def test_burst_pieces_equal_their_array_definition(raw, groups, dtype):
    """The compiled cut of bursts into pieces of `groups` timestamp groups (one pass) equals the
    array operations it replaces, bursts numbered 0 .. nseg - 1 in order."""
    ev = sorted(raw)
    _, seg_id = np.unique(np.asarray([s for s, _ in ev], np.int64), return_inverse=True)
    seg_id = seg_id.astype(np.int64)
    nseg = int(seg_id.max()) + 1 if len(ev) else 0
    t = np.asarray([x for _, x in ev], dtype)
    got = pieces(seg_id, t, groups, nseg)
    want = _pieces_definition(seg_id, t, groups, nseg)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 8)), min_size=1, max_size=200),
    st.integers(1, 40),
    st.sampled_from(["xfloat", "modp"]),
)
def test_burst_coefficients_cut_into_shares_keep_their_bits(raw, share, ring):
    """The CPU backend cuts a large call of `burst_coefficients` into shares of consecutive
    bursts, one per thread: every burst's coefficients are the bits of the call made whole."""
    import cpu_fallback

    ev = sorted(raw)
    _, seg_id = np.unique(np.asarray([s for s, _ in ev], np.int64), return_inverse=True)
    seg_id = seg_id.astype(np.int64)
    nseg = int(seg_id.max()) + 1
    t = np.asarray([x for _, x in ev], np.int64)
    values = np.random.default_rng(len(ev)).integers(1, 9, (2, len(ev)))
    if ring == "xfloat":  # (mantissa, exponent) pairs
        W = np.stack([values / 8.0, np.full(values.shape, 3.0)], axis=-1)
        param = 0
    else:
        W, param = values[..., None].astype(np.int64), P
    whole = CpuBackend(threads=1).burst_coefficients(ring, seg_id, t, W, nseg, param)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cpu_fallback, "COEFFICIENT_SHARE_EVENTS", share)
        cut = CpuBackend(threads=3).burst_coefficients(ring, seg_id, t, W, nseg, param)
    for a, b in zip(whole, cut, strict=True):
        assert a.shape == b.shape == (nseg, *a.shape[1:]) and a.dtype == b.dtype
        assert np.array_equal(a, b)

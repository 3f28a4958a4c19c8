"""Pruning (gpu_hamlet/engine/pruning.py) keeps every event of every trend, and does drop the
others."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import enumerate_trends

from gpu_hamlet.core.panes import panes
from gpu_hamlet.engine.partitions import SortedKeys
from gpu_hamlet.engine.pruning import rows_in_runs, rows_may_complete, typed_may_complete


def may_complete(
    run: np.ndarray, time: np.ndarray, pos: np.ndarray, k: int, within: int | float | None
) -> np.ndarray:
    """`rows_may_complete` for a flat SEQ's rows: starts at position 0, ends at k-1 (pos -1:
    not matched)."""
    return rows_may_complete(run, time, pos >= 0, pos == 0, pos == k - 1, within)


PATTERNS = ["SEQ(A, B+, C)", "SEQ(A, B)", "B+", "SEQ(A+, C+)", "SEQ(A, B, C)"]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(PATTERNS),
    st.integers(1, 6),
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 12), st.sampled_from("ABCD")), max_size=24
    ),
    st.sampled_from([np.int64, np.float64]),
)
def test_every_event_of_a_trend_is_kept(pattern, within, raw, dtype):
    """Events sorted by (run, time); a trend lies in one run and spans less than `within`."""
    types = [e.rstrip("+") for e in pattern.removeprefix("SEQ(").rstrip(")").split(", ")]
    ev = sorted(raw)
    run = np.asarray([r for r, _, _ in ev], np.int64)
    time = np.asarray([t for _, t, _ in ev], dtype)
    pos = np.asarray([types.index(x) if x in types else -1 for _, _, x in ev], np.int64)
    keep = _mask(may_complete(run, time, pos, len(types), within), len(ev))
    needed = set()
    for r in set(run.tolist()):
        at = np.flatnonzero(run == r)
        for trend in enumerate_trends([(ev[i][2], ev[i][1]) for i in at], pattern):
            if time[at[trend[-1]]] - time[at[trend[0]]] < within:
                needed.update(int(at[j]) for j in trend)
    assert all(keep[i] for i in needed)
    unbounded = _mask(may_complete(run, time, pos, len(types), None), len(ev))
    assert np.all(unbounded | ~keep)  # a distance bound only removes more
    assert not keep[pos < 0].any()  # unmatched events are never kept


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 3),
    st.integers(1, 8),
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 12), st.integers(-1, 2)), max_size=40),
    st.sampled_from([np.int64, np.float64]),
    st.booleans(),
)
def test_kept_events_are_exactly_those_between_a_start_and_an_end(k, within, raw, dtype, bounded):
    """The definition, one event at a time: matched, with a start at or before it (in stream
    order) and an end at or after it that itself has a start at or before it, all in its run and
    closer than `within` (float bounds are widened by a few ulps: at most `within` apart)."""
    ev = sorted((r, t, min(p, k - 1)) for r, t, p in raw)
    run = np.asarray([r for r, _, _ in ev], np.int64)
    time = np.asarray([t for _, t, _ in ev], dtype)
    pos = np.asarray([p for _, _, p in ev], np.int64)
    w = within if bounded else None

    def close(a, b):
        d = abs(time[b] - time[a])
        return run[a] == run[b] and (w is None or d < w or (dtype is np.float64 and d == w))

    def started(i):
        return any(pos[s] == 0 and close(s, i) for s in range(i + 1))

    want = [
        i
        for i in range(len(ev))
        if pos[i] >= 0
        and started(i)
        and any(pos[e] == k - 1 and started(e) and close(i, e) for e in range(i, len(ev)))
    ]
    assert may_complete(run, time, pos, k, w).tolist() == want


def test_lone_and_distant_events_are_dropped():
    # SEQ(A, B+, C): B without an A before it, B too far from its A, a run without C.
    run = np.asarray([0, 0, 0, 0, 1, 1, 2, 2, 2], np.int64)
    time = np.asarray([0, 1, 2, 3, 0, 1, 0, 9, 10], np.int64)
    pos = np.asarray([1, 0, 1, 2, 0, 1, 0, 1, 2], np.int64)
    assert may_complete(run, time, pos, 3, 5).tolist() == [1, 2, 3]
    assert may_complete(run, time.astype(float), pos, 3, 5.0).tolist() == [1, 2, 3]
    # Windows split run 0 after time 1: its B at 2 has no A in its window any more.
    window_run = np.asarray([0, 0, 1, 1, 2, 2, 3, 3, 3], np.int64)
    assert may_complete(window_run, time, pos, 3, None).tolist() == [6, 7, 8]


def _mask(idx: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, bool)
    out[idx] = True
    return out


def test_times_near_the_int64_limits():
    """t + within and t - within would overflow there: the distances are still exact."""
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    run = np.zeros(3, np.int64)
    pos = np.asarray([0, 1, 2], np.int64)
    for time in ([hi - 4, hi - 2, hi], [lo, lo + 2, lo + 4]):
        assert may_complete(run, np.asarray(time, np.int64), pos, 3, 10).tolist() == [0, 1, 2]
        assert may_complete(run, np.asarray(time, np.int64), pos, 3, 4).tolist() == []
    assert may_complete(run, np.asarray([lo, 0, hi], np.int64), pos, 3, 10).tolist() == []
    assert may_complete(run, np.asarray([lo, 0, hi], np.int64), pos, 3, None).tolist() == [0, 1, 2]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2), st.integers(0, 3), st.booleans(), st.booleans(), st.booleans()
        ),
        max_size=40,
    ),
)
def test_rows_in_runs_is_the_unbounded_test_over_pid_and_segment_runs(raw):
    """`rows_in_runs` (whole windows, after segmenting) keeps what `rows_may_complete` keeps
    without a distance bound over the runs of equal (pid, seg)."""
    ev = sorted(raw, key=lambda e: e[:2])
    pid = np.asarray([e[0] for e in ev], np.int64)
    seg = np.asarray([e[1] for e in ev], np.int64)
    matched, starts, ends = (np.asarray([e[j] for e in ev], bool) for j in (2, 3, 4))
    change = np.ones(len(ev), bool)
    change[1:] = (pid[1:] != pid[:-1]) | (seg[1:] != seg[:-1])
    time = np.arange(len(ev), dtype=np.int64)
    want = rows_may_complete(np.cumsum(change), time, matched, starts, ends, None)
    assert rows_in_runs(pid, seg, matched, starts, ends).tolist() == want.tolist()


def _sorted_events(raw: list[tuple], dtype) -> tuple[np.ndarray, ...]:
    """Events (partition, time, type code, dropped, ...) in the engine's sorted order: their
    partitions, times and type codes, a random row order, and the drop mask by event row (as
    `Matcher.drop_mask` gives it)."""
    ev = sorted(raw, key=lambda e: e[:2])
    pid = np.asarray([e[0] for e in ev], np.int64)
    time = np.asarray([e[1] for e in ev], dtype)
    codes = np.asarray([e[2] for e in ev], np.int32)
    order = np.random.default_rng(len(ev)).permutation(len(ev)).astype(np.int64)
    drop = np.zeros(len(ev), bool)
    drop[order] = [e[3] for e in ev]
    return pid, time, codes, order, drop


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 12), st.integers(0, 4), st.booleans()),
        max_size=40,
    ),
    st.lists(st.integers(-1, 2), min_size=5, max_size=5),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.sampled_from([np.int64, np.float64]),
    st.one_of(st.none(), st.integers(1, 8)),
    st.booleans(),
)
def test_typed_may_complete_is_positions_filters_then_rows_may_complete(
    raw, labels, is_start, is_end, dtype, within, filters
):
    """The one compiled call of a flat SEQ's plain rows gives the positions the type codes and
    filters give (`Matcher.sorted_positions`), pruned as `rows_may_complete` prunes them."""
    run, time, codes, order, drop = _sorted_events(raw, dtype)
    pos_of_code = np.asarray(labels, np.int32)
    starts_of, ends_of = np.asarray(is_start), np.asarray(is_end)
    pos = pos_of_code[codes]
    if filters:
        pos[drop[order]] = -1
    matched = pos >= 0
    at = np.maximum(pos, 0)
    want = rows_may_complete(
        run, time, matched, matched & starts_of[at], matched & ends_of[at], within
    )
    got, got_pos = typed_may_complete(
        codes, pos_of_code, starts_of, ends_of, order, drop if filters else None, run, time,
        within,
    )  # fmt: skip
    assert got.tolist() == want.tolist()
    assert got_pos.tolist() == pos[want].tolist()
    # The rows of each code as the sorted keys list them (a call's queries share them) give
    # the same; those lists hold every row of its code, ascending.
    keys = SortedKeys(order, run, np.zeros_like(run), time, codes)
    ptr, idx = keys.by_code
    for c in range(ptr.shape[0] - 1):
        assert idx[ptr[c] : ptr[c + 1]].tolist() == np.flatnonzero(codes == c).tolist()
    shared, shared_pos = typed_may_complete(
        codes, pos_of_code, starts_of, ends_of, order, drop if filters else None, run, time,
        within, by_code=keys.by_code,
    )  # fmt: skip
    assert shared.tolist() == want.tolist()
    assert shared_pos.tolist() == pos[want].tolist()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2), st.integers(0, 12), st.integers(0, 4), st.booleans(),
            st.integers(-3, 2),
        ),
        max_size=40,
    ),
    st.lists(st.integers(-1, 2), min_size=5, max_size=5),
    st.integers(0, 2),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.sampled_from([np.int64, np.float64]),
    st.one_of(st.none(), st.integers(1, 8)),
)  # fmt: skip
def test_typed_may_complete_keeps_shared_runs_as_slots_do(
    raw, labels, held_pos, is_start, is_end, dtype, within
):
    """With rows that stand for shared runs (`held` >= 0; SharedStages.compressed), the one
    compiled call keeps every run at `held_pos` and the events `rows_may_complete` keeps from
    the events alone: runs start and end nothing."""
    ev = sorted(raw, key=lambda e: e[:2])
    run = np.asarray([e[0] for e in ev], np.int64)
    time = np.asarray([e[1] for e in ev], dtype)
    codes = np.asarray([e[2] for e in ev], np.int32)
    held = np.asarray([max(e[4], -1) for e in ev], np.int64)  # -1: an event
    order = np.arange(len(ev), dtype=np.int64)
    drop = np.asarray([e[3] for e in ev], bool)
    pos_of_code = np.asarray(labels, np.int32)
    starts_of, ends_of = np.asarray(is_start), np.asarray(is_end)
    slot = held >= 0
    pos = pos_of_code[codes]
    pos[drop] = -1
    pos[slot] = held_pos
    idx = np.flatnonzero(pos >= 0)
    p, events = pos[idx], ~slot[idx]
    sel = rows_may_complete(
        run[idx], time[idx], events, events & starts_of[p], events & ends_of[p], within
    )
    keep = slot[idx]
    keep[sel] = True
    want = idx[keep]
    got, got_pos = typed_may_complete(
        codes, pos_of_code, starts_of, ends_of, order, drop, run, time, within, held, held_pos
    )
    assert got.tolist() == want.tolist()
    assert got_pos.tolist() == pos[want].tolist()


def test_a_shared_run_starts_and_ends_trends_where_its_block_holds_a_start_or_an_end():
    """A run slot (SharedStages.compressed) starts trends at its time, its run's first event's,
    where its block holds the pattern's start, and ends them there where it holds the end;
    else it does neither (it is kept all the same). SEQ(A, B, C) within 10."""
    pos_of_code = np.asarray([0, 1, 2], np.int32)  # A, B, C
    is_start, is_end = np.asarray([True, False, False]), np.asarray([False, False, True])

    def kept(codes, time, held, held_pos, starts=False, ends=False):
        n = len(codes)
        got, _ = typed_may_complete(
            np.asarray(codes, np.int32), pos_of_code, is_start, is_end, np.arange(n), None,
            np.zeros(n, np.int64), np.asarray(time, np.int64), 10, np.asarray(held, np.int64),
            held_pos, None, starts, ends,
        )  # fmt: skip
        return got.tolist()

    # A run of A (start) events from 0, then B at 8, C at 9 and C at 12: 12 is 10 after it.
    starts = ([0, 1, 2, 2], [0, 8, 9, 12], [0, -1, -1, -1], 0)
    assert kept(*starts, starts=True) == [0, 1, 2]
    assert kept(*starts) == [0]  # a run that starts nothing: no trend
    # A at 0, B at 3, then a run of C (end) events from 9.
    ends = ([0, 1, 2], [0, 3, 9], [-1, -1, 0], 2)
    assert kept(*ends, ends=True) == [0, 1, 2]
    assert kept(*ends) == [2]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(-12, 30), st.integers(0, 4), st.booleans()),
        max_size=50,
    ),
    st.lists(st.integers(-1, 2), min_size=5, max_size=5),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.sampled_from([np.int64, np.float64]),
    st.sampled_from([1, 3, 5, 2.5]),
    st.booleans(),
)
def test_tumbling_windows_pruned_at_once_as_in_two_passes(
    raw, labels, is_start, is_end, dtype, width, filters
):
    """A flat query over tumbling windows of `width` (WITHIN = the width) pruned in one pass by
    `SortedKeys.window_runs` keeps what pruning by partition and then per window keeps
    (`rows_in_runs` after segmenting): within one window every two events are closer than the
    width, so the window runs alone decide, and the second pass finds nothing more."""
    if dtype is np.int64 and not float(width).is_integer():
        width = 2
    pid, time, codes, order, drop = _sorted_events(raw, dtype)
    keys = SortedKeys(order, pid, np.zeros_like(pid), time, codes)
    args = (np.asarray(labels, np.int32), np.asarray(is_start), np.asarray(is_end), order)
    drop_arg = drop if filters else None
    w = dtype(width)
    # Two passes: by partition with the distance bound, then per window without one.
    first, first_pos = typed_may_complete(codes, *args, drop_arg, pid, time, w)
    seg, _ = panes(pid[first], time[first], w)
    at = np.maximum(first_pos, 0)
    again = rows_in_runs(
        pid[first], seg, first_pos >= 0, args[1][at] & (first_pos >= 0),
        args[2][at] & (first_pos >= 0),
    )  # fmt: skip
    runs = keys.window_runs(w, panes)
    assert keys.window_runs(w, panes) is runs  # made once per width
    got, got_pos = typed_may_complete(codes, *args, drop_arg, runs, time, w)
    assert got.tolist() == first[again].tolist()
    assert got_pos.tolist() == first_pos[again].tolist()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(-60, 60)), max_size=40),
    st.integers(1, 25),
    st.booleans(),
)
def test_panes_are_the_floored_quotients_and_their_runs(rows, width, floats):
    """`panes`: floor(time / width) in the time column's arithmetic (negative times too), and
    the first event of every run of equal (partition, pane), as the NumPy steps define them."""
    rows.sort()
    pid = np.asarray([p for p, _ in rows], np.int64)
    time = np.asarray([t for _, t in rows], np.float64 if floats else np.int64)
    w = width / 4 if floats else width
    seg, starts = panes(pid, time, w)
    want = np.floor(time / w).astype(np.int64) if floats else time // np.int64(w)
    change = np.ones(len(rows), bool)
    change[1:] = (pid[1:] != pid[:-1]) | (want[1:] != want[:-1])
    assert seg.tolist() == want.tolist()
    assert starts.dtype == np.int64 and starts.tolist() == np.flatnonzero(change).tolist()

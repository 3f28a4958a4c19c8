"""The compiled passes of window sets (gpu_hamlet/engine/window_bursts.py) against per-row
definitions, and `dynamic`'s gate before it analyses a window set (`windows_may_pay`): a set
whose sample says sharing loses runs its queries alone, one whose sample says it may pay is
analysed and shares, and both answer what `sharing="none"` answers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpu_hamlet
from gpu_hamlet.datagen import kleene_sharing_workload, kleene_stream
from gpu_hamlet.engine.window_bursts import window_bursts, window_presence


@st.composite
def sorted_streams(draw):
    """Rows sorted by partition and time, with panes of 3 time units, and which are E events."""
    n = draw(st.integers(0, 40))
    pid = np.sort(np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), np.int64))
    t = np.array(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)), np.int64)
    order = np.lexsort((t, pid))
    pid, t = pid[order], t[order]
    is_e = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    codes = np.array(draw(st.lists(st.integers(-1, 3), min_size=n, max_size=n)), np.int64)
    return pid, t // 3, t, is_e, codes


def bursts_by_definition(pid, pane, t, is_e) -> list[int]:
    """A timestamp group (rows of one partition, pane and time) of E events only continues the
    burst of the group before it when that one was of E events only too, in the same partition
    and pane; any other group holding E events starts a burst."""
    out, number, before = [-1] * len(t), -1, None  # before: (partition, pane, only E events)
    i = 0
    while i < len(t):
        j = i
        while j < len(t) and (pid[j], pane[j], t[j]) == (pid[i], pane[i], t[i]):
            j += 1
        group = is_e[i:j]
        only_e = bool(group.all())
        if group.any():
            if not (only_e and before == (pid[i], pane[i], True)):
                number += 1
            for k in range(i, j):
                out[k] = number if is_e[k] else -1
        before = (pid[i], pane[i], only_e)
        i = j
    return out


@settings(max_examples=300, deadline=None)
@given(sorted_streams())
def test_window_bursts_follow_their_definition(stream):
    pid, pane, t, is_e, _ = stream
    assert window_bursts(pid, pane, t, is_e).tolist() == bursts_by_definition(pid, pane, t, is_e)


@settings(max_examples=300, deadline=None)
@given(sorted_streams(), st.sampled_from([1, 5, 1e300]))
def test_window_presence_lists_each_windows_types_and_e_events(stream, width):
    pid, _, t, is_e, codes = stream
    wpid, present, e_count = window_presence(pid, t // width, codes, is_e, 4)
    windows: dict[tuple, tuple[set, int]] = {}
    for p, w, c, e in zip(pid.tolist(), (t // width).tolist(), codes.tolist(), is_e.tolist()):
        types, count = windows.setdefault((p, w), (set(), 0))
        types.add(c if c >= 0 else 4)
        windows[(p, w)] = (types, count + e)
    assert wpid.tolist() == [p for p, _ in windows]  # in row order
    assert [set(np.flatnonzero(row).tolist()) for row in present] == [
        types for types, _ in windows.values()
    ]
    assert e_count.tolist() == [count for _, count in windows.values()]


def _next_workload(n: int) -> str:
    others = ["A", "C", "D", "E", "F", "G", "H"]
    return kleene_sharing_workload(
        n,
        "B",
        others,
        returns="COUNT(*), SUM(B.x)",
        where=["B.y < NEXT(B).y"],
        within="1 min",
    )


def _assert_same_tables(got: dict[str, pa.Table], want: dict[str, pa.Table]) -> None:
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].schema.equals(want[name].schema), name
        for col in want[name].column_names:
            a, b = got[name].column(col).to_pylist(), want[name].column(col).to_pylist()
            if pa.types.is_floating(want[name].schema.field(col).type):
                np.testing.assert_allclose(np.array(a, float), np.array(b, float), rtol=1e-9)
            else:
                assert a == b, (name, col)


@pytest.mark.parametrize(
    ("queries", "events", "analysed"),
    [
        (5, 20_000, False),  # the sample's sharing costs 3.4x the queries' own trees
        (40, 20_000, True),  # 0.8x: analysed, and shared
        (5, 6_000, True),  # sampled whole: analysed whole, as before the gate
    ],
)
def test_dynamic_analyses_a_window_set_only_where_its_sample_may_pay(queries, events, analysed):
    table = kleene_stream(
        events, seed=5, types=tuple("ABCDEFGH"), mean_burst=20.0, mean_other_run=3.0
    )
    text = _next_workload(queries)
    stats = gpu_hamlet.RunStats()
    got = gpu_hamlet.aggregate(table, text, sharing="dynamic", numeric="float", stats=stats)
    (s,) = stats.sets
    assert s.loses_on_sample is not analysed
    assert (s.bursts > 0) is analysed
    if queries == 40:
        assert s.shared == s.bursts
    if not analysed:
        assert "not analysed: on a sample of the rows, sharing its bursts" in stats.describe()
    _assert_same_tables(got, gpu_hamlet.aggregate(table, text, sharing="none", numeric="float"))

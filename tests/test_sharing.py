"""HAMLET sharing: the paper's worked examples, event-level snapshots, and shared vs alone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast
from unittest.mock import patch

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from compare import assert_matches_oracle, drawn_rows, events_to_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import oracle

import gpu_hamlet
from cpu_fallback.bursts import burst_ids
from gpu_hamlet.core.panes import panes
from gpu_hamlet.datagen import kleene_sharing_workload, kleene_stream, load_hamlet_stream
from gpu_hamlet.engine import fusion
from gpu_hamlet.engine.burst_slots import (
    burst_extents,
    collapsed_stream,
    matched_slots,
    run_lengths,
)
from gpu_hamlet.engine.evaluate import Context
from gpu_hamlet.engine.optimizer import (
    COST_MODELS,
    CPU_COSTS,
    EngineCostModel,
    choose_shared,
)
from gpu_hamlet.engine.options import SHARING_MODES, Options
from gpu_hamlet.engine.pruning import rows_may_complete
from gpu_hamlet.engine.query_rows import QueryRows
from gpu_hamlet.engine.row_sample import (
    SAMPLE_BLOCKS,
    SAMPLE_ROWS,
    KeptShares,
    PaneRuns,
    RowSample,
    mean_share,
    sample_rows,
)
from gpu_hamlet.engine.sharing import RunStats, SharedBursts, analyze, may_pay
from gpu_hamlet.query.plan import Windowing

PAPER_STREAM = Path(__file__).parent / "data" / "Paper_TestStream.txt"
PAPER_QUERIES = (
    "q1: RETURN COUNT(*) PATTERN SEQ(T1, T2+) WITHIN 100 s;"
    "q2: RETURN COUNT(*) PATTERN SEQ(T3, T2+) WITHIN 100 s"
)


def test_paper_figure_4_5_snapshots():
    """Shared execution of the running example: snapshot x is 2 for q1 and 1 for q2 at the first
    B burst, y is 34 and 19 at the second; 132 and 72 trends."""
    events = load_hamlet_stream(PAPER_STREAM)
    stats = RunStats()
    res = gpu_hamlet.aggregate(events, PAPER_QUERIES, sharing="static", stats=stats, backend="cpu")
    assert stats.snapshots == {"q1": [2.0, 34.0], "q2": [1.0, 19.0]}
    assert res["q1"].column("count").to_pylist() == [132]
    assert res["q2"].column("count").to_pylist() == [72]
    (s,) = stats.sets
    assert (s.bursts, s.shared, s.graphlet_snapshots, s.event_snapshots) == (2, 2, 2, 0)


def test_analysis_sets_template_and_pane():
    wl = gpu_hamlet.parse_workload(
        "a: RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 10 min;"
        "b: RETURN COUNT(*) PATTERN SEQ(D, B+) WITHIN 15 min SLIDE 5 min;"
        "c: RETURN COUNT(*) PATTERN SEQ(A, B+) GROUPBY g WITHIN 10 min;"
        "d: RETURN COUNT(*) PATTERN SEQ(A, C+) WITHIN 4 min"
    )
    an = analyze(wl)
    (s,) = an.sets  # c groups differently; C+ occurs once
    assert s.kleene_type == "B" and s.names == ("a", "b")
    assert s.pane_ms == 5 * 60_000
    assert an.pane_ms == 60_000
    tmpl = s.merged_template()
    assert tmpl[("B", "B")] == ("a", "b")
    assert tmpl[("A", "B")] == ("a",) and tmpl[("D", "B")] == ("b",)
    assert tmpl[("B", "END")] == ("b",) and tmpl[("C", "END")] == ("a",)
    assert "sharable set B+: a, b" in an.describe()


def _burst_events(xs: list[int]) -> list[dict]:
    """A1 then a burst of B (x values given, distinct times) then C, D."""
    ev = [{"time": 1, "type": "A", "x": 0}, {"time": 2, "type": "D", "x": 0}]
    ev += [{"time": 3 + i, "type": "B", "x": x} for i, x in enumerate(xs)]
    ev += [{"time": 3 + len(xs), "type": "C", "x": 0}]
    return ev


def test_event_level_snapshots_when_filters_differ_inside_a_burst():
    """Queries whose filters select different events of one burst need their own snapshots;
    results still equal the oracle."""
    text = (
        "f1: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) WHERE B.x < 5 WITHIN 100 s;"
        "f2: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 100 s;"
        "f3: RETURN COUNT(*), MAX(B.x) PATTERN SEQ(D, B+) WHERE B.x < 5 WITHIN 100 s;"
        "f4: RETURN COUNT(B) PATTERN SEQ(D, B+, C) WITHIN 100 s"
    )
    events = _burst_events([1, 7, 2, 9, 3, 4, 8, 1])
    wl = gpu_hamlet.parse_workload(text)
    expected = oracle(events, wl)
    for mode in ("static", "dynamic", "none"):
        stats = RunStats()
        got = gpu_hamlet.aggregate(
            events_to_table(events), text, sharing=mode, stats=stats, backend="cpu"
        )
        assert_matches_oracle(got, expected, wl, "exact")
        if mode == "static":
            (s,) = stats.sets
            # f1 and f3 match the same events, f2 and f4 all of them: two classes.
            assert (s.bursts, s.graphlet_snapshots, s.event_snapshots) == (1, 1, 1)


def test_dynamic_choice_follows_the_cost_model():
    b = np.array([1.0, 2.0, 50.0, 50.0])
    k = np.array([2.0, 2.0, 50.0, 1.0])
    width = 2 * k
    chans = np.ones(4)
    got = choose_shared("dynamic", b, k, width, chans, CPU_COSTS)
    want = CPU_COSTS.benefit(b, k, width, chans) > 0
    assert (got == want).all()
    assert got[2] and not got[0]  # long burst, many queries: share; single event: do not
    assert choose_shared("static", b, k, width, chans, CPU_COSTS).all()
    assert not choose_shared("none", b, k, width, chans, CPU_COSTS).any()


#: CPU_COSTS without the fixed costs of sharing in a call, for tests of the per-burst
#: decisions on inputs small enough that those costs alone would share nothing.
NO_FIXED_COSTS = replace(CPU_COSTS, set_s=0.0, query_s=0.0, set_row_s=0.0, set_run_s=0.0)


def test_splits_and_merges_are_counted():
    """Bursts alternating between one and many filtered-in events flip the dynamic decision."""
    text = ";".join(
        f"s{i}: RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE A.x < {i + 1} WITHIN 1000 s"
        for i in range(6)
    )
    events, t = [], 0
    for burst in (40, 1, 40, 1, 40):
        events.append({"time": t, "type": "A", "x": 0})
        t += 1
        for _ in range(burst):
            events.append({"time": t, "type": "B", "x": 0})
            t += 1
    stats = RunStats()
    with patch.dict(COST_MODELS, {"cpu": NO_FIXED_COSTS}):
        got = gpu_hamlet.aggregate(
            events_to_table(events), text, stats=stats, numeric="float", backend="cpu"
        )
    (s,) = stats.sets
    assert (s.bursts, s.shared, s.unshared) == (5, 3, 2)
    assert (s.splits, s.merges) == (2, 2)
    alone = gpu_hamlet.aggregate(
        events_to_table(events), text, sharing="none", numeric="float", backend="cpu"
    )
    for name in got:
        assert got[name].equals(alone[name])


#: Bursts of 4 events pay shared, of 1 do not (`_mixed_groups`).
MIXED_GROUPS_MODEL = EngineCostModel(base_s=1.0, event_s=1.0, coef_s=0.5, class_s=0.0, macro=1.5)


def _mixed_groups(groups: str = "uf") -> tuple[str, list[dict]]:
    """Three queries `u` without filters on B and three `f` with B.x < 5 (those of `groups`;
    their filters on A keep every A, and keep them from being equal, which runs them once), and
    three bursts of 4 B after an A: u matches 4 B in each, f 4, 1 and 4."""
    text = ";".join(
        [
            f"u{i}: RETURN COUNT(*), SUM(B.x) PATTERN SEQ(A, B+) WHERE A.x < {i + 1} WITHIN 100 s"
            for i in range(3)
        ]
        * ("u" in groups)
        + [
            f"f{i}: RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.x < 5 AND A.x < {i + 1} WITHIN 100 s"
            for i in range(3)
        ]
        * ("f" in groups)
    )
    events, t = [], 0
    for xs in ([0] * 4, [9, 9, 1, 9], [0] * 4):
        events.append({"time": t, "type": "A", "x": 0})
        t += 1
        for x in xs:
            events.append({"time": t, "type": "B", "x": x})
            t += 1
    return text, events


def test_a_group_that_mixes_shared_and_unshared_bursts_reads_its_own_stream():
    """A filter group that shares some analysed bursts and runs others alone reads the set's
    slots with those others expanded into their events (`SharedBursts._group_stream`), cached
    for the group's queries, rather than each query rebuilding its rows from all events: the
    unshared burst's one matching event is a plain row, the shared bursts macro rows, and the
    results equal the oracle's and sharing="none"'s in every numeric mode."""
    text, events = _mixed_groups()
    table = events_to_table(events)
    real = SharedBursts.compressed
    read: dict[str, tuple] = {}

    def recorded(self, q, *args, **kwargs):
        read[q.name] = got = real(self, q, *args, **kwargs)
        return got

    model = {"cpu": MIXED_GROUPS_MODEL}
    wl = gpu_hamlet.parse_workload(text)
    expected = oracle(events, wl)
    for numeric in ("exact", "float", "bigint"):
        stats = RunStats()
        with patch.object(SharedBursts, "compressed", recorded), patch.dict(COST_MODELS, model):
            got = gpu_hamlet.aggregate(  # (HAMLET's bursts: the model's plan shares start(A))
                table, text, sharing="hamlet", numeric=numeric, stats=stats, backend="cpu",
                on_overflow="null",
            )  # fmt: skip
        assert_matches_oracle(got, expected, wl, numeric)
        alone = gpu_hamlet.aggregate(table, text, numeric=numeric, sharing="none", backend="cpu")
        for name in got:
            assert got[name].equals(alone[name])
        (s,) = stats.sets
        # One class per burst but the middle one, where f's (one event) runs unshared.
        assert (s.bursts, s.shared, s.graphlet_snapshots, s.event_snapshots) == (3, 3, 3, 0)
        rows, seg = read["f0"][1], read["f0"][4]
        assert (seg >= 0).sum() == 2  # the outer bursts; plain rows: the A's and the middle 1
        assert sorted(np.asarray(rows)[seg < 0].tolist()) == [0, 5, 8, 10]
        assert (read["u0"][4] >= 0).sum() == 3  # u shares every burst


def test_dynamic_weighs_the_streams_filter_groups_read_of_their_own():
    """A filter group that shares some bursts and not others reads a stream of its own, made
    per row of the set (EngineCostModel.stream_row_s; bench_sharing.py's 100 queries over
    short bursts in 9 filter groups spent about 10 ms on each, more than sharing gained).
    Where those streams cost more than all the gains, `dynamic` shares none; a set whose
    groups share all the bursts they match builds no such stream and still shares; the results
    equal sharing="none" either way."""
    costly = replace(MIXED_GROUPS_MODEL, stream_row_s=1e3)
    for groups, model, shared in (
        ("uf", MIXED_GROUPS_MODEL, 3),  # f runs the middle burst alone: a stream of its own
        ("uf", costly, 0),
        ("u", costly, 3),  # u shares every burst: it reads the set's slots
    ):
        text, events = _mixed_groups(groups)
        table = events_to_table(events)
        stats = RunStats()
        with patch.dict(COST_MODELS, {"cpu": model}):
            got = gpu_hamlet.aggregate(table, text, stats=stats, backend="cpu")
        (s,) = (s for s in stats.sets if not s.stage)  # B+ (the model's plan may share A too)
        assert (s.bursts, s.shared, s.below_fixed_costs) == (3, shared, not shared)
        alone = gpu_hamlet.aggregate(table, text, sharing="none", backend="cpu")
        assert all(got[n].equals(alone[n]) for n in alone)


@st.composite
def sharing_cases(draw):
    """2 to 4 queries sharing B+ (same grouping), varied neighbours, filters on B, aggregates and
    windows; and a bursty stream of A, B, C, D with duplicate timestamps."""
    group = draw(st.sampled_from(["", " GROUPBY g", " WHERE [g]"]))
    queries = []
    for i in range(draw(st.integers(2, 4))):
        first = draw(st.sampled_from(["A", "D", None]))
        last = draw(st.sampled_from(["C", None]))
        elems = ([first] if first else []) + ["B+"] + ([last] if last else [])
        aggs = draw(
            st.sampled_from(
                [
                    "COUNT(*)",
                    "COUNT(*), SUM(B.x)",
                    "COUNT(B), MIN(B.x)",
                    "AVG(B.y), MAX(B.y)",
                    "COUNT(*), COUNT(B), SUM(B.y)",
                ]
            )
        )
        conds = (
            [f"B.x {draw(st.sampled_from(['<', '>=', '!=']))} {draw(st.integers(0, 4))}"]
            if draw(st.booleans())
            else []
        )
        where = ""
        if group.startswith(" WHERE"):
            where = " WHERE [g]" + "".join(f" AND {c}" for c in conds)
        elif conds:
            where = " WHERE " + " AND ".join(conds)
        w = draw(st.sampled_from([6, 12]))
        slide = draw(st.sampled_from([w, w // 2, w // 3]))
        grp = group if group == " GROUPBY g" else ""
        queries.append(
            f"s{i}: RETURN {aggs} PATTERN SEQ({', '.join(elems)}){where}{grp} "
            f"WITHIN {w} s SLIDE {slide} s"
        )
    events, t = [], 0
    for _ in range(draw(st.integers(1, 4))):
        for ty in draw(st.lists(st.sampled_from("ACD"), min_size=0, max_size=2)):
            events.append((t, ty))
            t += draw(st.integers(0, 1))
        for _ in range(draw(st.integers(1, 7))):
            events.append((t, "B"))
            t += draw(st.integers(0, 1))
    return ";\n".join(queries), drawn_rows(draw, events, "ABCD")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sharing_cases(), st.sampled_from(["exact", "float", "bigint"]), st.floats(0.0, 30.0))
def test_shared_bursts_match_oracle(case, numeric, class_cost):
    """static, dynamic and none agree with the oracle; the dynamic optimizer runs with cost
    constants drawn so that its per-burst decisions (and pruned bursts) vary."""
    text, events = case
    model = EngineCostModel(base_s=1.0, event_s=1.0, coef_s=0.5, class_s=class_cost, macro=1.5)
    wl = gpu_hamlet.parse_workload(text)
    expected = oracle(events, wl, with_magnitudes=True)
    table = events_to_table(events)
    results = {}
    for mode in ("static", "dynamic", "none"):
        stats = RunStats()
        with patch.dict(COST_MODELS, {"cpu": model}):
            results[mode] = gpu_hamlet.aggregate(
                table, text, sharing=mode, numeric=numeric, stats=stats, backend="cpu"
            )
        assert_matches_oracle(results[mode], expected, wl, numeric)
        if mode == "static":
            assert sum(s.shared for s in stats.sets) == sum(s.bursts for s in stats.sets)
    if numeric != "float":
        for name in results["none"]:
            assert results["static"][name].equals(results["none"][name])
            assert results["dynamic"][name].equals(results["none"][name])


def _pruned_as_dense(events, text: str, mode: str) -> list[str]:
    """Runs the workload checking that each query's slots found from its start and end slots
    through the set's per-type index are exactly those the one-pass test
    (pruning.may_complete) keeps from all the slots it matches, per partition within the
    window length, or per (partition, window) with tumbling windows; the queries checked,
    sorted (queries' rows are built on several threads)."""
    real = SharedBursts.compressed
    checked = []

    def both(self, q, tpl, matcher, within, prune=True, window=None):
        got = real(self, q, tpl, matcher, within, prune, window)
        if got is not None and prune:
            full = real(self, q, tpl, matcher, within, prune=False)
            run, bound = full[3], within
            if window is not None:
                change = np.zeros(run.shape[0], np.int64)
                change[panes(full[3], full[2], window)[1]] = 1
                run, bound = np.cumsum(change), None
            pos = full[5]
            sel = rows_may_complete(run, full[2], pos >= 0, pos == 0, pos == tpl.k - 1, bound)
            for a, b in zip(got, full):
                np.testing.assert_array_equal(a, b[sel])
            checked.append(q.name)
        return got

    with patch.object(SharedBursts, "compressed", both):
        gpu_hamlet.aggregate(events, text, sharing=mode, backend="cpu")
    return sorted(checked)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sharing_cases(), st.sampled_from(["static", "dynamic", "hamlet"]))
def test_set_stream_pruning_equals_the_dense_test(case, mode):
    text, events = case
    _pruned_as_dense(events_to_table(events), text, mode)


def test_set_stream_pruning_runs_on_the_paper_example():
    events = load_hamlet_stream(PAPER_STREAM)
    assert _pruned_as_dense(events, PAPER_QUERIES, "static") == ["q1", "q2"]


def test_sharable_set_stream_ignores_other_sets_queries():
    """A sharable set's stream holds the events its own queries match: the C+ set's bursts are
    the same whether or not queries over A and B (another set) run in the same call (they used
    to split its C burst, through a mask cache shared by all sets)."""
    events = pa.table({"time": [0, 1, 2, 3, 4, 5], "type": ["D", "C", "B", "C", "A", "C"]})
    # (COUNT(C) named as COUNT(*)'s column: the queries cannot run as one, `run_as`)
    c_set = (
        "RETURN COUNT(*) PATTERN SEQ(D, C+) WITHIN 10 s;"
        "RETURN COUNT(C) AS count PATTERN SEQ(D, C+) WITHIN 10 s"
    )
    b_set = (
        "RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 10 s;"
        "RETURN COUNT(B) AS count PATTERN SEQ(A, B+) WITHIN 10 s;"
    )

    def c_stats(text: str) -> dict:
        stats = gpu_hamlet.RunStats()
        gpu_hamlet.aggregate(events, text, backend="cpu", sharing="static", stats=stats)
        return next(s.as_dict() for s in stats.sets if s.kleene_type == "C")

    alone = c_stats(c_set)
    assert alone["bursts"] == 1 and alone["burst_events"] == 3
    assert c_stats(b_set + c_set) == {**alone, "queries": ("q3", "q4")}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_burst_slots_equal_their_numpy_definition(data):
    """The compiled burst extents, collapsed stream and matched slots
    (gpu_hamlet/engine/burst_slots.py) equal what they replace: bincounts over the burst events,
    the stream masked at each kept burst's first event, gathered field by field, and a query's
    slots in ranges of it, masked where its code has no position."""
    n = data.draw(st.integers(0, 60))
    pid = np.sort(np.asarray(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), int))
    time = np.asarray(data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)), np.int64)
    time = time[np.lexsort((time, pid))]
    is_e = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    burst_id = burst_ids(pid, np.zeros(n, np.int64), time, is_e)
    nb = int(burst_id.max()) + 1 if n and burst_id.max() >= 0 else 0
    first, count = burst_extents(burst_id)
    np.testing.assert_array_equal(count, np.bincount(burst_id[burst_id >= 0], minlength=nb))
    np.testing.assert_array_equal(first, [np.flatnonzero(burst_id == b)[0] for b in range(nb)])
    kept = np.asarray(data.draw(st.lists(st.booleans(), min_size=nb, max_size=nb)), bool)
    kept_id = np.append(np.where(kept, np.cumsum(kept) - 1, -1), -1)  # id -1 reads the last
    renumbered = kept_id[burst_id]
    at_first = renumbered >= 0
    at_first[1:] &= renumbered[1:] != renumbered[:-1]
    slots = np.flatnonzero((renumbered < 0) | at_first)
    set_idx = np.arange(n, dtype=np.int64) * 2 + 1
    rows, codes = set_idx * 3, (set_idx % 5).astype(np.int32)
    burst_of = np.full(2 * n + 1, -7, np.int64)
    got = collapsed_stream(burst_id, kept_id, set_idx, pid, rows, time, codes, burst_of)
    want = (set_idx, pid, rows, time, renumbered, codes)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w[slots])
    np.testing.assert_array_equal(burst_of[set_idx], renumbered)
    assert (burst_of[::2] == -7).all()  # only the set's events are written
    # A query's matched slots in ranges of the stream: the ranges, positions, the filters'
    # mask and gathers.
    cuts = np.sort(np.asarray(data.draw(st.lists(st.integers(0, n), max_size=6)), np.int64))
    lo, hi = cuts[0::2][: cuts.size // 2], cuts[1::2]
    pos_of_code = np.asarray(data.draw(st.lists(st.integers(-1, 2), min_size=5, max_size=5)))
    drop = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    seg = np.where(is_e, time, -1)
    idx = np.concatenate([np.zeros(0, np.int64)] + [np.arange(a, b) for a, b in zip(lo, hi)])
    idx = idx[(pos_of_code[codes[idx]] >= 0) & ~drop[idx]]
    got = matched_slots(lo, hi, codes, pos_of_code, drop, set_idx, rows, time, pid, seg)
    want = (set_idx, rows, time, pid, seg, pos_of_code[codes])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w[idx])
        assert g.dtype == w.dtype


def _burst_ids_by_definition(pid, pane, time, is_e) -> list[int]:
    """Maximal runs of timestamp groups made only of Kleene events, within a partition and
    pane, numbered from 0 along the stream; -1 elsewhere."""
    keys = list(zip(pid.tolist(), pane.tolist(), time.tolist()))
    pure = {k: all(e for k2, e in zip(keys, is_e.tolist()) if k2 == k) for k in keys}
    out, last, prev = [], -1, None  # prev: the previous group's (pid, pane) and purity
    for i, k in enumerate(keys):
        if i == 0 or keys[i - 1] != k:
            if pure[k] and (prev is None or prev[0] != k[:2] or not prev[1]):
                last += 1
            prev = (k[:2], pure[k])
        out.append(last if pure[k] else -1)
    return out


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_burst_ids_follow_their_definition(data):
    n = data.draw(st.integers(0, 40))
    cols = [
        np.asarray(data.draw(st.lists(st.integers(0, hi), min_size=n, max_size=n)), np.int64)
        for hi in (2, 1, 5)
    ]
    order = np.lexsort(cols[::-1])
    pid, pane, time = (c[order] for c in cols)
    is_e = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    got = burst_ids(pid, pane, time, is_e)
    assert got.tolist() == _burst_ids_by_definition(pid, pane, time, is_e)


def test_dynamic_shares_nothing_where_the_fixed_costs_outweigh_any_gain():
    """Sharing costs each call a set's analysis and each query its reading of the set
    (EngineCostModel.set_s, query_s), which the per-burst decisions leave out. Where the set's
    Kleene events are too few for any gain to pay for them, `dynamic` does not analyse it; where
    the analysed gains add up to less than the queries' reading, it shares none; either way the
    results equal sharing="none" and the stats say why."""
    text = ";".join(
        f"s{i}: RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE A.x < {i + 1} WITHIN 1000 s"
        for i in range(6)
    )
    events = events_to_table(
        [{"time": t, "type": "A" if t % 10 == 0 else "B", "x": 0} for t in range(60)]
    )
    alone = gpu_hamlet.aggregate(events, text, sharing="none", numeric="exact", backend="cpu")
    # 6 runs of 9 B events among 60 rows, 6 queries of 2 channels (1 weighted), 2 kernel runs
    # each
    assert 6 * CPU_COSTS.benefit(9, 6, 12, 1) <= CPU_COSTS.fixed(60, 6, 12)
    stats = RunStats()
    got = gpu_hamlet.aggregate(events, text, stats=stats, numeric="exact", backend="cpu")
    (s,) = stats.sets
    assert s.below_fixed_costs and (s.bursts, s.shared) == (0, 0)
    assert "not analysed" in stats.describe()
    assert all(got[n].equals(alone[n]) for n in alone)
    # Analysed (a negative set_s lets the set through may_pay), every burst worth sharing alone,
    # but the queries' reading of the set costs more than all of their gains.
    costly = replace(CPU_COSTS, set_s=-100.0, query_s=1.0)
    for model, shared in ((NO_FIXED_COSTS, 6), (costly, 0)):
        stats = RunStats()
        with patch.dict(COST_MODELS, {"cpu": model}):
            got = gpu_hamlet.aggregate(events, text, stats=stats, numeric="exact", backend="cpu")
        (s,) = stats.sets
        assert (s.bursts, s.shared, s.below_fixed_costs) == (6, shared, not shared)
        assert all(got[n].equals(alone[n]) for n in alone)
    assert "gains were below the fixed costs" in stats.describe()


def _context(events: pa.Table, text: str, sharing: str = "dynamic") -> Context:
    return Context.of(events, text, Options("cpu", sharing, "float", "null", "time", "type"))


def test_a_small_row_sample_is_every_row():
    """Up to SAMPLE_ROWS rows, a `RowSample` is every row: its runs are `run_lengths`' over
    all rows, and for up to SAMPLE_QUERIES queries `kept_share` is the mean share of the Kleene
    events that each one's rows keep when it runs alone (`QueryRows` with sharing="none"), over
    tumbling and sliding windows, with and without filters."""
    events = kleene_stream(3_000, seed=5, types=("A", "B", "C", "D"), mean_burst=8.0)
    shapes = ["SEQ(A, B+, C)", "SEQ(D, B+)", "SEQ(B+, C)", "SEQ(C, B+, D)"]
    windows = ["WITHIN 20 s", "WITHIN 40 s SLIDE 10 s", "WITHIN 15 s", "WITHIN 1 min"]
    text = ";".join(
        f"q{i}: RETURN COUNT(*) PATTERN {p}{' WHERE B.x < 4' if i % 2 else ''} {w}"
        for i, (p, w) in enumerate(zip(shapes, windows))
    )
    ctx = _context(events, text)
    (sset,) = analyze(ctx.runs).sets
    keys = ctx.parts.keys(sset.queries[0].partition_attrs, 0)
    code = ctx.ev.code_of("B")
    alone = []
    for q in sset.queries:
        rows = QueryRows(
            ctx.ev, ctx.parts, ctx.attrs, ctx.plans[q.name], ctx.matcher, [], ctx.options[q.name],
            ctx.be,
        ).rows  # fmt: skip
        alone.append(np.count_nonzero(ctx.ev.type_codes[rows] == code))
    sample = RowSample.of(keys)
    role = np.zeros(4, np.int8)
    role[code], role[ctx.ev.code_of("C")] = 1, -1
    assert sample.scale == 1.0
    assert sample.run_lengths(role).tolist() == run_lengths(keys.codes, keys.pid, role).tolist()
    share = sample.kept_share(sset.queries, code, keys, ctx.plans, ctx.matcher, ctx.be.segments)
    total = np.count_nonzero(ctx.ev.type_codes == code)
    assert 0 < share < 1
    assert share == pytest.approx(np.mean(alone) / total, rel=1e-12)


def test_a_row_sample_takes_blocks_of_a_long_stream():
    """Beyond SAMPLE_ROWS rows the sample is SAMPLE_BLOCKS runs of consecutive rows spread
    evenly, and on a stationary stream its kept share is within a tenth of the exact one."""
    rows, first = sample_rows(100_000)
    size = SAMPLE_ROWS // SAMPLE_BLOCKS
    assert rows.shape[0] == SAMPLE_ROWS and np.all(np.diff(rows) > 0)
    assert np.flatnonzero(first).tolist() == list(range(0, SAMPLE_ROWS, size))
    assert np.all(np.diff(rows)[~first[1:]] == 1) and rows[-1] < 100_000
    events = kleene_stream(100_000, seed=3, types=("A", "B", "C", "D"), mean_burst=20.0)
    text = "q: RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 2 min"
    ctx = _context(events, text, "none")
    (q,) = ctx.runs
    keys = ctx.parts.keys(q.partition_attrs, 0)
    code = ctx.ev.code_of("B")
    rows = QueryRows(
        ctx.ev, ctx.parts, ctx.attrs, ctx.plans[q.name], ctx.matcher, [], ctx.options[q.name],
        ctx.be,
    ).rows  # fmt: skip
    exact = np.count_nonzero(ctx.ev.type_codes[rows] == code) / np.count_nonzero(
        ctx.ev.type_codes == code
    )
    sample = RowSample.of(keys)
    assert sample.scale == keys.codes.shape[0] / SAMPLE_ROWS
    share = sample.kept_share((q,), code, keys, ctx.plans, ctx.matcher, ctx.be.segments)
    assert 0.1 < exact < 0.9 and share == pytest.approx(exact, rel=0.1)  # 0.40 and 0.43


def test_kept_shares_are_each_querys_kept_events_of_some_types():
    """`KeptShares` (GLORIA's stage gate): per query, the share of its events of some types that
    its pruning keeps alone, the mean over the queries asked; queries that prune alike share
    one pass. SEQ(A, B) in tumbling windows of 10 s: the A at 15 has no B after it in its
    window, the B at 12 no A before it."""
    times = [1, 2, 12, 15, 21, 22, 23]
    table = pa.table(
        {
            "time": pa.array(np.asarray(times) * 1000, pa.timestamp("ms")),
            "type": ["A", "B", "B", "A", "A", "B", "B"],
        }
    )
    text = (
        "p: RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 10 s;\n"
        "q: RETURN COUNT(B) AS count PATTERN SEQ(A, B) WITHIN 10 s;\n"  # (not run as one with p)
        "r: RETURN COUNT(*) PATTERN SEQ(A, B) WITHIN 1 min"
    )
    ctx = _context(table, text)
    passes = []
    kept_by_code = RowSample.kept_by_code

    def spy(self, q, *args):
        passes.append(q.name)
        return kept_by_code(self, q, *args)

    with patch.object(RowSample, "kept_by_code", spy):
        shares = KeptShares(
            ctx.runs,
            lambda q: ctx.parts.keys(q.partition_attrs, len(q.groupby)),
            ctx.plans,
            ctx.matcher,
            ctx.be.segments,
            ctx.ev.code_of,
        )
        assert shares(("p",), ("A",)) == pytest.approx(2 / 3)
        assert shares(("p", "q"), ("B",)) == pytest.approx(3 / 4)
        assert shares(("q",), ("A", "B")) == pytest.approx(5 / 7)
        assert shares(("r",), ("A", "B")) == 1.0  # one window of a minute: every event
        assert shares(("p", "r"), ("Z",)) == 1.0  # no such events: nothing to weigh
    assert passes == ["p", "r"]  # q prunes as p does


def test_pane_runs_count_the_samples_runs_of_one_pane():
    """`PaneRuns`: the runs of the named queries' common pane (the gcd of their panes) among the
    sample's first n events, in the order given."""
    panes = {"ten": SimpleNamespace(seg=10), "four": SimpleNamespace(seg=4)}
    runs = PaneRuns(np.asarray([0, 1, 2, 10, 11, 25]), lambda n: cast(Windowing, panes[n]))
    assert runs(("ten",), 6) == 3 and runs(("ten",), 3) == 1 and runs(("ten",), 0) == 0
    assert runs(("ten", "four"), 6) == 4  # panes of 2: 0, 0, 1, 5, 5, 12
    # Float times in the engine's panes, floor(t / width): 1.0 // 0.1 is 9, floor(1.0 / 0.1) 10
    floats = PaneRuns(np.asarray([0.95, 1.0]), lambda n: cast(Windowing, SimpleNamespace(seg=0.1)))
    assert floats(("x",), 2) == 2


def test_dynamic_leaves_a_set_whose_queries_prune_most_bursts():
    """Over long bursts, a query SEQ(X, B+, Y) keeps only the bursts between an X and a Y
    within its window: the gain that `may_pay` estimates with every query running every burst
    passes the fixed costs, but scaled by the share the queries keep (`RowSample.kept_share`)
    it does not, so `dynamic` runs them alone (bench_sharing.py's bursts of 50 at 5 queries took
    1.2-1.3x `none` shared). Results equal sharing="none"."""
    events = kleene_stream(50_000, seed=3, types=tuple("ABCDEFGH"), mean_burst=50.0,
                           mean_other_run=3.0)  # fmt: skip
    text = kleene_sharing_workload(5, "B", list("ACDEFGH"))
    ctx = _context(events, text)
    (sset,) = analyze(ctx.runs).sets
    keys = ctx.parts.keys(sset.queries[0].partition_attrs, 0)
    args = (sset, ctx.ev, keys, ctx.plans, ctx.matcher, CPU_COSTS, ctx.be)
    with patch.object(RowSample, "kept_share", return_value=1.0):
        assert may_pay(*args)
    assert not may_pay(*args)
    stats = RunStats()
    got = gpu_hamlet.aggregate(events, text, stats=stats, backend="cpu")
    alone = gpu_hamlet.aggregate(events, text, sharing="none", backend="cpu")
    assert [s.below_fixed_costs for s in stats.sets] == [True]
    assert all(got[n].equals(alone[n]) for n in alone)


def test_a_batch_computes_its_queries_bursts_in_one_call():
    """Each query adds the bursts its macro rows stand for as its rows are built (`Ahead`), so
    the first query of a batch that needs coefficients computes those of every query in it in
    one kernel call, rather than each query the few it adds; one query at a time (a backend
    without batches holds as many rows as one fused run, engine/fusion.py: here none)
    computes its own. The results are sharing="none"'s either way."""
    from cpu_fallback import CpuBackend

    text = ";".join(
        f"s{i}: RETURN COUNT(*), SUM(B.x) PATTERN SEQ({a}, B+{c}) WITHIN 30 s"
        for i, (a, c) in enumerate([("A", ", C"), ("D", ", C"), ("A", ""), ("D", "")])
    )
    events, t = [], 0
    for k in range(40):  # an A or a D, a burst of B, then (every third time) a C
        events.append({"time": t, "type": "AD"[k % 2], "x": 0})
        events += [{"time": t + 1 + j, "type": "B", "x": j} for j in range(3 + k % 4)]
        t += 5 + k % 4
        if k % 3 == 0:
            events.append({"time": t - 1, "type": "C", "x": 0})
    table = events_to_table(events)
    real = CpuBackend.burst_coefficients
    made: dict[int, list[int]] = {1: [], 2: []}  # bursts computed per call, by threads
    for threads in made:
        be = CpuBackend(threads=threads)
        assert be.batched == (threads > 1)
        alone = gpu_hamlet.aggregate(table, text, sharing="none", numeric="float", backend=be)

        def recorded(self, ring, seg_id, *args, calls=made[threads]):
            calls.append(int(seg_id.max()) + 1)
            return real(self, ring, seg_id, *args)

        with (
            patch.object(CpuBackend, "burst_coefficients", recorded),
            patch.object(fusion, "FUSED_ROWS", 0),
        ):
            got = gpu_hamlet.aggregate(table, text, sharing="static", numeric="float", backend=be)
        assert all(got[n].equals(alone[n]) for n in alone)
    assert len(made[2]) == 1 and len(made[1]) > 1  # (queries keep bursts of their own)
    assert made[2][0] == sum(made[1])  # every burst a query keeps, once


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_run_lengths_bound_the_bursts(data):
    """`run_lengths` counts, per length, the runs of the Kleene type (role 1) between types that
    end one (role -1) within a partition, going over the types the set's stream may drop (role
    0); and every burst `burst_ids` finds in the stream left without those types lies in one
    run, so a convex gain with no gain at 0 (the optimizer's, per burst) sums to no more over
    the bursts than over the runs (`may_pay`)."""
    n = data.draw(st.integers(0, 50))
    codes = np.asarray(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), np.int32)
    pid = np.sort(np.asarray(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), int))
    time = np.sort(np.asarray(data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))))
    time = time[np.lexsort((time, pid))]
    role = np.asarray([1, -1, 0, data.draw(st.sampled_from([-1, 0]))], np.int8)
    runs: list[int] = []
    b = 0
    for i in range(n):  # the definition, row by row
        if role[codes[i]] < 0 or (i and pid[i] != pid[i - 1]):
            runs.append(b)
            b = 0
        b += role[codes[i]] > 0
    runs = [r for r in [*runs, b] if r]
    hist = run_lengths(codes, pid, role)
    assert hist.tolist() == ([0] + np.bincount(runs)[1:].tolist() if runs else [0])
    kept = role[codes] != 0
    burst = burst_ids(pid[kept], np.zeros(int(kept.sum()), np.int64), time[kept], codes[kept] == 0)
    bursts = np.bincount(burst[burst >= 0]) if (burst >= 0).any() else np.zeros(0, int)
    for c in range(5):
        assert np.maximum(bursts - c, 0).sum() <= hist @ np.maximum(np.arange(hist.size) - c, 0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8),
    st.floats(0.0, 1.2),
)
def test_mean_share_stops_only_where_the_answer_is_known(shares, need):
    """`mean_share` asks for shares one by one: all of them, and their mean, unless the mean
    of two or more is under a quarter of `need`, or the others, all 1.0, would leave the mean
    below `need`: then its mean is below `need` as the mean of all is."""
    asked = []

    def ask():
        for x in shares:
            asked.append(x)
            yield x

    got = mean_share(ask(), need, len(shares))
    assert got == pytest.approx(float(np.mean(asked)))
    if len(asked) < len(shares):
        quarter = len(asked) >= 2 and sum(asked) < len(asked) * need / 4
        assert quarter or (got < need and float(np.mean(shares)) < need)
    assert mean_share(iter(()), need, 0) == 1.0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 50), min_size=1, max_size=60),
    st.integers(1, 100),
    st.integers(1, 4),
    st.integers(0, 3),
    st.sampled_from(sorted(COST_MODELS)),
)
def test_the_sharing_gates_first_bound_holds_every_gain(lengths, k, groups, channels, backend):
    """`may_pay` first bounds the gain by all the Kleene events in one run: for any runs (how
    many of each length), what the runs gain, each at most its own benefit and never below 0,
    is at most that bound, so the bound turns away only sets the full weighing turns away."""
    model = COST_MODELS[backend]
    runs = np.asarray(lengths, np.float64)
    b = np.arange(runs.shape[0], dtype=np.float64)
    per = model.benefit(b, k / groups, 2 * k / groups, channels)
    gain = groups * float(runs @ np.maximum(per, 0.0))
    events = float(runs @ b)
    most = groups * max(float(model.benefit(events, k / groups, 2 * k / groups, channels)), 0.0)
    assert gain <= most * (1 + 1e-12) + 1e-18


def test_float_times_share_only_within_one_pane():
    """Over float times a set's bursts were cut by the gcd of its queries' panes, and floor(t / p)
    over a divisor p of a pane does not nest into floor(t / pane) in floating point: 8.52 / 0.01
    is 851.99..., 8.52 / 0.12 is 71.0, so one burst held B@8.51 (q7's pane 70) and B@8.52 (its
    pane 71) and `static` lost q7's trend of window [8.52, 8.64) (a helper's hunt). Only queries
    of one pane share there; queries of one pane still do."""
    events = pa.table({"time": [8.51, 8.52, 8.58], "type": ["B", "B", "A"]})
    text = (
        "q7: RETURN COUNT(*) PATTERN SEQ(B+, A) WITHIN 120 ms;"
        "q12: RETURN COUNT(*) PATTERN B+ WITHIN 30 ms SLIDE 10 ms"
    )
    want = gpu_hamlet.aggregate(events, text, backend="cpu", sharing="none")
    assert want["q7"].column("count").to_pylist() == [1]
    for mode in SHARING_MODES:
        got = gpu_hamlet.aggregate(events, text, backend="cpu", sharing=mode)
        assert all(got[n].equals(want[n]) for n in want), mode
    same = text.replace("30 ms SLIDE 10 ms", "120 ms")
    stats = gpu_hamlet.RunStats()
    gpu_hamlet.aggregate(events, same, backend="cpu", sharing="static", stats=stats)
    assert [s.queries for s in stats.sets] == [("q7", "q12")]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), scale=st.sampled_from([0.01, 0.1, 0.003]))
def test_float_times_every_mode_as_none(seed, scale):
    """Events at float times (multiples of `scale` seconds, as float64 holds them) under
    queries of several panes: every sharing mode gives `none`'s tables, bit for bit in exact
    mode (a burst across a query's pane bound took events into another window)."""
    ev = kleene_stream(600, seed=seed, types=("A", "B", "C"), mean_burst=6.0, n_groups=2)
    seconds = ev.column("time").cast(pa.float64())  # (whole seconds in the generator)
    ev = ev.set_column(ev.schema.get_field_index("time"), "time", pc.multiply(seconds, scale))
    ms = [round(scale * 1000 * k) for k in (12, 3, 1)]
    text = (
        f"a: RETURN g, COUNT(*), SUM(B.x) PATTERN SEQ(A, B+, C) GROUPBY g WITHIN {ms[0]} ms;"
        f"b: RETURN COUNT(*) PATTERN SEQ(B+, C) WITHIN {ms[1]} ms SLIDE {ms[2]} ms;"
        f"c: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN {ms[1] * 2} ms SLIDE {ms[1]} ms"
    )
    want = gpu_hamlet.aggregate(ev, text, backend="cpu", sharing="none", on_overflow="null")
    assert any(t.num_rows for t in want.values())
    for mode in ("static", "hamlet", "dynamic"):
        got = gpu_hamlet.aggregate(ev, text, backend="cpu", sharing=mode, on_overflow="null")
        assert all(got[n].equals(want[n]) for n in want), mode


def test_stats_hold_one_run_and_the_snapshots_of_the_queries_asked_for():
    """A RunStats given again is emptied first: it listed the sets of every call it was given
    to and kept another call's snapshots where this one had none. Its snapshots are keyed by the
    queries asked for: the runs of alike queries ('abc[return]') and of an AND's sides
    ('both[left]') were listed beside them (helpers' hunt)."""
    events = pa.table(
        {"time": [1, 2, 3, 4, 5, 6], "type": ["A", "B", "B", "C", "B", "C"], "x": [1] * 6}
    )
    text = (
        "abc: RETURN COUNT(*) PATTERN SEQ(A, B+, C) WITHIN 10 s;"
        "abc2: RETURN SUM(B.x) PATTERN SEQ(A, B+, C) WITHIN 10 s;"
        "ab: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 10 s;"
        "both: RETURN COUNT(*) PATTERN A AND C WITHIN 10 s"
    )
    used = RunStats()
    for sharing in ("static", "static", "hamlet", "none"):
        gpu_hamlet.aggregate(events, text, sharing=sharing, stats=used, backend="cpu")
        fresh = RunStats()
        gpu_hamlet.aggregate(events, text, sharing=sharing, stats=fresh, backend="cpu")
        assert used == fresh, sharing
    fresh = RunStats()
    gpu_hamlet.aggregate(events, text, sharing="static", stats=fresh, backend="cpu")
    assert set(fresh.snapshots) == {"abc", "abc2", "ab"}
    assert fresh.snapshots["abc"] == fresh.snapshots["abc2"] and fresh.snapshots["abc"]

"""GLORIA's shared stages (gpu_hamlet/engine/stage_sharing.py): runs of Kleene cycles such as
`SEQ(P, T)+`, of SEQ transitions and of chains of them, computed once per Q-set and applied per
query as block macro rows, give the oracle's results in every numeric mode and on both
backends."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import cast
from unittest.mock import patch

import numpy as np
import pyarrow as pa
import pytest
from compare import assert_matches_oracle, drawn_rows, events_to_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import oracle

import gpu_hamlet
from gpu_hamlet.engine import stage_sharing
from gpu_hamlet.engine.events import EventFrame
from gpu_hamlet.engine.optimizer import CPU_COSTS
from gpu_hamlet.engine.plan_search import StreamStats
from gpu_hamlet.engine.sharing import RunStats
from gpu_hamlet.engine.stage_sharing import (
    GATE_SAMPLE,
    SAMPLE,
    SharedStages,
    block_of,
    merged_stages,
    shareable_stages,
    shared_chains,
    stage_plan,
    sub_template,
)
from gpu_hamlet.query.pattern import PatternElement, Seq
from gpu_hamlet.query.plan import Template

CYCLES = ("SEQ(P, T)+", "SEQ(P, T+, U)+", "SEQ(P, SEQ(T, U)+)+")


@st.composite
def cycle_cases(draw):
    """2 to 4 queries around one Kleene cycle of several types (same grouping), varied
    neighbours, filters on P, aggregates and windows; and a bursty stream of P, T, U runs
    interrupted by A, C and D, with duplicate timestamps."""
    cycle = draw(st.sampled_from(CYCLES))
    group = draw(st.sampled_from(["", " GROUPBY g"]))
    queries = []
    for i in range(draw(st.integers(2, 4))):
        first = draw(st.sampled_from(["A", "D", None]))
        last = draw(st.sampled_from(["C", None]))
        elems = ([first] if first else []) + [cycle] + ([last] if last else [])
        aggs = draw(
            st.sampled_from(
                [
                    "COUNT(*)",
                    "COUNT(*), SUM(T.x)",
                    "COUNT(P), MIN(P.x)",
                    "AVG(T.y), MAX(P.y)",
                    "COUNT(*), COUNT(T), SUM(P.y)",
                ]
            )
        )
        where = f" WHERE P.x {draw(st.sampled_from(['<', '>=']))} 2" if draw(st.booleans()) else ""
        w = draw(st.sampled_from([6, 12]))
        slide = draw(st.sampled_from([w, w // 2, w // 3]))
        queries.append(
            f"c{i}: RETURN {aggs} PATTERN SEQ({', '.join(elems)}){where}{group} "
            f"WITHIN {w} s SLIDE {slide} s"
        )
    events, t = [], 0
    body = "PTU" if "U" in cycle else "PT"
    for _ in range(draw(st.integers(1, 4))):
        for ty in draw(st.lists(st.sampled_from("ACD"), min_size=0, max_size=2)):
            events.append((t, ty))
            t += draw(st.integers(0, 1))
        for ty in draw(st.lists(st.sampled_from(body), min_size=1, max_size=7)):
            events.append((t, ty))
            t += draw(st.integers(0, 1))
    return ";\n".join(queries), drawn_rows(draw, events, "ACDPTU")


@st.composite
def seq_cases(draw):
    """2 to 4 SEQ queries over the types A to E in that order, most of them in common (so that
    they meet on start and tran pools, and chain them), one type possibly under Kleene plus
    (HAMLET's burst), with filters, aggregates and windows varied; a stream of runs of one
    type, duplicate timestamps included."""
    group = draw(st.sampled_from(["", " GROUPBY g"]))
    base = draw(st.sets(st.sampled_from("ABCDE"), min_size=2, max_size=3))
    queries = []
    for i in range(draw(st.integers(2, 4))):
        types = sorted(base | draw(st.sets(st.sampled_from("ABCDE"), max_size=1)))
        plus = draw(st.sampled_from([None, None, None, *types]))
        elems = [t + ("+" if t == plus else "") for t in types]
        f = draw(st.sampled_from([None, None, *types]))
        where = f" WHERE {f}.x {draw(st.sampled_from(['<', '>=']))} 2" if f else ""
        aggs = draw(
            st.sampled_from(
                [
                    "COUNT(*)",
                    f"COUNT(*), SUM({types[-1]}.x)",
                    f"COUNT({types[0]}), MIN({types[1]}.x)",
                    f"AVG({types[1]}.y), MAX({types[0]}.y)",
                ]
            )
        )
        w = draw(st.sampled_from([6, 12]))
        slide = draw(st.sampled_from([w, w // 2, w // 3]))
        queries.append(
            f"s{i}: RETURN {aggs} PATTERN SEQ({', '.join(elems)}){where}{group} "
            f"WITHIN {w} s SLIDE {slide} s"
        )
    events, t = [], 0
    for _ in range(draw(st.integers(2, 8))):
        ty = draw(st.sampled_from("ABCDE"))
        for _ in range(draw(st.integers(1, 5))):
            events.append((t, ty))
            t += draw(st.integers(0, 1))
    return ";\n".join(queries), drawn_rows(draw, events, "ABCDE")


def _run(table, text, numeric, backend, share, merged=False):
    """dynamic sharing with each run shared where `share(length)` says; the stats. With
    `merged`, each class of a pool is split in two (as a plan may keep queries apart; a half
    of one query shares nothing), and the stages run are `merged_stages`' (the halves met
    again where a stretch allows), the largest first, each (query, pool) in one."""
    stats = RunStats()

    def worth(self, length, nq, model):
        return share(length)

    def every_class(workload, ev, model, *gate):  # the search's plan shares only where it pays
        by_set: dict = {}
        for pool, groups in shareable_stages(workload)[1]:
            for g in groups:
                halves = [g[: len(g) // 2], g[len(g) // 2 :]] if merged else [g]
                for h in halves:
                    by_set.setdefault(h, []).append(pool)
        chains = shared_chains(by_set)
        if not merged:
            return None, chains
        taken: set = set()
        out = []
        stages = merged_stages(shareable_stages(workload).template, chains)
        for chain, names in sorted(stages, key=lambda s: -len(s[0]) * len(s[1])):
            held = {(n, p.key) for n in names for p in chain}
            if not held & taken:
                taken |= held
                out.append((" ".join(p.key for p in chain), chain, names))
        return None, out

    with (
        patch.object(SharedStages, "_worth", worth),
        patch.object(SharedStages, "_saved", lambda *args: math.inf),
        patch("gpu_hamlet.engine.evaluate.stage_plan", every_class),
    ):
        got = gpu_hamlet.aggregate(
            table, text, sharing="dynamic", numeric=numeric, stats=stats, backend=backend
        )
    return got, stats


def _check(case, numeric, backend, share, merged=False):
    text, events = case
    wl = gpu_hamlet.parse_workload(text)
    expected = oracle(events, wl, with_magnitudes=True)
    table = events_to_table(events)
    got, stats = _run(table, text, numeric, backend, share, merged)
    assert_matches_oracle(got, expected, wl, numeric)
    if numeric != "float":
        alone = gpu_hamlet.aggregate(table, text, sharing="none", numeric=numeric, backend="cpu")
        for name in alone:
            assert got[name].equals(alone[name])
    return stats


SHARE = {
    "every run": lambda length: length > 0,
    "runs of 3 or more": lambda length: length >= 3,
}


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cycle_cases(), st.sampled_from(["exact", "float", "bigint"]), st.sampled_from(list(SHARE)))
def test_shared_cycles_match_oracle(case, numeric, share):
    _check(case, numeric, "cpu", SHARE[share])


@pytest.mark.gpu
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cycle_cases(), st.sampled_from(["exact", "float", "bigint"]))
def test_shared_cycles_match_oracle_on_gpu(case, numeric):
    _check(case, numeric, "gpu", SHARE["every run"])


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seq_cases(),
    st.sampled_from(["exact", "float", "bigint"]),
    st.sampled_from(list(SHARE)),
    st.booleans(),
)
def test_shared_transitions_match_oracle(case, numeric, share, merged):
    _check(case, numeric, "cpu", SHARE[share], merged)


@pytest.mark.gpu
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seq_cases(), st.sampled_from(["exact", "float", "bigint"]), st.booleans())
def test_shared_transitions_match_oracle_on_gpu(case, numeric, merged):
    _check(case, numeric, "gpu", SHARE["every run"], merged)


def test_a_shared_cycle_of_a_type_the_events_lack():
    """SEQ(T0, T1)+ shared by 20 queries over events without T1 (and, streamed, over a chunk
    without it): no trend can exist, yet `dynamic` counted 10^21 of them. The run maps placed
    the types by code, and the absent type's code, -1, wrote over the last type's place, so
    T0 events stood in as T1 (a helper's hunt; no forcing needed)."""
    text = ";".join(
        f"q{i}: RETURN COUNT(*) PATTERN SEQ(A, SEQ(T0, T1)+, C) WHERE C.x >= {i} WITHIN 10 min"
        for i in range(20)
    )
    types = (["C", "A", "T0", "C"] + ["T0"] * 40 + ["C"]) * 500
    table = pa.table(
        {"time": np.arange(len(types)), "type": types, "x": np.arange(len(types)) % 40}
    )
    stats = RunStats()
    with pytest.warns(gpu_hamlet.AbsentTypeWarning):
        got = gpu_hamlet.aggregate(table, text, backend="cpu", stats=stats)
    assert stats.sets and stats.sets[0].shared  # (the cycle's runs did run shared)
    assert all(t.num_rows == 0 for t in got.values())
    late = pa.concat_tables([table, pa.table({"time": [len(types)], "type": ["T1"], "x": [0]})])
    streamed = gpu_hamlet.aggregate_stream(
        late.to_batches(max_chunksize=5000), text, backend="cpu", rows_per_chunk=10_000
    )
    assert streamed == gpu_hamlet.aggregate(late, text, backend="cpu", sharing="none")


def test_a_shared_transition_chain_is_one_block_macro_row_per_run():
    """Two queries SEQ(A, B, C, _) share tran(A, B) and tran(B, C) as one chain: a run of B and
    C events is one map; a third query sharing start(A) with them shares it apart."""
    text = (
        "a: RETURN COUNT(*) PATTERN SEQ(A, B, C, D) WITHIN 100 s SLIDE 100 s;\n"
        "b: RETURN COUNT(*), SUM(C.x) PATTERN SEQ(A, B, C, E) WITHIN 100 s SLIDE 100 s;\n"
        "c: RETURN COUNT(*) PATTERN SEQ(A, F) WITHIN 100 s SLIDE 100 s"
    )
    types = ["A", "A", "F", "B", "B", "C", "B", "C", "D", "E", "C", "E"]
    events = [{"time": i, "type": ty, "g": "u", "x": i, "y": 0.0} for i, ty in enumerate(types)]
    stats = _check((text, events), "exact", "cpu", SHARE["every run"])
    got = {s.kleene_type: (s.queries, s.bursts, s.burst_events) for s in stats.sets}
    assert got == {
        "start(A)": (("a", "b", "c"), 1, 2),
        "tran(A, B) tran(B, C)": (("a", "b"), 2, 6),
    }
    assert "tran(A, B) tran(B, C) shared by a, b: 2 bursts (6 events)" in stats.describe()


def test_a_shared_run_is_one_block_macro_row():
    """Two queries around SEQ(P, T)+ over one run of 6 events: the run runs shared (one map,
    stats say so), and both give the oracle's counts."""
    text = (
        "a: RETURN COUNT(*) PATTERN SEQ(A, SEQ(P, T)+, C) WITHIN 100 s SLIDE 100 s;\n"
        "b: RETURN COUNT(*), SUM(T.x) PATTERN SEQ(D, SEQ(P, T)+) WITHIN 100 s SLIDE 100 s"
    )
    types = ["A", "D", "P", "T", "P", "T", "T", "P", "C"]
    events = [{"time": i, "type": ty, "g": "u", "x": i, "y": 0.0} for i, ty in enumerate(types)]
    stats = _check((text, events), "exact", "cpu", SHARE["every run"])
    (cycle,) = [s for s in stats.sets if s.kleene_type == "SEQ(P, T)+"]
    assert (cycle.queries, cycle.bursts, cycle.shared, cycle.burst_events) == (
        ("a", "b"),
        1,
        1,
        6,
    )
    assert "SEQ(P, T)+ shared by a, b: 1 bursts (6 events), 1 shared" in stats.describe()


@pytest.mark.parametrize("numeric", ["exact", "float"])
def test_run_maps_are_read_in_place_or_copied_alike(numeric):
    """A query reading most of a Q-set's runs gets the set's maps in place (a view, each run
    at its own offset); one reading few gets a copy of theirs: the same map either way, and in
    float mode the same scaled rows (`Blocks.bs`), one per map entry."""
    seen: list[tuple[int, int, list[int], int]] = []
    maps = SharedStages.maps

    def spy(self, ring, p, channels, runs):
        bm, bs, first = maps(self, ring, p, channels, runs)
        one, one_s, at = maps(self, ring, p, channels, runs[-1:])  # fewer than half: a copy
        size = one.shape[0]
        np.testing.assert_array_equal(one[at[0] :], bm[first[-1] : first[-1] + size])
        assert bs.shape[0] == (bm.shape[0] if ring == "xfloat" else 0)
        if ring == "xfloat":
            np.testing.assert_array_equal(one_s[at[0] :], bs[first[-1] : first[-1] + size])
        seen.append((self.nruns, bm.shape[0] // size, first.tolist(), int(at[0])))
        return bm, bs, first

    text = (
        "a: RETURN COUNT(*) PATTERN SEQ(A, SEQ(P, T)+, C) WITHIN 10 s SLIDE 10 s;\n"
        "b: RETURN COUNT(*), SUM(T.x) PATTERN SEQ(A, SEQ(P, T)+, E) WITHIN 10 s SLIDE 10 s"
    )
    types = (["A", "P", "T", "P", "T", "C", "E"] + ["B"] * 13) * 4
    events = [{"time": i, "type": ty, "g": "u", "x": i, "y": 0.0} for i, ty in enumerate(types)]
    with patch.object(SharedStages, "maps", spy):
        _check((text, events), numeric, "cpu", SHARE["every run"])
    assert seen
    for nruns, held, first, at in seen:
        assert (nruns, held, at) == (4, 4, 0)
        assert first == [r * (first[1] - first[0]) for r in range(4)]


def test_a_query_reads_the_collapsed_stream_pruned_around_its_runs():
    """A query of one Q-set reads the set's stream with each shared run one slot
    (`SharedStages.compressed`, rows by time): an A with no C within the window is pruned, runs
    are kept, and where the chain holds the pattern's start (start(P) SEQ(P, T)+) a run starts
    trends: an end too far from it is pruned."""
    rows: dict[str, list[int]] = {}
    compressed = SharedStages.compressed

    def spy(self, q, *args, **kwargs):
        got = compressed(self, q, *args, **kwargs)
        rows[q.name] = got[2].tolist()  # times
        return got

    text = (
        "a: RETURN COUNT(*) PATTERN SEQ(A, SEQ(P, T)+, C) WITHIN 10 s SLIDE 10 s;\n"
        "b: RETURN COUNT(*) PATTERN SEQ(D, SEQ(P, T)+, E) WITHIN 10 s SLIDE 10 s"
    )
    types = ["A", "D"] + ["B"] * 8 + ["A", "D", "P", "T", "P", "T", "C", "E"]
    events = [{"time": i, "type": ty, "g": "u", "x": i, "y": 0.0} for i, ty in enumerate(types)]
    with patch.object(SharedStages, "compressed", spy):
        _check((text, events), "exact", "cpu", SHARE["every run"])
    assert rows == {"a": [10, 12, 16], "b": [11, 12, 17]}  # A at 0 and D at 1: 16 s before

    starts = "a: RETURN COUNT(*) PATTERN SEQ(SEQ(P, T)+, C) WITHIN 3 s SLIDE 3 s;\n" + (
        "b: RETURN COUNT(*) PATTERN SEQ(SEQ(P, T)+, D) WITHIN 3 s SLIDE 3 s"
    )
    types = ["P", "T", "C", "C", "C", "D"]
    events = [{"time": i, "type": ty, "g": "u", "x": i, "y": 0.0} for i, ty in enumerate(types)]
    rows.clear()
    with patch.object(SharedStages, "compressed", spy):
        _check((starts, events), "exact", "cpu", SHARE["every run"])
    assert rows == {"a": [0, 2], "b": [0]}  # the run from 0: C at 3 is in the next window


def test_hamlet_and_static_share_no_cycle():
    """Only `dynamic` runs GLORIA's plan; `hamlet` is HAMLET's sharing of one-type bursts."""
    text = (
        "a: RETURN COUNT(*) PATTERN SEQ(A, SEQ(P, T)+) WITHIN 100 s SLIDE 100 s;\n"
        "b: RETURN COUNT(*) PATTERN SEQ(D, SEQ(P, T)+) WITHIN 100 s SLIDE 100 s"
    )
    table = events_to_table(
        [{"time": i, "type": ty, "g": "u", "x": i, "y": 0.0} for i, ty in enumerate("ADPTPT")]
    )
    for mode in ("hamlet", "static", "none"):
        stats = RunStats()
        gpu_hamlet.aggregate(table, text, sharing=mode, stats=stats, backend="cpu")
        assert not [s for s in stats.sets if "SEQ" in s.kleene_type], mode
    _, stats = _run(table, text, "exact", "cpu", SHARE["every run"])
    assert [s.kleene_type for s in stats.sets] == ["SEQ(P, T)+"]


def test_default_costs_share_long_runs_of_many_queries():
    """With the calibrated constants: 30 queries over 200 runs of 250 events share them (but
    for pieces that panes cut short); 2 queries over runs of 2 events do not (the map's columns
    and each query's bookkeeping cost more than the rows they save)."""

    def workload(n: int) -> str:
        return ";\n".join(
            f"q{i}: RETURN COUNT(*) PATTERN SEQ(A, SEQ(P, T)+, C) WHERE A.x < {i + 1} "
            "WITHIN 500 s SLIDE 250 s"
            for i in range(n)  # (the filters keep every A: equal queries would run once)
        )

    def stream(run: int, reps: int) -> list[dict]:
        types = (["A"] + ["P", "T"] * (run // 2) + ["C"]) * reps
        return [{"time": i, "type": ty, "g": "u", "x": 0, "y": 0.0} for i, ty in enumerate(types)]

    for n, run, reps, shares in ((30, 250, 200, True), (2, 2, 5, False)):
        stats = RunStats()
        gpu_hamlet.aggregate(
            events_to_table(stream(run, reps)),
            workload(n),
            numeric="float",
            stats=stats,
            on_overflow="null",
        )
        # Queries alike but for filters on A share the cycle.
        cycles = [s for s in stats.sets if "SEQ(P, T)+" in s.kleene_type]
        shared, runs = sum(s.shared for s in cycles), sum(s.bursts for s in cycles)
        if shares:  # all but the short pieces of runs that a pane boundary cuts
            assert runs >= 200 and shared >= 0.9 * runs
        else:
            assert shared == 0


def test_block_of_needs_the_sub_pattern_as_one_block():
    sub = sub_template((Seq((PatternElement("P"), PatternElement("T")), kleene=True),))
    assert sub.k == 3 and list(sub.is_end) == [False, False, True]
    inside = Template.of(
        Seq((PatternElement("A"), Seq((PatternElement("P"), PatternElement("T")), kleene=True)))
    )
    np.testing.assert_array_equal(block_of(inside, sub, ("P", "T")), [1, 2])
    # SEQ(P, T+)+ is not SEQ(P, T)+: T's own loop is no edge of the sub-template.
    other = Template.of(
        Seq(
            (
                PatternElement("A"),
                Seq((PatternElement("P"), PatternElement("T", kleene=True)), kleene=True),
            )
        )
    )
    assert block_of(other, sub, ("P", "T")) is None


def test_stage_plan_searches_only_where_a_stage_could_pay():
    """GLORIA's search runs only when two queries of one class hold a stage whose runs could
    pay for their bookkeeping and the search (not over runs of 2 events, but over runs of 40);
    its Q-sets then name them (HAMLET's one-type bursts aside)."""
    names = ["A", "C", "D", "P", "T"]
    codes = np.asarray(([0] + [3, 4] * 20 + [1]) * 100, np.int32)
    ev = cast(EventFrame, SimpleNamespace(type_codes=codes, type_names=names))
    none = gpu_hamlet.parse_workload(
        "a: RETURN COUNT(*) PATTERN SEQ(A, P+) WITHIN 9 s SLIDE 9 s;\n"
        "b: RETURN COUNT(*) PATTERN SEQ(T, C+) WITHIN 9 s SLIDE 9 s;\n"
        "c: RETURN COUNT(*) PATTERN SEQ(D, SEQ(P, T)+) WITHIN 9 s SLIDE 9 s;\n"
        "d: RETURN COUNT(*) PATTERN SEQ(C, SEQ(P, T)+) WHERE P.x > 1 WITHIN 9 s SLIDE 9 s"
    )
    assert shareable_stages(none)[1] == ()
    assert stage_plan(none, ev, CPU_COSTS) == (None, [])
    some = gpu_hamlet.parse_workload(
        ";\n".join(
            f"q{i}: RETURN COUNT(*) PATTERN SEQ({first}, SEQ(P, T)+) WITHIN 9 s SLIDE 9 s"
            for i, first in enumerate("ACAC")
        )
    )
    assert [p.key for p, _ in shareable_stages(some)[1]] == ["start(A)", "start(C)", "SEQ(P, T)+"]
    # Runs of two events save less than the bookkeeping: no search.
    short = np.asarray([0, 3, 4, 1] * 10, np.int32)
    assert stage_plan(some, SimpleNamespace(type_codes=short, type_names=names), CPU_COSTS) == (
        None,
        [],
    )
    plan, qsets = stage_plan(some, ev, CPU_COSTS)
    # Runs of one A or C event save nothing; the cycle's run of 40 does.
    assert plan is not None
    assert [(key, names) for key, _, names in qsets] == [("SEQ(P, T)+", ("q0", "q1", "q2", "q3"))]


def test_the_gate_reads_the_first_events_and_the_search_the_whole_sample():
    """The gate counts runs over the sample's first GATE_SAMPLE events only; where it opens,
    the search and the cut weigh the whole sample (its statistics name their events)."""
    names = ["A", "C", "D", "P", "T"]
    some = gpu_hamlet.parse_workload(
        ";\n".join(
            f"q{i}: RETURN COUNT(*) PATTERN SEQ({first}, SEQ(P, T)+) WITHIN 9 s SLIDE 9 s"
            for i, first in enumerate("ACAC")
        )
    )
    unit = [0] + [3, 4] * 20 + [1]  # runs of 40: the gate opens
    n = min(SAMPLE, 2 * GATE_SAMPLE) // len(unit) * len(unit)
    assert n > GATE_SAMPLE
    sizes: list[int] = []
    of_codes = stage_sharing.StreamStats.of_codes

    def spy(codes, type_names):
        sizes.append(codes.shape[0])
        return of_codes(codes, type_names)

    for stream in (unit, [0, 3, 4, 1]):  # runs of 40, then of 2: the gate stays shut
        ev = SimpleNamespace(
            type_codes=np.asarray(stream * (n // len(stream)), np.int32), type_names=names
        )
        sizes.clear()
        with patch.object(stage_sharing.StreamStats, "of_codes", staticmethod(spy)):
            plan, _ = stage_plan(some, cast(EventFrame, ev), CPU_COSTS)
        if stream is unit:
            assert plan is not None and plan.source == f"{n:,} events"
            assert sizes == [GATE_SAMPLE, n]
        else:
            assert plan is None and sizes == [GATE_SAMPLE]


def test_a_search_runs_only_where_a_stage_could_pay_for_it():
    """The search's least cost (SEARCH_S per shareable pool) is paid once per call, while what
    a stage saves grows with the stream: the sample's runs of 40 pay for a search at 3e-4 s
    per pool but not at 3e-3 s over a stream as long as the sample, and at 3e-3 s over one 20
    times longer."""
    names = ["A", "C", "D", "P", "T"]
    some = gpu_hamlet.parse_workload(
        ";\n".join(
            f"q{i}: RETURN COUNT(*) PATTERN SEQ({first}, SEQ(P, T)+) WITHIN 9 s SLIDE 9 s"
            for i, first in enumerate("ACAC")
        )
    )
    unit = [0] + [3, 4] * 20 + [1]

    def searched(per_pool: float, reps: int) -> bool:
        ev = SimpleNamespace(type_codes=np.asarray(unit * reps, np.int32), type_names=names)
        with patch.object(stage_sharing, "SEARCH_S", per_pool):
            return stage_plan(some, cast(EventFrame, ev), CPU_COSTS)[0] is not None

    sample = SAMPLE // len(unit) + 1
    assert searched(3e-4, sample)
    assert not searched(3e-3, sample)
    assert searched(3e-3, 20 * sample)


def test_an_open_gate_builds_the_q_sets_that_do_not_pay():
    """calibrate_stages.py times Q-sets the model would not build by setting MIN_GAIN to -inf:
    over runs of two events, the search then runs and its start pools' Q-sets are built (their
    streams cut into runs), though no run pays; results stay those of sharing nothing."""
    names = ["A", "C", "D", "P", "T"]
    codes = [0, 3, 4, 1] * 100
    table = pa.table({"time": np.arange(len(codes)), "type": [names[c] for c in codes]})
    text = ";\n".join(
        f"q{i}: RETURN {ret} PATTERN SEQ({first}, SEQ(P, T)+) WITHIN 9 s SLIDE 9 s"
        # (COUNT(T) named as COUNT(*)'s column: not run as one with q0 and q1, `run_as`)
        for i, (first, ret) in enumerate(zip("ACAC", ["COUNT(*)"] * 2 + ["COUNT(T) AS count"] * 2))
    )
    alone = gpu_hamlet.aggregate(table, text, sharing="none", backend="cpu")
    built = {}
    for gate in (0.0, -math.inf):
        stats = RunStats()
        with patch.object(stage_sharing, "MIN_GAIN", gate):
            got = gpu_hamlet.aggregate(table, text, stats=stats, backend="cpu")
        built[gate] = [(s.kleene_type, s.queries, s.bursts, s.shared) for s in stats.sets]
        assert all(got[n].equals(alone[n]) for n in alone)
    assert built[0.0] == []
    assert built[-math.inf] == [
        ("start(A)", ("q0", "q2"), 100, 0),
        ("start(C)", ("q1", "q3"), 100, 0),
    ]


def test_a_q_set_runs_only_the_stretch_of_its_chain_that_pays():
    """The search chains start(A0), tran(A0, P) and tran(P, T) for one Q-set; a start pool's
    runs are single A events, which cost this engine more than they save, so what runs shared
    is tran(A0, P) tran(P, T), with results equal to sharing nothing."""
    names = ["A0", "A1", "C0", "C1", "P", "T", "X"]
    rng = np.random.default_rng(0)
    codes: list[int] = []
    while len(codes) < 20_000:
        codes += [int(rng.integers(2)), *[4, 5, 6, 6] * 40, 2 + int(rng.integers(2))]
    text = ";\n".join(
        f"q{i}: RETURN COUNT(*) PATTERN SEQ(A{i % 2}, P, T, C{i // 2 % 2}) "
        f"WHERE C{i // 2 % 2}.x < {i + 1} WITHIN 5 min"
        for i in range(8)  # (the filters keep every C: equal queries would run once)
    )
    wl = gpu_hamlet.parse_workload(text)
    ev = SimpleNamespace(type_codes=np.asarray(codes, np.int32), type_names=names)
    plan, qsets = stage_plan(wl, cast(EventFrame, ev), CPU_COSTS)
    assert plan is not None
    q_set = ("q0", "q2", "q4", "q6")
    assert [sorted(b.queries) for b in plan.nodes["start(A0)"]] == [list(q_set)]
    assert ("tran(A0, P) tran(P, T)", q_set) in [(key, n) for key, _, n in qsets]
    assert not any(key.startswith("start(") for key, _, _ in qsets)
    # Queries that keep a tenth of those events alone (`KeptShares`) save a tenth by sharing.
    assert stage_plan(wl, cast(EventFrame, ev), CPU_COSTS, kept=lambda *_: 0.1)[1] == []
    # Nor do runs that panes cut to single events (`PaneRuns`: one run an event).
    assert stage_plan(wl, cast(EventFrame, ev), CPU_COSTS, panes=lambda _, n: n)[1] == []
    # Events 1 ms apart: a window holds many A ... C stretches, and each query keeps most runs
    # (1 s apart, it keeps a tenth: the runs between an A1 and a C, or cut by a window, and
    # sharing the others' maps loses: 2.5-2.8x `none`'s time at 200,000 events).
    time = pa.array(np.arange(len(codes)), pa.timestamp("ms"))
    table = pa.table(
        {"time": time, "type": [names[c] for c in codes], "x": np.zeros(len(codes), np.int64)}
    )
    stats = RunStats()
    got = gpu_hamlet.aggregate(table, text, stats=stats, backend="cpu")
    assert any(s.kleene_type == "tran(A0, P) tran(P, T)" and s.shared for s in stats.sets)
    seconds = table.set_column(0, "time", pa.array(np.arange(len(codes)), pa.timestamp("s")))
    stats = RunStats()
    gpu_hamlet.aggregate(seconds, text, stats=stats, backend="cpu")
    assert not any(s.shared for s in stats.sets if s.stage)
    alone = gpu_hamlet.aggregate(table, text, sharing="none", backend="cpu")
    assert all(got[n].equals(alone[n]) for n in alone)


def test_transitions_of_one_q_set_chain_into_one_sub_pattern():
    """tran(A, B) and tran(B, C) shared by the same queries propagate one snapshot along both:
    one chain, SEQ(IN, B, C); a third query that only shares tran(A, B) starts its own."""
    wl = gpu_hamlet.parse_workload(
        "a: RETURN COUNT(*) PATTERN SEQ(A, B, C, D) WITHIN 9 s SLIDE 9 s;\n"
        "b: RETURN COUNT(*) PATTERN SEQ(A, B, C, E) WITHIN 9 s SLIDE 9 s;\n"
        "c: RETURN COUNT(*) PATTERN SEQ(A, B, F) WITHIN 9 s SLIDE 9 s"
    )
    pools = {p.key: p for p, _ in shareable_stages(wl)[1]}
    chains = shared_chains(
        {
            ("a", "b"): [pools["tran(A, B)"], pools["tran(B, C)"]],
            ("a", "b", "c"): [pools["start(A)"]],
        }
    )
    assert [(key, names) for key, _, names in chains] == [
        ("tran(A, B) tran(B, C)", ("a", "b")),
        ("start(A)", ("a", "b", "c")),
    ]


def _start_filter_groups(n: int = 20_000) -> tuple[str, SimpleNamespace, pa.Table]:
    """Four queries SEQ(A0, P, T, C0) in two pairs by their filter on A0 (start(A0)'s classes),
    and a stream of an A0, 40 P T X X (X read by none) and a C0, 1 ms apart."""
    names = ["A0", "C0", "P", "T", "X"]
    codes: list[int] = []
    while len(codes) < n:
        codes += [0, *[2, 3, 4, 4] * 40, 1]
    text = ";\n".join(
        f"q{i}: RETURN COUNT(*) PATTERN SEQ(A0, P, T, C0) "
        f"WHERE A0.x < {1 + i // 2} AND C0.x < {i + 1} WITHIN 5 min"
        for i in range(4)  # (the filters on C0 keep every C0: equal queries would run once)
    )
    ev = SimpleNamespace(type_codes=np.asarray(codes, np.int32), type_names=names)
    rng = np.random.default_rng(1)
    x = np.where(np.asarray(codes) == 0, rng.integers(0, 3, len(codes)), 0)
    table = pa.table(
        {
            "time": pa.array(np.arange(len(codes)), pa.timestamp("ms")),
            "type": [names[c] for c in codes],
            "x": x.astype(np.int64),
        }
    )
    return text, ev, table


def test_q_sets_kept_apart_by_a_start_pools_filters_share_the_stretch_after_it():
    """The search continues start(A0)'s Q-sets, split by their filters on A0, into tran(A0, P)
    and tran(P, T), whose classes those filters do not touch. This engine's cost of a stretch is
    per run, each query reading its own input there, so the cut weighs the four queries as one
    Q-set too (`merged_stages`) and runs that: the runs' maps once, not once per pair. The
    results are those of sharing nothing."""
    text, ev, table = _start_filter_groups()
    wl = gpu_hamlet.parse_workload(text)
    plan, qsets = stage_plan(wl, cast(EventFrame, ev), CPU_COSTS)
    assert plan is not None
    assert sorted(sorted(b.queries) for b in plan.nodes["start(A0)"]) == [
        ["q0", "q1"],
        ["q2", "q3"],
    ]
    assert [(key, names) for key, _, names in qsets] == [
        ("tran(A0, P) tran(P, T)", ("q0", "q1", "q2", "q3"))
    ]
    stats = RunStats()
    got = gpu_hamlet.aggregate(table, text, stats=stats, backend="cpu")
    stage = [s for s in stats.sets if s.stage]
    assert [(s.kleene_type, s.queries) for s in stage] == [
        ("tran(A0, P) tran(P, T)", ("q0", "q1", "q2", "q3"))
    ]
    assert stage[0].shared > 0
    alone = gpu_hamlet.aggregate(table, text, sharing="none", backend="cpu")
    assert all(got[n].equals(alone[n]) for n in alone)


def test_the_cut_asks_only_the_stages_that_come_first_by_their_bound():
    """A stage's gain with every event kept bounds its gain, so the cut asks the queries'
    pruning only of the stage that comes first by its bound among those holding no pool taken:
    the merged Q-set of four comes first, and the plan's pairs on the same pools are never
    asked."""
    text, ev, _ = _start_filter_groups()
    asked: list[tuple[str, ...]] = []

    def kept(names, types, need=0.0):
        asked.append(tuple(names))
        return 1.0

    _, qsets = stage_plan(
        gpu_hamlet.parse_workload(text), cast(EventFrame, ev), CPU_COSTS, kept=kept
    )
    assert [names for _, _, names in qsets] == [("q0", "q1", "q2", "q3")]
    assert asked and all(len(names) == 4 for names in asked)


def test_the_gates_stretches_hold_queries_of_one_class_on_each_pool():
    """A stretch the gate weighs is one Q-set could share: queries whose filters on A0 differ
    do not share start(A0), so a stretch from it holds each filter group apart, the stretch
    after it holds all four, and none holds tran(T, C0), which each query filters its own way."""
    text, _, _ = _start_filter_groups(200)
    stretched = shareable_stages(gpu_hamlet.parse_workload(text)).stretched.items
    assert sorted((types, sorted(names)) for types, names in stretched if "A0" in types) == [
        (("A0", "P"), ["q0", "q1"]),
        (("A0", "P"), ["q2", "q3"]),
        (("A0", "P", "T"), ["q0", "q1"]),
        (("A0", "P", "T"), ["q2", "q3"]),
    ]
    assert (("P", "T"), ("q0", "q1", "q2", "q3")) in stretched
    assert not any("C0" in types for types, _ in stretched)  # (each filters C0 its own way)


def test_a_stage_that_could_not_pay_for_asking_is_not_asked():
    """The queries' pruning is asked (a compiled pass a query) only of stages whose gain with
    every event kept exceeds what asking costs (`ASK_S` a query asked): with asking dearer than
    any stage could save, nothing is asked and nothing shared."""
    text, ev, _ = _start_filter_groups()
    wl = gpu_hamlet.parse_workload(text)
    asked: list[tuple] = []

    def kept(names, types, need=0.0):
        asked.append((tuple(names), tuple(types)))
        return 1.0

    plan, qsets = stage_plan(wl, cast(EventFrame, ev), CPU_COSTS, kept=kept)
    assert asked and qsets
    asked.clear()
    with patch.object(stage_sharing, "ASK_S", 1.0):
        assert stage_plan(wl, cast(EventFrame, ev), CPU_COSTS, kept=kept) == (None, [])
    assert asked == []


def test_a_block_row_runs_once_a_window_copy():
    """A query's block rows run in each window holding their pane (`Windowing.copies`: the
    window-copies route its few rows on the shared path take), so a run saves less the more
    copies its queries have, by their block rows' cost."""
    from gpu_hamlet.query.plan import Windowing

    assert [Windowing(1, a, n, 0, 0).copies for a, n in ((1, 1), (1, 2), (3, 10), (2, 4))] == [
        1,
        2,
        4,
        2,
    ]
    m = CPU_COSTS
    one, two = (SharedStages.saved_per_run(40.0, 2, 20, m, 1, 1.0, c) for c in (1.0, 2.0))
    block = m.base_s + 3 * 4 / 2 * m.stage_fma_s + m.stage_block_s
    assert one - two == pytest.approx(20 * block)
    many = SharedStages.saved_per_run(np.array([40.0, 3.0]), 2, 20, m, 1, 1.0, np.array([1, 2]))
    assert many[0] == pytest.approx(one)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_the_gates_stage_arrays_sum_what_each_stage_reads(data):
    """`Stages` (the gate's bound as arrays) gives each stage the events of its types and of
    the types its queries read, its queries and their widest plan, as sums per stage do; and
    the runs counted from its marks are `StreamStats.runs`' (a pass per pair)."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    workload = gpu_hamlet.parse_workload(
        ";\n".join(
            f"q{i}: RETURN COUNT(*) PATTERN SEQ({first}, {body}, {last}) WITHIN 9 s"
            for i, (first, body, last) in enumerate(
                [("A", "SEQ(P, T)+", "C"), ("A", "SEQ(P, T)+", "U")]
                + data.draw(
                    st.lists(
                        st.tuples(
                            st.sampled_from("AD"),
                            st.sampled_from(["SEQ(P, T)+", "P, T", "T, P", "SEQ(P, T, U)+"]),
                            st.sampled_from("CU"),
                        ),
                        max_size=6,
                    )
                )
            )
        )
    )
    shareable = shareable_stages(workload)
    assert shareable.whole.items and shareable.stretched.items  # (the first two queries')
    names = ["A", "C", "D", "P", "T", "U", "Z"]
    codes = rng.integers(0, len(names), 500).astype(np.int32)
    stats = StreamStats.of_codes(codes, names)
    widths = {q.name: int(rng.integers(1, 4)) for q in workload}
    copies = {q.name: int(rng.integers(1, 4)) for q in workload}
    for stages in (shareable.whole, shareable.stretched):
        counts = np.array([stats.counts.get(t, 0.0) for t in stages.type_names])
        keys = [(frozenset(t), shareable.template.types_of(frozenset(n))) for t, n in stages.items]
        assert stages.keys == keys
        assert (stages.body @ counts).tolist() == [stats.n(t) for t, _ in stages.items]
        assert (stages.seen @ counts).tolist() == [stats.n(seen) for _, seen in keys]
        assert stages.nq.tolist() == [len(n) for _, n in stages.items]
        assert stages.widths(widths).tolist() == [
            max(widths[q] for q in n) for _, n in stages.items
        ]
        np.testing.assert_allclose(
            stages.copies(copies), [np.mean([copies[q] for q in n]) for _, n in stages.items]
        )
        marked = StreamStats.of_codes(codes, names)
        marked.prefetch_marked(stages.keys, stages.type_names, stages.marks)
        assert [marked.runs(*k) for k in keys] == [
            StreamStats.of_codes(codes, names).runs(*k) for k in keys
        ]


@pytest.mark.filterwarnings("ignore::gpu_hamlet.errors.AbsentTypeWarning")  # (g23's A: none)
def test_float_times_share_runs_only_within_one_pane():
    """A Q-set's runs were cut by the gcd of its queries' panes: over float times P@2.07 lies in
    pane 69 of 30 ms but pane 206 of 10 ms (206 // 3 = 68), and a run spanning g15's pane bound
    lost its trend (a helper's hunt, with every run shared as here). Only queries of one pane
    share runs over float times."""
    times = [2.06, 2.07, 2.08, 2.11]
    table = pa.table({"time": times, "type": ["T", "P", "T", "C"]})
    text = (
        "g15: RETURN COUNT(*) PATTERN SEQ(SEQ(P, T+)+, C) WITHIN 60 ms SLIDE 30 ms;"
        "g23: RETURN COUNT(*) PATTERN SEQ(A, SEQ(P, T+)+) WITHIN 30 ms SLIDE 10 ms"
    )
    want = gpu_hamlet.aggregate(table, text, sharing="none", backend="cpu")
    assert want["g15"].column("count").to_pylist() == [1]
    got, _ = _run(table, text, "exact", "cpu", lambda length: length > 0)
    assert all(got[n].equals(want[n]) for n in want)
    same = text.replace("30 ms SLIDE 10 ms", "60 ms SLIDE 30 ms").replace("SEQ(A, ", "SEQ(C, ")
    _, stats = _run(table, same, "exact", "cpu", lambda length: length > 0)
    assert any(s.stage and s.queries == ("g15", "g23") for s in stats.sets)  # (one pane: shared)

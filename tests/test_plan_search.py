"""GLORIA's template and plan search (gpu_hamlet/engine/transitions.py, plan_search.py): the pools
of a workload, and the searched plan against every choice of one candidate per pool."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpu_hamlet
from gpu_hamlet import parse_workload
from gpu_hamlet.engine import evaluate, plan_search, stage_sharing
from gpu_hamlet.engine.plan_search import (
    CPU_PLAN_COSTS,
    SEARCHES,
    SearchSpace,
    StreamStats,
    _Pools,
    find_plan,
    plan_cost,
    plan_workload,
)
from gpu_hamlet.engine.transitions import TransitionTemplate

FIGURE_2 = """
q1: RETURN COUNT(*) PATTERN SEQ(R, SEQ(P, T)+, D) WITHIN 10 min;
q2: RETURN COUNT(*) PATTERN SEQ(A, R, SEQ(P, T)+, D) WITHIN 10 min;
q3: RETURN COUNT(*) PATTERN SEQ(A, R, SEQ(P, T)+, C) WITHIN 10 min;
q4: RETURN COUNT(*) PATTERN SEQ(A, B+, C) OR D WITHIN 10 min;
q5: RETURN COUNT(*) PATTERN SEQ(A, B, C) WHERE A.x < NEXT(B).x WITHIN 10 min
"""


def test_template_of_gloria_figure_2():
    t = TransitionTemplate.of(parse_workload(FIGURE_2))
    pools = {p.key: p for p in t.pools}
    assert list(pools) == [
        "start(R)",
        "start(A)",
        "tran(A, R)",
        "SEQ(P, T)+",
        "tran(SEQ(P, T)+, D)",
        "tran(SEQ(P, T)+, C)",
    ]
    cycle = pools["SEQ(P, T)+"]
    assert cycle.kind == "kleene" and cycle.types == ("P", "T")
    assert cycle.prev == {"q1": "start(R)", "q2": "tran(A, R)", "q3": "tran(A, R)"}
    assert pools["tran(SEQ(P, T)+, D)"].queries == ("q1", "q2")
    assert t.alone == {
        "q4": "not a SEQ of distinct types under Kleene plus",
        "q5": "NEXT conditions",
    }


def test_nested_kleene_is_one_pool_and_filters_split_classes():
    t = TransitionTemplate.of(
        parse_workload(
            "a: RETURN COUNT(*) PATTERN SEQ(X, SEQ(C, SEQ(A, B)+, D)+) WITHIN 1 min;"
            "b: RETURN COUNT(*) PATTERN SEQ(Y, SEQ(C, SEQ(A, B)+, D)+) WHERE A.v > 1 WITHIN 1 min;"
            "c: RETURN COUNT(*) PATTERN SEQ(X, SEQ(C, SEQ(A, B)+, D)+) GROUPBY g WITHIN 1 min"
        )
    )
    cycle = next(p for p in t.pools if p.kind == "kleene")
    assert cycle.key == "SEQ(C, SEQ(A, B)+, D)+" and set(cycle.types) == {"A", "B", "C", "D"}
    assert len({t.class_of(cycle, q) for q in "abc"}) == 3


def test_transitions_of_types_with_commas_are_different_pools():
    """Pools are keyed by their names: bare names made tran(A, `B, C`) and tran(`A, B`, C) one
    pool, `tran(A, B, C)`, of both queries, and the second's transitions went unshared."""
    t = TransitionTemplate.of(
        parse_workload(
            "a: RETURN COUNT(*) PATTERN SEQ(A, `B, C`) WITHIN 1 min;"
            "b: RETURN COUNT(*) PATTERN SEQ(`A, B`, C) WITHIN 1 min"
        )
    )
    pools = {p.key: p.queries for p in t.pools}
    assert pools == {
        "start(A)": ("a",),
        "tran(A, `B, C`)": ("a",),
        "start(`A, B`)": ("b",),
        "tran(`A, B`, C)": ("b",),
    }


def test_sharing_pays_where_snapshots_are_few_and_not_where_they_are_many():
    w = parse_workload(
        ";".join(f"q{i}: RETURN COUNT(*) PATTERN SEQ(A, B+, C{i}) WITHIN 1 min" for i in range(20))
    )
    t = TransitionTemplate.of(w)
    bursty = StreamStats.of(["A"] + ["B"] * 200 + ["C0"] + ["A"] + ["B"] * 200 + ["C1"])
    plan = find_plan(t, bursty)
    assert {b.queries for b in plan.nodes["B+"]} == {frozenset(f"q{i}" for i in range(20))}
    assert plan.cost < plan.nonshared / 3
    interleaved = StreamStats.of(["A", "B", "C0"] * 200)
    assert find_plan(t, interleaved).nodes["B+"] == frozenset()
    assert "B+" in plan.describe() and "q0, q1" in plan.describe()


def _random_workload(draw: st.DrawFn) -> str:
    types = "ABCDEF"
    lines = []
    for i in range(draw(st.integers(2, 5))):
        picked = draw(st.permutations(types))[: draw(st.integers(2, 4))]
        parts: list[str] = []
        j = 0
        while j < len(picked):
            kind = draw(st.sampled_from(["type", "type", "plus", "group"]))
            if kind == "group" and j + 1 < len(picked):
                parts.append(f"SEQ({picked[j]}, {picked[j + 1]})+")
                j += 2
                continue
            parts.append(picked[j] + ("+" if kind == "plus" else ""))
            j += 1
        where = draw(st.sampled_from(["", f" WHERE {picked[0]}.v > 1"]))
        lines.append(f"q{i}: RETURN COUNT(*) PATTERN SEQ({', '.join(parts)}){where} WITHIN 1 min")
    return ";\n".join(lines)


def _meeting_workload(draw: st.DrawFn) -> str:
    """Queries around one core of types, each with a detour of its own inserted (or none): their
    paths split at the detour and meet again after it, so the ties between pools close cycles."""
    core = list(draw(st.permutations("ABCDE"))[:4])
    if draw(st.booleans()):
        j = draw(st.integers(0, len(core) - 2))
        core[j : j + 2] = [f"SEQ({core[j]}, {core[j + 1]})+"]
    elif draw(st.booleans()):
        core[draw(st.integers(0, len(core) - 1))] += "+"
    lines = []
    routes = st.lists(st.sampled_from(["", "F", "G", "F+"]), min_size=2, max_size=3, unique=True)
    detours = draw(routes)
    for i, detour in enumerate(detours):
        parts = list(core)
        if detour:  # (two pools at least after it, where the routes may meet and share)
            parts.insert(draw(st.integers(1, max(1, len(parts) - 2))), detour)
        where = draw(st.sampled_from(["", " WHERE F.v > 1"])) if "F" in detour else ""
        for twin in range(draw(st.sampled_from([2, 2, 1]))):  # (routes two take may share)
            pattern = f"SEQ({', '.join(parts)}){where}"
            lines.append(f"q{i}_{twin}: RETURN COUNT(*) PATTERN {pattern} WITHIN 1 min")
    return ";\n".join(lines)


@st.composite
def workloads(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = draw(st.sampled_from([_random_workload, _meeting_workload]))(draw)
    runs = draw(
        st.lists(
            st.tuples(st.sampled_from("ABCDEFG"), st.integers(1, 300)), min_size=1, max_size=30
        )
    )
    return text, [t for t, n in runs for _ in range(n)]


def _cheapest(pools: _Pools, full: dict[str, list]) -> float:
    """The least `plan_cost` of all choices of one candidate per pool: every choice, pool by
    pool, less those that already disagree or cannot beat the cheapest found (the least cost of
    each pool left bounds the rest)."""
    keys = list(full)
    least = [min(pools.cost(pools.by_key[k], n) for n in full[k]) for k in keys]
    rest = [sum(least[i:]) for i in range(len(keys) + 1)]
    best = math.inf
    stack: list[tuple[int, dict, float]] = [(0, {}, 0.0)]
    while stack:
        i, chosen, total = stack.pop()
        if total + rest[i] >= best:
            continue
        if i == len(keys):
            assert plan_cost(pools, chosen) == pytest.approx(total)
            best = total
            continue
        k = keys[i]
        for node in full[k]:
            nodes = {**chosen, k: node}
            if all(
                pools.fits(pools.by_key[a], nodes[a], b, nodes[b])
                for a in nodes
                for b in {x.reuse for x in nodes[a] if x.reuse}
                if b in nodes and k in (a, b)
            ):
                stack.append((i + 1, nodes, total + pools.cost(pools.by_key[k], node)))
    return best


@settings(max_examples=200, deadline=None)
@given(workloads())
def test_searched_plan_is_the_cheapest_choice_of_candidates(case):
    """Every plan is valid and costs what it says; GLORIA's and NoPrune's are the cheapest of all
    choices of one candidate per pool, also where queries split and meet again (found by
    conditioning on the pools that cut the cycles), Greedy's no cheaper."""
    text, stream = case
    template = TransitionTemplate.of(parse_workload(text))
    stats = StreamStats.of(stream)
    pools = _Pools(template, stats, CPU_PLAN_COSTS)
    plans = {s: find_plan(template, stats, search=s) for s in SEARCHES}
    for plan in plans.values():
        assert plan_cost(pools, plan.nodes) == pytest.approx(plan.cost)
        assert plan.cost <= plan.nonshared * (1 + 1e-12)
    # (Greedy weighs two candidates a pool, the number `explain` prints; it printed the pools)
    assert plans["greedy"].candidates == 2 * len(template.pools)
    full = {}
    for pool in template.pools:
        full[pool.key] = pools.generate(pool, full)
    best = _cheapest(pools, full)
    for s in ("gloria", "noprune"):
        assert plans[s].cost == pytest.approx(best), s
        assert plans[s].exact, s
    assert plans["greedy"].cost >= best * (1 - 1e-12)


SPLIT_AND_MEET = """
q0: RETURN COUNT(*) PATTERN SEQ(A, B, C, D) WITHIN 1 min;
q1: RETURN COUNT(*) PATTERN SEQ(A, B, C, D) WITHIN 1 min;
q2: RETURN COUNT(*) PATTERN SEQ(A, F, B, C, D) WITHIN 1 min;
q3: RETURN COUNT(*) PATTERN SEQ(A, F, B, C, D) WITHIN 1 min
"""


def test_routes_that_split_and_meet_again_get_the_cheapest_plan(monkeypatch):
    """q0, q1 and q2, q3 leave A apart and meet at B: the ties close a cycle. Searched without
    one of its ties and repaired, the plan cost 9x the cheapest over a stream of C alone; the
    search now conditions on a pool that cuts the cycle and finds it. Beyond CUT_CHOICES it
    falls back to the repaired plan, which `explain` says is not proven."""
    template = TransitionTemplate.of(parse_workload(SPLIT_AND_MEET))
    stats = StreamStats.of(["C"] * 50 + ["A", "F", "B", "C", "D"] * 20)
    pools = _Pools(template, stats, CPU_PLAN_COSTS)
    full: dict[str, list] = {}
    for pool in template.pools:
        full[pool.key] = pools.generate(pool, full)
    best = _cheapest(pools, full)
    for s in ("gloria", "noprune"):
        plan = find_plan(template, stats, search=s)
        assert plan.exact and plan.cost == pytest.approx(best), s
        assert "not proven" not in plan.describe()
    monkeypatch.setattr(plan_search, "CUT_CHOICES", 1)
    plan = find_plan(template, stats)
    assert not plan.exact and "not proven optimal" in plan.describe()
    assert plan_cost(pools, plan.nodes) == pytest.approx(plan.cost)
    assert plan.cost >= best


#: Six routes into C (each from its own pool), on through D and E: tran(C, D)'s arrivals have
#: more than PART_COMBOS combinations of options, so its candidates are cut to alike ones.
SIX_ROUTES = ";\n".join(
    f"q{i}_{j}: RETURN COUNT(*) PATTERN SEQ({a}, {b}, C, D, E){w} WITHIN 1 min"
    for i, (a, b, w, n) in enumerate(
        [
            ("L", "F+", " WHERE L.v > 1", 2),
            ("B", "J", "", 3),
            ("K", "B", " WHERE K.v > 1", 2),
            ("L", "G", " WHERE L.v > 1", 2),
            ("B", "H", " WHERE B.v > 1", 2),
            ("K", "I", " WHERE K.v > 1", 3),
            ("L", "H", "", 2),
        ]
    )
    for j in range(n)
)


def test_a_plan_over_cut_candidates_is_not_called_exact():
    """Where a pool's candidates were cut to alike combinations (`_alike_combos`), the cheapest
    candidate is no proven optimum: Greedy's plan, which continues each route's Q-set through
    tran(C, D), was no candidate and cost 0.57 of the plan called exact (a helper's review).
    Such a plan is not exact, and Greedy's is weighed against it."""
    template = TransitionTemplate.of(parse_workload(SIX_ROUTES))
    for stats in (
        StreamStats.uniform({t for q in parse_workload(SIX_ROUTES) for t in q.types}),
        StreamStats.of(list("BCDEFGHIJKL") * 30),
    ):
        greedy = find_plan(template, stats, search="greedy")
        for s in ("gloria", "noprune"):
            plan = find_plan(template, stats, search=s)
            assert not plan.exact and "candidates cut" in plan.describe(), s
            assert plan.cost <= greedy.cost * (1 + 1e-12), s


def test_queries_that_enter_a_cycle_first_may_share_it_without_the_others():
    """A Kleene pool's candidates hold the queries that reach the cycle from no pool before it
    (Greedy's choice): here q2's B interrupts every run of SEQ(P, T)+ for a block holding q2,
    so the whole class does not pay, while q0 and q1, which start with the cycle, see one long
    run. GLORIA found nothing to share and cost twice Greedy's plan (a helper's hunt, 7 of
    3,000 random workloads)."""
    text = """
    q0: RETURN COUNT(*) PATTERN SEQ(SEQ(P, T)+, C) WITHIN 1 min;
    q1: RETURN COUNT(*) PATTERN SEQ(SEQ(P, T)+, D) WITHIN 1 min;
    q2: RETURN COUNT(*) PATTERN SEQ(B, SEQ(P, T)+, C) WITHIN 1 min
    """
    template = TransitionTemplate.of(parse_workload(text))
    stats = StreamStats.of(["P", "T", "B"] * 300 + ["C", "D"])
    plans = {s: find_plan(template, stats, search=s) for s in SEARCHES}
    for s in ("gloria", "noprune"):
        blocks = {b.queries for b in plans[s].nodes["SEQ(P, T)+"]}
        assert blocks == {frozenset({"q0", "q1"})}, s
        assert plans[s].cost <= plans["greedy"].cost * (1 + 1e-12), s


@settings(max_examples=60, deadline=None)
@given(workloads(), workloads())
def test_a_kept_search_space_finds_the_plan_of_a_fresh_one(case, other):
    """A workload's search space, kept across calls whose statistics differ (stage_sharing.py
    keeps one per workload), gives the plan a fresh search gives, in every search."""
    text, stream = case
    template = TransitionTemplate.of(parse_workload(text))
    space = SearchSpace(template)
    for events in (stream, other[1], stream, list(reversed(stream))):
        stats = StreamStats.of(events)
        for s in SEARCHES:
            kept = find_plan(template, stats, search=s, space=space)
            fresh = find_plan(template, stats, search=s)
            assert (kept.nodes, kept.cost, kept.exact) == (fresh.nodes, fresh.cost, fresh.exact)


def test_a_kleene_cycle_shares_the_classes_that_pay_and_a_kept_space_follows_them():
    """Of a Kleene cycle's classes, the plan shares those whose runs are long among their
    queries' types; which those are depends on the stream, so a search space kept from a stream
    where one class pays gives, on a stream where the other does, the fresh search's plan."""
    text = ";".join(
        [f"a{i}: RETURN COUNT(*) PATTERN SEQ(A, SEQ(P, T)+, D) WITHIN 1 min" for i in range(8)]
        + [
            f"b{i}: RETURN COUNT(*) PATTERN SEQ(B, SEQ(P, T)+, E) WHERE P.v > 1 WITHIN 1 min"
            for i in range(8)
        ]
    )
    template = TransitionTemplate.of(parse_workload(text))
    space = SearchSpace(template)
    # P, T runs that one class's types cut after every pair and the other's do not see
    for cut, end, paying in (("B", "E", "a"), ("A", "D", "b")):
        stats = StreamStats.of((["A", "B"] + ["P", "T", cut] * 300 + [end]) * 5)
        kept = find_plan(template, stats, space=space)
        fresh = find_plan(template, stats)
        assert {b.queries for b in fresh.nodes["SEQ(P, T)+"]} == {
            frozenset(f"{paying}{i}" for i in range(8))
        }
        assert (kept.nodes, kept.cost) == (fresh.nodes, fresh.cost)


@settings(max_examples=100, deadline=None)
@given(
    events=st.lists(st.sampled_from("ABCD"), max_size=40),
    pairs=st.lists(
        st.tuples(st.sets(st.sampled_from("ABCD"), min_size=1), st.sets(st.sampled_from("ABCD"))),
        min_size=1,
        max_size=6,
    ),
)
def test_statistics_runs_equal_a_count_by_hand(events, pairs):
    """Runs of the body's events among the seen types' events (others ignored), against a loop
    over the events kept; several pairs counted in one pass (`prefetch`)."""
    stats = StreamStats.of(events)
    stats.prefetch((frozenset(body), frozenset(body | others)) for body, others in pairs)
    for body, others in pairs:
        seen = body | others
        kept = [e for e in events if e in seen]
        want = sum(e in body and (i == 0 or kept[i - 1] not in body) for i, e in enumerate(kept))
        assert stats.runs(frozenset(body), frozenset(seen)) == want


def test_statistics_count_runs_among_the_types_seen():
    s = StreamStats.of(list("ABBABBBCB"))
    assert s.n(["B"]) == 6
    assert s.runs(frozenset("B"), frozenset("AB")) == 2
    assert s.runs(frozenset("B"), frozenset("ABC")) == 3
    assert s.runs(frozenset("B"), frozenset("B")) == 1
    u = StreamStats.uniform("AB", n=10)
    assert u.runs(frozenset("B"), frozenset("AB")) == pytest.approx(6.0)
    assert np.isfinite(u.runs(frozenset("B"), frozenset("B")))


def test_unknown_search_is_an_error():
    t = TransitionTemplate.of(parse_workload(FIGURE_2))
    with pytest.raises(ValueError, match="search must be one of 'gloria', 'greedy', 'noprune'"):
        find_plan(t, StreamStats.uniform("A"), search="bell")


def test_explain_plans_over_the_queries_and_events_the_engine_runs():
    """`plan_workload` (what `gpu-hamlet explain` prints) is the plan `dynamic` runs: its
    statistics come from the first `sample` events of the workload's types, as the engine keeps
    them (events of other types up front once left the explained sample without a P or T), and
    an AND's counts are in its template as in the engine's."""
    text = ";\n".join(
        [
            f"q{i}: RETURN COUNT(*) PATTERN SEQ(A, SEQ(P, T)+, C{i % 2}) WHERE A.x < {i + 1} "
            "WITHIN 1 min"
            for i in range(8)  # (the filters keep every A: equal queries would run once)
        ]
        + ["z: RETURN COUNT(*) PATTERN SEQ(A, SEQ(P, T)+, C0) AND SEQ(B, D) WITHIN 1 min"]
    )
    types = ["Z"] * 2_000 + (["A", "B"] + ["P", "T"] * 100 + ["C0", "C1", "D"]) * 10
    table = pa.table(
        {
            "time": np.arange(len(types), dtype=np.int64) // 20,
            "type": types,
            "x": np.zeros(len(types), np.int64),
        }
    )
    ran = []

    def keep(*args):
        ran.append(stage_sharing.stage_plan(*args)[0])
        return ran[-1], []

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stage_sharing, "SAMPLE", 1_500)
        mp.setattr(evaluate, "stage_plan", keep)
        gpu_hamlet.aggregate(table, text, numeric="float", backend="cpu")
    shown = plan_workload(parse_workload(text), table, sample=1_500)
    assert ran[0] is not None and {b.queries for b in shown.nodes["SEQ(P, T)+"]}
    assert (shown.nodes, shown.cost) == (ran[0].nodes, ran[0].cost)
    assert "z[left]" in shown.template.queries


def test_a_pool_reached_from_many_pools_takes_alike_combinations():
    """tran(T0, T1) is reached from five pools tran(A_k, T0), with five options each: every
    combination would be 3,126 candidates. Beyond PART_COMBOS the pool takes each part's options
    alone and, per shape, every part's option of that shape: a few dozen candidates, and the
    plan costs what the search over every combination finds (each start's Q-sets, split by
    their filters, continue their own chain)."""
    from gpu_hamlet.engine import plan_search

    text = ";\n".join(
        f"q{i}: RETURN COUNT(*) PATTERN SEQ(A{i % 5}, T0, T1, C{(i // 5) % 5})"
        + (f" WHERE A{i % 5}.x < {1 - (i // 25) / 10:g}" if i >= 25 else "")
        + " WITHIN 1 min"
        for i in range(100)
    )
    rng = np.random.default_rng(0)
    types: list[str] = []
    while len(types) < 50_000:
        types += [f"A{rng.integers(5)}", *["T0", "T1"] * 20, f"C{rng.integers(5)}"]
    stats = StreamStats.of(types)
    template = TransitionTemplate.of(parse_workload(text))
    few = find_plan(template, stats)
    assert len(_Pools(template, stats, CPU_PLAN_COSTS).candidates()["tran(T0, T1)"]) < 100
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan_search, "PART_COMBOS", 10**9)
        every = find_plan(TransitionTemplate.of(parse_workload(text)), stats)
    assert few.cost == pytest.approx(every.cost) and few.cost < 0.1 * few.nonshared

"""GLORIA's optimizer (issue 20): optimisation time and plan cost of GLORIA, Greedy and NoPrune.

    python benchmarks/bench_plan_search.py [--queries 40 80 120 160 200] [--lengths 2 4 6 8 10]
        [--events 100000] [--repeat 3]

GLORIA's three workload kinds (paper section 8.1) over the ridesharing types: *SEQ* (queries
sharing SEQ prefixes, with different suffixes, GROUPBY and filters), *Kleene* (100 queries around
one shared Kleene sub-pattern of length 2 to 10, flat or nested, with different SEQ prefixes and
suffixes) and *mixed* (SEQ to Kleene queries 6:1 to 2:1). Statistics come from one pass over a
ridesharing stream of `--events` events (timed apart). Each line: the best of `--repeat` runs of
template construction plus search, the number of candidate plans, and the estimated cost against
sharing nothing.
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass

import numpy as np
from harness import best_time

from gpu_hamlet import parse_workload
from gpu_hamlet.datagen import RIDESHARING_TYPES, ridesharing
from gpu_hamlet.engine.plan_search import SEARCHES, StreamStats, find_plan
from gpu_hamlet.engine.transitions import TransitionTemplate


@dataclass(frozen=True)
class Vocabulary:
    """What the generated queries are made of: the stream's types, GROUPBY clauses and filters
    (`{t}` is the filtered type)."""

    types: tuple[str, ...]
    groups: tuple[str, ...]
    where: tuple[str, ...]


RIDES = Vocabulary(
    tuple(RIDESHARING_TYPES),
    ("", " GROUPBY district", " GROUPBY driver"),
    ("", " WHERE {t}.speed > 10", " WHERE {t}.price < 30"),
)


def _query(i: int, pattern: str, rng: np.random.Generator, first: str, v: Vocabulary) -> str:
    where = v.where[rng.integers(len(v.where))].format(t=first)
    group = v.groups[rng.integers(len(v.groups))]
    return f"q{i}: RETURN COUNT(*) PATTERN {pattern}{where}{group} WITHIN 30 min SLIDE 10 min"


def seq_workload(n: int, seed: int = 0, v: Vocabulary = RIDES) -> str:
    """n SEQ queries: one of 8 shared prefixes of 2 types, then 1 to 3 other types."""
    rng = np.random.default_rng(seed)
    types = list(v.types)
    prefixes = [list(rng.choice(types, 2, replace=False)) for _ in range(8)]
    out = []
    for i in range(n):
        pre = prefixes[i % len(prefixes)]
        rest = [t for t in rng.permutation(types) if t not in pre][: rng.integers(1, 4)]
        out.append(_query(i, f"SEQ({', '.join(pre + rest)})", rng, pre[0], v))
    return ";\n".join(out)


def kleene_workload(n: int, length: int, seed: int = 0, v: Vocabulary = RIDES) -> str:
    """n queries containing one Kleene sub-pattern of `length` types (nested in every third
    query: SEQ(X, SEQ(...)+)+), between a prefix of 1 type and a suffix of 1 type."""
    rng = np.random.default_rng(seed)
    types = list(v.types)
    body = types[:length]
    others = types[length:]
    flat = f"SEQ({', '.join(body)})+" if length > 1 else f"{body[0]}+"
    nested = f"SEQ({others[-1]}, {flat})+"
    out = []
    for i in range(n):
        pre, post = rng.choice(others[:-1], 2, replace=False)
        kleene = nested if i % 3 == 2 else flat
        out.append(_query(i, f"SEQ({pre}, {kleene}, {post})", rng, str(pre), v))
    return ";\n".join(out)


def mixed_workload(n: int, ratio: int, seed: int = 0, v: Vocabulary = RIDES) -> str:
    """n queries, one Kleene query (sub-pattern of length 4) per `ratio` SEQ queries."""
    k = n // (ratio + 1)
    seq = seq_workload(n - k, seed, v).split(";\n")
    kle = [
        line.replace(f"q{i}:", f"k{i}:", 1)
        for i, line in enumerate(kleene_workload(k, 4, seed, v).split(";\n"))
    ]
    return ";\n".join(seq + kle)


def timed(text: str, stats: StreamStats, search: str, repeat: int) -> tuple[float, object]:
    workload = parse_workload(text)
    plans = []
    best = best_time(
        lambda: plans.append(find_plan(TransitionTemplate.of(workload), stats, search=search)),
        repeat,
    )
    return best, plans[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, nargs="+", default=[40, 80, 120, 160, 200])
    ap.add_argument("--lengths", type=int, nargs="+", default=[2, 4, 6, 8, 10])
    ap.add_argument("--ratios", type=int, nargs="+", default=[6, 4, 2])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"# {platform.machine()} {platform.python_version()}")
    events = ridesharing(args.events, seed=1)
    t0 = time.perf_counter()
    stats = StreamStats.of(events.column("type").to_pylist())
    print(f"statistics pass over {args.events:,} events: {(time.perf_counter() - t0) * 1e3:.1f} ms")
    cases = [(f"SEQ, {n} queries", seq_workload(n)) for n in args.queries]
    cases += [(f"Kleene, 100 queries, length {m}", kleene_workload(100, m)) for m in args.lengths]
    cases += [(f"mixed, 100 queries, 1:{r}", mixed_workload(100, r)) for r in args.ratios]
    print(f"{'workload':<34} {'search':<8} {'time ms':>8} {'cands':>6} {'cost/unshared':>14}")
    for name, text in cases:
        for search in SEARCHES:
            secs, plan = timed(text, stats, search, args.repeat)
            ratio = plan.cost / plan.nonshared  # type: ignore[attr-defined]
            cands = plan.candidates  # type: ignore[attr-defined]
            print(f"{name:<34} {search:<8} {secs * 1e3:8.2f} {cands:6d} {ratio:14.3f}")


if __name__ == "__main__":
    main()

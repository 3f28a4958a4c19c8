"""What sharing a set's bursts could gain in a call, estimated from a sample of its sorted rows.

`sharing.may_pay` decides whether `dynamic` analyses a set at all, from an estimate of the gain
over the runs the set's Kleene type forms (each burst lies in one). That estimate gave every
query every burst, but a query only runs the events its pruning keeps (`pruning.py`): over
bench_sharing.py's bursts of 50, a query SEQ(X, B+, Y) within a minute keeps 2% of the B events,
so it gave 89 ms of gain to 5 queries whose whole `none` call took 23 ms, and `dynamic` lost
1.2-1.3x to `none` there. Both the runs and the share of the Kleene events that a few of the
queries keep come from a few blocks of the sorted rows (a pass over all 500,000 rows for the
runs took 1.2 ms of that 23 ms call; docs/architecture.md section 4, step 2).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from gpu_hamlet.core.panes import float_panes
from gpu_hamlet.engine.burst_slots import run_lengths
from gpu_hamlet.engine.matching import Matcher
from gpu_hamlet.engine.partitions import SortedKeys, window_run_ids
from gpu_hamlet.engine.pruning import rows_by_code, typed_may_complete
from gpu_hamlet.query.plan import QueryPlan, Windowing
from gpu_hamlet.query.workload import Query

#: Rows sampled in all, in SAMPLE_BLOCKS blocks spread evenly over the sorted rows (each block
#: much longer than a window or a burst on the streams measured, so a block's edges cut few).
SAMPLE_ROWS = 8192
SAMPLE_BLOCKS = 4
#: Queries pruned, spread evenly over the set's: their shares differ by pattern (2% to 20% on
#: bench_sharing.py's bursts of 50), and pruning each one costs a compiled call.
SAMPLE_QUERIES = 8
#: The same for a Q-set of GLORIA's stages (`KeptShares`), whose gate weighs many Q-sets.
KEPT_QUERIES = 4


def sample_rows(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(the sorted rows sampled, whether each starts a block): every row up to SAMPLE_ROWS,
    else SAMPLE_BLOCKS blocks of equal length spread evenly."""
    if n <= SAMPLE_ROWS:
        first = np.zeros(n, bool)
        first[:1] = True
        return np.arange(n, dtype=np.int64), first
    size = SAMPLE_ROWS // SAMPLE_BLOCKS
    starts = np.arange(SAMPLE_BLOCKS, dtype=np.int64) * (n // SAMPLE_BLOCKS)
    rows = (starts[:, None] + np.arange(size, dtype=np.int64)).ravel()
    first = np.zeros(rows.shape[0], bool)
    first[::size] = True
    return rows, first


def _runs(first: np.ndarray, base: np.ndarray) -> np.ndarray:
    """An id per sampled row, equal along a run of equal `base` within a block."""
    cut = first.copy()
    cut[1:] |= base[1:] != base[:-1]
    return np.cumsum(cut)


def mean_share(shares: Iterable[float], need: float, count: int) -> float:
    """The mean of the `count` shares kept (1.0 where there is none), taken one by one, each a
    compiled pass of pruning (40-80 us): once the mean of two or more is under a quarter of
    `need` (the share below which the caller's sharing cannot pay), the others are not asked
    for. Queries' shares differ by pattern (2% to 20% over bench_sharing.py's bursts of 50), so
    one does not decide that; but once the others, all kept whole, would leave the mean of all
    below `need`, the answer is no whatever they are (the mean returned is then below `need`
    too), and they are not asked for either (of bench_gloria.py's 100 bursty queries over a
    body of 10 types in sequence, the Q-sets that need 92% kept and keep 80% ask two queries,
    not four)."""
    seen: list[float] = []
    for share in shares:
        seen.append(share)
        total = sum(seen)
        if len(seen) >= 2 and total < len(seen) * need / 4:
            break
        if total + (count - len(seen)) < count * need:
            break
    return float(np.mean(seen)) if seen else 1.0


Segments = Callable[[np.ndarray, np.ndarray, int | float], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class RowSample:
    """Sampled sorted rows (`sample_rows`) of a call's `SortedKeys`, with the partition runs a
    block's edges also cut; `scale` is all the rows over those sampled (1: every row)."""

    rows: np.ndarray
    first: np.ndarray
    codes: np.ndarray
    part: np.ndarray  # per row: its run of one partition within one block
    scale: float
    #: the sampled rows' events (`SortedKeys.order`) and times: each pruning pass reads them
    order: np.ndarray
    time: np.ndarray
    #: per tumbling window width: the sample's window runs (`kept_by_code`)
    _windows: dict[int | float, np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, keys: SortedKeys) -> RowSample:
        n = keys.codes.shape[0]
        rows, first = sample_rows(n)
        scale = n / rows.shape[0] if rows.shape[0] else 1.0
        return cls(
            rows,
            first,
            keys.codes[rows],
            _runs(first, keys.pid[rows]),
            scale,
            keys.order[rows],
            keys.time[rows],
        )

    def run_lengths(self, role: np.ndarray) -> np.ndarray:
        """`burst_slots.run_lengths` over the sample: how many runs of each length (not
        scaled)."""
        return run_lengths(self.codes, self.part, role)

    def kept_share(
        self,
        queries: Sequence[Query],
        code: int,
        keys: SortedKeys,
        plans: dict[str, QueryPlan],
        matcher: Matcher,
        segments: Segments,
        need: float = 0.0,
    ) -> float:
        """The mean share of the sampled events of type `code` that a query's pruning keeps,
        over up to SAMPLE_QUERIES of the flat `queries` (1.0 where the sample has none), asked
        until `need` decides (`mean_share`: 50 small queries over 2,100 events made 8 passes a
        call, and 2 since)."""
        if not np.count_nonzero(self.codes == code):
            return 1.0
        step = max(1, -(-len(queries) // SAMPLE_QUERIES))
        shares = (
            self.kept_by_code(q, keys, plans, matcher, segments)[code] / self.counts[code]
            for q in queries[::step]
        )
        return mean_share(shares, need, len(queries[::step]))

    @functools.cached_property
    def counts(self) -> np.ndarray:
        """The sampled events of each type code."""
        return np.bincount(self.codes)

    @functools.cached_property
    def _by_code(self) -> tuple[np.ndarray, np.ndarray]:
        return rows_by_code(self.codes)

    def kept_by_code(
        self,
        q: Query,
        keys: SortedKeys,
        plans: dict[str, QueryPlan],
        matcher: Matcher,
        segments: Segments,
    ) -> np.ndarray:
        """How many sampled events of each type code the query's pruning keeps, pruned as
        `QueryRows` prunes it alone: by partition, or by the runs of its tumbling windows, the
        blocks' edges cutting those runs."""
        plan = plans[q.name]
        tpl, w = plan.template, plan.windowing
        if w.full:
            run = self.part
        else:  # the sample's own window runs: those of all rows cost 1-2 ms more
            if w.seg not in self._windows:
                pid = keys.pid[self.rows]
                self._windows[w.seg] = _runs(
                    self.first, window_run_ids(pid, self.time, w.seg, segments)
                )
            run = self._windows[w.seg]
        kept, _ = typed_may_complete(
            self.codes, matcher.position_of_code(tpl), tpl.is_start, tpl.is_end,
            self.order, matcher.drop_mask(q), run, self.time, w.within,
            by_code=self._by_code,
        )  # fmt: skip
        return np.bincount(self.codes[kept], minlength=self.counts.shape[0])


class KeptShares:
    """The share of a Q-set's events of some types that its queries' pruning keeps, from each
    query's `RowSample` of its partitioning (made when first asked, for a call): alone, a query
    runs only those, so sharing a run saves only those (`SharedStages.saved_per_run`). On
    streams of type runs, queries `SEQ(X, B+, Y)` within 10 minutes kept 63% of their events,
    and the stage gate that gave them all shared runs that cost 1.2-3.8x the best fixed mode
    (BENCHMARKS.md, GLORIA)."""

    def __init__(
        self,
        queries: Iterable[Query],
        keys: Callable[[Query], SortedKeys],
        plans: dict[str, QueryPlan],
        matcher: Matcher,
        segments: Segments,
        codes: Callable[[str], int],
    ) -> None:
        self.queries = {q.name: q for q in queries}
        self.keys, self.plans, self.matcher, self.segments = keys, plans, matcher, segments
        self.code_of = codes
        self._samples: dict[int, tuple[SortedKeys, RowSample]] = {}
        self._kept: dict[str, tuple[RowSample, np.ndarray]] = {}
        self._shares: dict[tuple[tuple[str, ...], frozenset[str]], float] = {}
        self._alike: dict[tuple, np.ndarray] = {}  # kept counts per way of pruning

    def __call__(self, names: Sequence[str], types: Sequence[str], need: float = 0.0) -> float:
        """The mean over up to KEPT_QUERIES of the queries `names` of the share of their
        sampled events of `types` that each keeps (1.0 where the sample holds none), asked
        until `need`, the share below which the caller's stage cannot pay, decides
        (`mean_share`)."""
        key = (tuple(names), frozenset(types))
        if key not in self._shares:
            # Queries pruned already first: each other one costs a compiled pass (40-80 us; the
            # gate asks of many overlapping Q-sets: 39 passes for NASDAQ's 100 Kleene queries
            # with 8 a Q-set, 3 ms of a 170 ms call). Where pruning keeps next to nothing (1,000
            # groups, or windows shorter than a run), two queries decide: 21 passes took 1.5 ms
            # of a 7.8 ms call there (bursty Kleene, 50 queries, 100,000 events), 15 after.
            step = max(1, -(-len(names) // KEPT_QUERIES))
            done = [n for n in names if n in self._kept]
            asked = (done + [n for n in names[::step] if n not in self._kept])[:KEPT_QUERIES]
            codes = [c for c in map(self.code_of, key[1]) if c >= 0]

            def shares() -> Iterator[float]:
                for n in asked:
                    sample, kept = self._of(n)
                    mine = [c for c in codes if c < kept.shape[0]]
                    total = int(sample.counts[mine].sum())
                    if total:
                        yield int(kept[mine].sum()) / total

            self._shares[key] = mean_share(shares(), need, len(asked))
        return self._shares[key]

    def _of(self, name: str) -> tuple[RowSample, np.ndarray]:
        if name not in self._kept:
            q = self.queries[name]
            keys = self.keys(q)
            if id(keys) not in self._samples:  # (the keys are the partitioner's, kept alive)
                self._samples[id(keys)] = (keys, RowSample.of(keys))
            sample = self._samples[id(keys)][1]
            # Queries that prune alike share the pass: the same pattern, filters and windows
            # (of 100 bursty SEQ queries, 25 differ: the gate's passes took 8 ms of a 80 ms
            # call, 4 after).
            w = self.plans[name].windowing
            alike = (id(keys), q.pattern, frozenset(q.filters), w.full, w.seg, w.within)
            if alike not in self._alike:
                self._alike[alike] = sample.kept_by_code(
                    q, keys, self.plans, self.matcher, self.segments
                )
            self._kept[name] = (sample, self._alike[alike])
        return self._kept[name]


class PaneRuns:
    """How many runs of one pane the first events of GLORIA's sample form (the events as given,
    those of a type some query reads, as `stage_plan` samples them), for the named queries'
    common pane: every run of a sub-pattern is cut there (`SharedStages`), while the sample's
    statistics follow types alone. Without it, a stretch of every type its Q-set reads was one
    run of 25,000 events on the NASDAQ ticks, whose panes of 10 minutes hold about 70."""

    def __init__(self, time: np.ndarray, windows: Callable[[str], Windowing]) -> None:
        self.time, self.windows = time, windows
        self._runs: dict[tuple[int | float, int], int] = {}
        self._panes: dict[tuple[str, ...], int | float] = {}  # (the gate asks of a Q-set often)

    def __call__(self, names: Sequence[str], n: int) -> int:
        named = tuple(names)
        if named not in self._panes:
            segs = [self.windows(name).seg for name in names]
            ints = [s for s in segs if isinstance(s, int)]
            self._panes[named] = math.gcd(*ints) if len(ints) == len(segs) else min(segs)
        key = (self._panes[named], n)
        if key not in self._runs:  # (the engine's panes: floor(t / width) for float times)
            t = self.time[:n]
            ids = float_panes(t, key[0]) if t.dtype.kind == "f" else t // np.int64(key[0])
            self._runs[key] = int(np.count_nonzero(ids[1:] != ids[:-1])) + int(n > 0)
        return self._runs[key]

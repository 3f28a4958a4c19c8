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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gpu_hamlet.engine.burst_slots import run_lengths
from gpu_hamlet.engine.matching import Matcher
from gpu_hamlet.engine.partitions import SortedKeys, window_run_ids
from gpu_hamlet.engine.pruning import rows_by_code, typed_may_complete
from gpu_hamlet.query.plan import QueryPlan
from gpu_hamlet.query.workload import Query

#: Rows sampled in all, in SAMPLE_BLOCKS blocks spread evenly over the sorted rows (each block
#: much longer than a window or a burst on the streams measured, so a block's edges cut few).
SAMPLE_ROWS = 8192
SAMPLE_BLOCKS = 4
#: Queries pruned, spread evenly over the set's: their shares differ by pattern (2% to 20% on
#: bench_sharing.py's bursts of 50), and pruning each one costs a compiled call.
SAMPLE_QUERIES = 8


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


@dataclass(frozen=True)
class RowSample:
    """Sampled sorted rows (`sample_rows`) of a call's `SortedKeys`, with the partition runs a
    block's edges also cut; `scale` is all the rows over those sampled (1: every row)."""

    rows: np.ndarray
    first: np.ndarray
    codes: np.ndarray
    part: np.ndarray  # per row: its run of one partition within one block
    scale: float

    @classmethod
    def of(cls, keys: SortedKeys) -> RowSample:
        n = keys.codes.shape[0]
        rows, first = sample_rows(n)
        scale = n / rows.shape[0] if rows.shape[0] else 1.0
        return cls(rows, first, keys.codes[rows], _runs(first, keys.pid[rows]), scale)

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
        segments: Callable[[np.ndarray, np.ndarray, int | float], tuple[np.ndarray, np.ndarray]],
    ) -> float:
        """The mean share of the sampled events of type `code` that a query's pruning keeps,
        over up to SAMPLE_QUERIES of the flat `queries` (1.0 where the sample has none). Each
        query is pruned as `QueryRows` prunes it alone: by partition, or by the runs of its
        tumbling windows, the blocks' edges cutting those runs."""
        codes = self.codes
        total = int(np.count_nonzero(codes == code))
        if total == 0:
            return 1.0
        by_code = rows_by_code(codes)
        order, pid, time = keys.order[self.rows], keys.pid[self.rows], keys.time[self.rows]
        runs: dict[int | float, np.ndarray] = {}  # per tumbling window width
        step = max(1, -(-len(queries) // SAMPLE_QUERIES))
        shares = []
        for q in queries[::step]:
            plan = plans[q.name]
            tpl, w = plan.template, plan.windowing
            if w.full:
                run = self.part
            else:  # the sample's own window runs: those of all rows cost 1-2 ms more
                if w.seg not in runs:
                    runs[w.seg] = _runs(self.first, window_run_ids(pid, time, w.seg, segments))
                run = runs[w.seg]
            kept, _ = typed_may_complete(
                codes, matcher.position_of_code(tpl), tpl.is_start, tpl.is_end, order,
                matcher.drop_mask(q), run, time, w.within, by_code=by_code,
            )  # fmt: skip
            shares.append(np.count_nonzero(codes[kept] == code) / total)
        return float(np.mean(shares))

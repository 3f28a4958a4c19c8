"""How much of a sharable set's Kleene events pruning leaves its queries, from a sample.

`sharing.may_pay` bounds what sharing a set's bursts could gain before the set is analysed, by
giving every query of the set every burst. But a query only runs the events its pruning keeps
(`pruning.py`): over bench_sharing.py's bursts of 50, a query SEQ(X, B+, Y) within a minute keeps
2% of the B events, so that bound gave 89 ms of gain to 5 queries whose whole `none` call took
23 ms, and `dynamic` lost 1.2-1.3x to `none` there (docs/architecture.md section 2, sharing).
Pruning a few of the queries over a few blocks of the sorted rows gives the share they keep, for
about what one query's pruning costs over the whole input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from gpu_hamlet.engine.matching import Matcher
from gpu_hamlet.engine.partitions import SortedKeys, window_run_ids
from gpu_hamlet.engine.pruning import rows_by_code, typed_may_complete
from gpu_hamlet.query.plan import QueryPlan
from gpu_hamlet.query.workload import Query

#: Rows sampled in all, in SAMPLE_BLOCKS blocks spread evenly over the sorted rows (each block
#: much longer than a window on the streams measured, so a block's edges lose few trends).
SAMPLE_ROWS = 8192
SAMPLE_BLOCKS = 4
#: Queries sampled, spread evenly over the set's: their shares differ by pattern (2% to 20% on
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


def kept_share(
    queries: Sequence[Query],
    code: int,
    keys: SortedKeys,
    plans: dict[str, QueryPlan],
    matcher: Matcher,
    segments: Callable[[np.ndarray, np.ndarray, int | float], tuple[np.ndarray, np.ndarray]],
) -> float:
    """The mean share of the events of type `code` that a query's pruning keeps, over up to
    SAMPLE_QUERIES of the flat `queries` and the sampled rows (1.0 where the sample has none).
    Each query is pruned as `QueryRows` prunes it alone: by partition, or by the runs of its
    tumbling windows, the sample's blocks cutting those runs."""
    rows, first = sample_rows(keys.codes.shape[0])
    codes = keys.codes[rows]
    total = int(np.count_nonzero(codes == code))
    if total == 0:
        return 1.0
    by_code = rows_by_code(codes)
    order, pid, time = keys.order[rows], keys.pid[rows], keys.time[rows]
    runs: dict[int | float | None, np.ndarray] = {}  # per tumbling window width (None: whole)
    step = max(1, -(-len(queries) // SAMPLE_QUERIES))
    shares = []
    for q in queries[::step]:
        plan = plans[q.name]
        tpl, w = plan.template, plan.windowing
        width = None if w.full else w.seg
        if width not in runs:  # the sample's own runs: those of all rows cost 1-2 ms more
            base = pid if width is None else window_run_ids(pid, time, width, segments)
            cut = first.copy()
            cut[1:] |= base[1:] != base[:-1]
            runs[width] = np.cumsum(cut)
        kept, _ = typed_may_complete(
            codes, matcher.position_of_code(tpl), tpl.is_start, tpl.is_end, order,
            matcher.drop_mask(q), runs[width], time, w.within, by_code=by_code,
        )  # fmt: skip
        shares.append(np.count_nonzero(codes[kept] == code) / total)
    return float(np.mean(shares))

"""AND (docs/semantics.md section 2): unordered pairs of distinct trends of one partition and
window, one matching each side, from three trend counts the engine computes like any query's.

With L trends of the partition and window matching the left side, R the right and B both, the
pairs number L*R - B*(B+1)/2: the ordered pairs (t1 left, t2 right) are L*R, less the B pairs
of a trend with itself, less one of the two orders of each of the B*(B-1)/2 pairs of distinct
trends that match both sides. The count is not linear in the events, so it is formed per
partition and window, then added up over a group's partitions. So an AND query runs as three
COUNT(*) queries grouped by its whole partition (GROUPBY and equivalence attributes), exact at
any size (float in float mode), and `combine` forms its table from theirs.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import pyarrow as pa

from gpu_hamlet.core.numeric import DECIMAL38_LIMIT, int_text, text_int
from gpu_hamlet.engine.options import DEFAULTS, Options
from gpu_hamlet.engine.partitions import group_key, key_array, key_text, key_values
from gpu_hamlet.errors import NumericOverflowError
from gpu_hamlet.names import AND_SIDES, and_run_name, together_run_name
from gpu_hamlet.query.pattern import And, Both
from gpu_hamlet.query.schema import in_result_order
from gpu_hamlet.query.time_axis import column_ticks
from gpu_hamlet.query.workload import Aggregate, Query, Workload


def run_queries(workload: Workload) -> Workload:
    """The queries the engine runs for `workload` (an AND as its three counts, queries alike
    but for their names and RETURN as one: `run_as`): what sharing and GLORIA's plan look at,
    in `evaluate` and in `explain` alike."""
    runs, _ = run_as([run for q in workload for run in runs_of(q, DEFAULTS)])
    return Workload(tuple(q for q, _ in runs))


def run_as(
    runs: list[tuple[Query, Options]],
) -> tuple[list[tuple[Query, Options]], dict[str, str]]:
    """The runs the engine makes for `runs`, and the run each query that is not run itself takes
    its table's columns from, by name. Queries equal in everything but their names and RETURN
    aggregates (pattern, filters, windows, groups, options) read the same events into the same
    windows, so they run once: a query equal to an earlier one but for its name as that one, and
    queries whose aggregates differ as one run of all their aggregates (`together_run_name`,
    unless a query has that name or two aggregates one column name). GLORIA's workloads draw
    their queries from a few patterns (bench_gloria.py's bursty ones at 100 queries hold 25
    distinct ones, four times each), and a dashboard asks COUNT and AVG of one pattern apart."""
    alike: dict[tuple[Query, Options], list[Query]] = {}
    for q, o in runs:
        alike.setdefault((replace(q, name="", aggregates=()), o), []).append(q)
    names = {q.name for q, _ in runs}
    out: list[tuple[Query, Options]] = []
    take: dict[str, str] = {}
    for (_, o), qs in alike.items():
        aggs = tuple(dict.fromkeys(a for q in qs for a in q.aggregates))
        together = together_run_name(qs[0].name)
        if len(qs) > 1 and any(q.aggregates != aggs for q in qs) and together not in names:
            if len({a.name for a in aggs}) == len(aggs):
                out.append((replace(qs[0], name=together, aggregates=aggs), o))
                take.update((q.name, together) for q in qs)
                continue
        first: dict[tuple, str] = {}
        for q in qs:
            name = first.setdefault(q.aggregates, q.name)
            if name == q.name:
                out.append((q, o))
            else:
                take[q.name] = name
    return out, take


def runs_of(q: Query, options: Options) -> list[tuple[Query, Options]]:
    """The queries the engine runs for `q`, each with its options: `q` itself, or for an AND its
    three counts, exact at any size unless the mode is float."""
    if not isinstance(q.pattern, And):
        return [(q, options)]
    left, right = q.pattern.left, q.pattern.right
    exact = options.numeric != "float"
    opts = replace(
        options,
        numeric="bigint" if exact else "float",
        on_overflow="error" if exact else "null",
    )
    # The counts are grouped by the whole partition: their column must not take the name of one
    # of its attributes (`[count]`, or `GROUPBY count` with `COUNT(*) AS n`).
    name = "count"
    while name in q.partition_attrs:
        name += "_"
    count = (Aggregate("COUNT", None, None, name),)
    return [
        (
            replace(
                q,
                name=and_run_name(q.name, side),
                pattern=pattern,
                aggregates=count,
                group_items=(),
                groupby=q.partition_attrs,
                text=f"{q.name}: the trends of {pattern}",
            ),
            opts,
        )
        for side, pattern in zip(AND_SIDES, (left, right, Both(left, right)))
    ]


def combine(q: Query, tables: dict[str, pa.Table], schema: pa.Schema, options: Options) -> pa.Table:
    """The AND query's table (of `schema`) from its three counts' tables (`runs_of` order)."""
    part_cols = (*q.partition_attrs, "window_start")
    counts: dict[tuple, dict[str, Any]] = {}
    ends: dict[tuple, Any] = {}
    for side, (run, _) in zip(AND_SIDES, runs_of(q, options)):
        t = tables[run.name]
        cols = [key_values(t.column(c)) for c in part_cols]
        end = key_values(t.column("window_end"))
        end_ticks = column_ticks(t.column("window_end"))
        counts_of = t.column(run.aggregates[0].name).to_pylist()
        for i, (values, n) in enumerate(zip(zip(*cols), counts_of)):
            key = group_key(values)
            counts.setdefault(key, {})[side] = None if n is None else _number(n)
            ends[key] = end[i], end_ticks[i].item()
    ng = len(q.groupby)
    totals: dict[tuple, Any] = {}
    picked: dict[tuple, tuple] = {}  # per group: the key and window end its row shows (and ticks)
    for key, c in counts.items():
        cl, cr, cb = c.get("left", 0), c.get("right", 0), c.get("both", 0)
        if None in (cl, cr, cb):  # a float count beyond float64
            pairs = None
        else:  # in Python ints: float counts are whole, and a product may pass float64 (in
            # floats inf - inf made NaN, and the row was dropped as holding no pair)
            il, ir, ib = int(cl), int(cr), int(cb)
            pairs = il * ir - ib * (ib + 1) // 2
        group = key[:ng] + key[-1:]
        before = totals.get(group, 0)
        totals[group] = None if before is None or pairs is None else before + pairs
        picked[group] = (key, ends[key])
    rows = {g: v for g, v in totals.items() if v is None or v > 0}
    # COUNT(*), the only aggregate of an AND: each of its columns (aliases) holds the count (a
    # RETURN of GROUPBY names alone has none: its rows are the groups and windows with a pair).
    counted = [agg.name for agg in q.aggregates]
    typ = schema.field(counted[0]).type if counted else pa.null()
    out: dict[str, list] = {name: [] for name in schema.names}
    for group, total in rows.items():
        key, (end, end_ticks) = picked[group]
        if total is not None and pa.types.is_decimal(typ) and total >= DECIMAL38_LIMIT:
            total = None
        if total is not None and pa.types.is_floating(typ):
            try:
                total = float(total)
            except OverflowError:  # beyond float64
                total = None
        if total is None and counted and options.on_overflow == "error":
            raise _overflow(q, schema, group, key[-1], end, end_ticks)
        for g, v in zip(q.groupby, group[:ng]):
            out[g].append(v)
        out["window_start"].append(key[-1])
        out["window_end"].append(end)
        for name in counted:
            out[name].append(_typed(total, typ))
    table = pa.table({n: key_array(out[n], schema.field(n).type) for n in schema.names})
    assert table.schema.equals(schema), f"query {q.name}: {table.schema} is not {schema}"
    return in_result_order(table, q.groupby)


def _number(v: Any) -> int | float:
    """A count as the parts return it: a decimal string (bigint, of any length) or a float."""
    return text_int(v) if isinstance(v, str) else float(v)


def _typed(total: int | float | None, typ: pa.DataType) -> Any:
    if total is None:
        return None
    if pa.types.is_decimal(typ):
        return Decimal(int(total))
    if pa.types.is_string(typ):
        return int_text(int(total))
    return float(total)


def _overflow(
    q: Query, schema: pa.Schema, group: tuple, start: Any, end: Any, end_ticks: int | float
) -> NumericOverflowError:
    typ = schema.field(q.aggregates[0].name).type
    values = [(g, key_text(v, schema.field(g).type)) for g, v in zip(q.groupby, group)]
    bound = schema.field("window_start").type
    floating = pa.types.is_floating(typ)
    what = (
        "is beyond the float64 range" if floating else "does not fit decimal(38, 0) (10^38 or more)"
    )
    ways = ["numeric='bigint' for exact digits of any size"]  # (an AND's aggregates are counts)
    ways += [] if floating else ["numeric='float' for float64"]
    window = (key_text(start, bound), key_text(end, bound))
    return NumericOverflowError.of(
        q.name, "COUNT(*)", values, window, what, [*ways, "on_overflow='null'"], end_ticks
    )

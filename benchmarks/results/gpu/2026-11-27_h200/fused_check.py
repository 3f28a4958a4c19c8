"""The check of 2026-11-27's calls 2 and 3 on an H200 (issue 22): bench_sharing.py's 25 queries
over bursts of 50 with each sharing mode on the GPU backend, and, where a fused run's queries do
not share their rows' sort (`QueryRows.fused`), which of its conditions fails. Run from the
repository's root:

    python3 benchmarks/results/gpu/2026-11-27_h200/fused_check.py gpu 200000 dynamic static none
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))

from bench_sharing import TYPES, kleene_sharing  # noqa: E402

import gpu_hamlet  # noqa: E402
from gpu_hamlet.datagen import kleene_stream  # noqa: E402
from gpu_hamlet.engine.query_rows import QueryRows  # noqa: E402

original = QueryRows.fused.__func__  # type: ignore[attr-defined]


def fused(cls: type[QueryRows], members: list[QueryRows]) -> QueryRows:
    first = members[0]
    for m in members:
        bad = [
            what
            for what, fails in (
                ("sources", [id(s) for s in m.sources] != [id(s) for s in first.sources]),
                ("fill", m._fill != first._fill),
                ("seg", m.seg is not None),
                ("gid", m.gid_of_pid is not first.gid_of_pid),
                ("label", m.label is not m.pos),
            )
            if fails
        ]
        if bad:
            print(m.plan.query.name, "vs", first.plan.query.name, bad, flush=True)
            break
    return original(cls, members)


QueryRows.fused = classmethod(fused)  # type: ignore[method-assign, assignment]
events = kleene_stream(int(sys.argv[2]), seed=3, types=TYPES, mean_burst=50, mean_other_run=3.0)
for mode in sys.argv[3:]:
    try:
        gpu_hamlet.aggregate(
            events,
            kleene_sharing(25),
            backend=sys.argv[1],
            sharing=mode,
            numeric="float",
            on_overflow="null",
        )
        print(mode, "ok")
    except AssertionError as exc:
        print(mode, "ASSERT", exc)

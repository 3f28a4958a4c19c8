"""What `gpu-hamlet demo` says and how it starts: a short local Spark session, the lines that
explain the data and the counts, and the kernel warm-up that tells a first (compiling) run."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gpu_hamlet.engine.host_memory import SPARK_WORKER_CONF
from gpu_hamlet.kernel_cache import WarmUp, warm_up

if TYPE_CHECKING:
    from gpu_hamlet.engine.options import Options

#: Session settings for a run of a few seconds of work on a small machine.
DEMO_SPARK_CONF = {
    # C2, the JVM's optimising JIT, spends more CPU compiling Spark than a short job gets back:
    # with C1 only the warm demo took 29-32 s of CPU instead of 49-51 s on 2 cores
    # (benchmarks/results/LOG.md, the demo's session).
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    "spark.ui.enabled": "false",  # nobody looks at it during a demo
    "spark.ui.showConsoleProgress": "false",  # progress bars would garble the demo's output
    **SPARK_WORKER_CONF,  # one malloc arena in the engine's workers
}

#: Why the demo's counts are so large (docs/architecture.md section 2).
WHY_HUGE = (
    "Why the counts are huge: a burst of n matching events holds 2^n - 1 trends (every "
    "non-empty subset, in time order), so a 100-event burst alone holds 1.3e30; "
    "gpu-hamlet counts them exactly without building any."
)


def demo_session(master: str) -> Any:
    """A SparkSession for the demo (DEMO_SPARK_CONF; the JVM options apply only when this
    starts the JVM); workers run this Python, which has the package installed."""
    from pyspark.sql import SparkSession

    from gpu_hamlet.spark.jvm_log import quiet_jvm_start

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    quiet_jvm_start()  # (Spark's startup warnings, above the demo's output)
    builder = SparkSession.builder.appName("gpu-hamlet demo").master(master)
    for key, value in DEMO_SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def describe_data(events: pa.Table) -> str:
    """One line on the generated stream: size, types, districts, drivers and time span."""
    n = events.num_rows
    head = f"generated {n:,} ridesharing events"
    if not n:
        return head
    counts = sorted(pc.value_counts(events["type"]).to_pylist(), key=lambda c: -c["counts"])
    top = ", ".join(f"{c['values']} {100 * c['counts'] / n:.0f}%" for c in counts[:3])
    span = pc.min_max(events["time"]).as_py()
    minutes = (span["max"] - span["min"]).total_seconds() / 60
    length = f"{minutes / 60:.1f} h" if minutes >= 60 else f"{minutes:.0f} min"
    return (
        f"{head} (gpu_hamlet/datagen.py, the HAMLET paper's ridesharing stream): "
        f"{len(counts)} event types ({top}, ...), "
        f"{pc.count_distinct(events['district']).as_py()} districts, "
        f"{pc.count_distinct(events['driver']).as_py():,} drivers, {length} from "
        f"{span['min']:%Y-%m-%d %H:%M}"
    )


def warm_up_kernels(
    events: pa.Table, workload: Any, options: Options, max_events: int = 20_000
) -> WarmUp:
    """Run the engine in-process the way the Spark tasks will (whole groups; a group cut into two
    time slices, their pane summaries and the windows composed across the cut), so the kernels the
    job needs are compiled once here, or loaded, and the workers find them in the cache.

    Which kernel signatures run depends on the data (windows of many panes, sliding windows), so
    the sample is every k-th event over the whole time span, at most `max_events` of them
    (`events` in time order, as gpu_hamlet/datagen.py makes them)."""
    from gpu_hamlet.engine.evaluate import evaluate
    from gpu_hamlet.engine.summaries import Cut, compose_query, summarize
    from gpu_hamlet.query.time_axis import time_axis

    step = max(1, -(-events.num_rows // max_events))
    sample = events.take(np.arange(0, events.num_rows, step))
    time_col = options.time_col

    def run() -> None:
        evaluate(sample, workload, options, part=True)
        ticks = sample[time_col].cast(pa.int64()).to_numpy()
        if not ticks.size:
            return
        cut = Cut(int(ticks[0]), max((int(ticks[-1]) - int(ticks[0])) // 2, 1), 1)
        halves = cut.slice_of(ticks)
        parts = [
            summarize(sample.filter(pa.array(halves == r)), workload, cut, options)[1]
            for r in (0, 1)
        ]
        axis = time_axis(sample.schema.field(time_col).type, time_col)
        for q in workload:
            summaries = [s for s in (p[q.name] for p in parts) if s is not None]
            if summaries:
                compose_query(summaries, q, sample.schema, axis, cut, options)

    return warm_up(run)


__all__ = ["DEMO_SPARK_CONF", "WHY_HUGE", "demo_session", "describe_data", "warm_up_kernels"]

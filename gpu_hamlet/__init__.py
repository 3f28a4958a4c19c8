"""gpu-hamlet: event trend aggregation (HAMLET) as a batch engine.

`parse_workload(text)` reads the query language; `aggregate(events, workload, ...)` answers a
workload in-process, `aggregate_stream(batches, workload, ...)` the same over batches in time
order in bounded memory; `gpu_hamlet.spark.trend_aggregate` runs it on Spark.
"""

from gpu_hamlet.engine.evaluate import aggregate
from gpu_hamlet.engine.sharing import RunStats
from gpu_hamlet.engine.streaming import aggregate_stream
from gpu_hamlet.errors import (
    AbsentTypeWarning,
    EventDataError,
    GpuHamletError,
    NumericOverflowError,
    WorkloadError,
)
from gpu_hamlet.query.parser import parse_workload
from gpu_hamlet.query.workload import Aggregate, Filter, PatternElement, Query, Workload

__version__ = "0.1.0"

__all__ = [
    "AbsentTypeWarning",
    "Aggregate",
    "EventDataError",
    "Filter",
    "GpuHamletError",
    "NumericOverflowError",
    "PatternElement",
    "Query",
    "RunStats",
    "Workload",
    "WorkloadError",
    "aggregate",
    "aggregate_stream",
    "parse_workload",
]

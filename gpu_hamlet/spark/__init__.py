"""gpu-hamlet on Apache Spark: `trend_aggregate(df, workload, **options)`."""

from gpu_hamlet.spark.job import trend_aggregate

__all__ = ["trend_aggregate"]

"""Spark discovers Python data sources in top-level `pyspark_*` modules: `format("weir")` works
without calling weir.spark.register(spark)."""

from weir.spark.source import WeirDataSource as DefaultSource

__all__ = ["DefaultSource"]

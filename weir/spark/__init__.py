"""Weir's PySpark data source: `format("weir")`, batch and streaming, read and write.

    from weir.spark import register
    register(spark)
    df = (spark.readStream.format("weir")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092").option("subscribe", "events").load())

Options and schema are those of Spark's Kafka source; see weir/spark/README.md.
"""

from __future__ import annotations

__all__ = ["register", "WeirDataSource", "SOURCE_NAME"]

SOURCE_NAME = "weir"


def register(spark) -> None:
    """Make `format("weir")` available in this SparkSession."""
    from weir.spark.source import WeirDataSource
    spark.dataSource.register(WeirDataSource)


def __getattr__(name: str):
    if name == "WeirDataSource":
        from weir.spark.source import WeirDataSource
        return WeirDataSource
    raise AttributeError(name)


def local_session(app_name: str = "weir", cores: int = 2, **conf):
    """A local SparkSession for demos, benchmarks and tests, with `weir` registered.

    Python workers run this interpreter (so they import this Weir); the UI is off; the driver binds
    to 127.0.0.1; shuffles use few partitions, as suits one small machine.
    """
    import os
    import sys

    from pyspark.sql import SparkSession
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
               .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.sql.shuffle.partitions", str(cores * 2))
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark

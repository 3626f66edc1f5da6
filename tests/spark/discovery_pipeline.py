"""A user's pipeline, run from outside the repository with the venv's python: `format("weir")`
with no register call (Spark finds pyspark_weir with pkgutil.iter_modules).

    python discovery_pipeline.py MASTER BOOTSTRAP TOPIC

Writes ten rows, reads them back, prints how many came back.
"""

import os
import sys

from pyspark.sql import SparkSession


def main(master: str, bootstrap: str, topic: str) -> None:
    spark = (SparkSession.builder.master(master).appName("weir-discovery")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.executor.memory", "512m").config("spark.cores.max", "2").getOrCreate())
    rows = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(10)], "key string, value string").repartition(2)
    # Spark's Python data sources take no ErrorIfExists, the default save mode: append
    rows.write.format("weir").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).mode("append").save()
    back = (spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").load())
    print(back.count(), sorted(r.value.decode() for r in back.select("value").collect()) == sorted(
        f"v{i}" for i in range(10)))
    spark.stop()


if __name__ == "__main__":
    assert not os.environ.get("PYTHONPATH"), "the pipeline must find Weir as the venv installed it"
    main(*sys.argv[1:])

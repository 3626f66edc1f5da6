"""The `weir` Spark data source in a few lines: batch read, streaming read, batch and streaming write.

Start a cluster first (`weir up`, bootstrap 127.0.0.1:9092) and create topics `events` and `events-upper`, e.g.
`weir topics create --topic events --partitions 3 --replication-factor 3` (and the same for events-upper). Then:

    .venv/bin/python examples/read_and_write.py
"""

import tempfile

from pyspark.sql import functions as F

from weir.spark import local_session  # or: weir.spark.register(your_spark_session)

BOOTSTRAP = "127.0.0.1:9092"

spark = local_session("weir-example")

# batch write: a value column (and optionally key, topic, partition, headers)
(spark.range(1000).select(F.col("id").cast("string").alias("key"),
                          F.concat(F.lit("event "), F.col("id").cast("string")).alias("value"))
 .write.format("weir").option("kafka.bootstrap.servers", BOOTSTRAP).option("topic", "events")
 .mode("append").save())

# batch read: Spark's Kafka source schema
df = (spark.read.format("weir").option("kafka.bootstrap.servers", BOOTSTRAP).option("subscribe", "events")
      .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
df.groupBy("partition").count().show()

# streaming read, at most 500 offsets per micro-batch, everything available now, then stop
query = (spark.readStream.format("weir").option("kafka.bootstrap.servers", BOOTSTRAP)
         .option("subscribe", "events").option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "500")
         .load().select(F.upper(F.col("value").cast("string")).alias("value"))
         .writeStream.format("weir").option("kafka.bootstrap.servers", BOOTSTRAP).option("topic", "events-upper")
         .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start())
query.awaitTermination()
print([p["numInputRows"] for p in query.recentProgress])

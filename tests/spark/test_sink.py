"""Writing to Weir with Spark: batch and streaming, read back through the source."""

import pytest
from pyspark.sql import functions as F
from spark.helpers import BASE_TS, create_topic, produce, values


def read_topic(spark, bootstrap, topic):
    return (spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("includeHeaders", "true").load())


def test_batch_write_round_trip(spark, broker):
    bs = broker.bootstrap
    create_topic(bs, "sink", partitions=2)
    df = spark.range(500).select(
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).cast("binary").alias("value"),
        (F.col("id") % 2).cast("int").alias("partition"),
        F.array(F.struct(F.lit("n").alias("key"), F.col("id").cast("string").cast("binary").alias("value")))
        .alias("headers"))
    df.write.format("weir").option("kafka.bootstrap.servers", bs).option("topic", "sink").mode("append").save()
    rows = read_topic(spark, bs, "sink").collect()
    assert len(rows) == 500
    for r in rows:
        i = int(r.key[1:])
        assert r.value == f"v{i}".encode() and r.partition == i % 2
        assert [(h.key, h.value) for h in r.headers] == [("n", str(i).encode())]

    # a topic column routes each row; a timestamp column sets each record's timestamp (KafkaWriteTask)
    create_topic(bs, "sink-a")
    create_topic(bs, "sink-b")
    routed = spark.range(10).select(F.when(F.col("id") < 3, "sink-a").otherwise("sink-b").alias("topic"),
                                    F.col("id").cast("string").alias("value"),
                                    F.timestamp_millis(F.lit(BASE_TS) + F.col("id")).alias("timestamp"))
    routed.write.format("weir").option("kafka.bootstrap.servers", bs).mode("append").save()
    assert read_topic(spark, bs, "sink-a").count() == 3
    got = read_topic(spark, bs, "sink-b").select("value", F.unix_millis("timestamp").alias("ms")).collect()
    assert sorted((int(r.value), r.ms) for r in got) == [(i, BASE_TS + i) for i in range(3, 10)]


def test_streaming_write_copies_a_topic(spark, broker, tmp_path):
    bs = broker.bootstrap
    create_topic(bs, "copy-from", partitions=2)
    create_topic(bs, "copy-to", partitions=2)
    produce(bs, "copy-from", values(300), partitions=2)
    source = (spark.readStream.format("weir").option("kafka.bootstrap.servers", bs).option("subscribe", "copy-from")
              .option("startingOffsets", "earliest").load())
    query = (source.select("key", F.upper(F.col("value").cast("string")).alias("value")).writeStream
             .format("weir").option("kafka.bootstrap.servers", bs).option("topic", "copy-to")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    got = sorted(r.value for r in read_topic(spark, bs, "copy-to").collect())
    assert got == sorted(v.upper() for v in values(300))


@pytest.mark.parametrize("columns, options, message", [
    ("id as key", {"topic": "t"}, "needs a 'value' column"),
    ("cast(id as string) as value", {}, "set the 'topic' option or add a 'topic' column"),
    ("id as value", {"topic": "t"}, "column 'value' must be string or binary, not bigint"),
    ("cast(id as string) as value, id as timestamp", {"topic": "t"}, "'timestamp' must be a timestamp or a double"),
    ("cast(id as string) as value", {"topic": "t", "subscribe": "t"}, "option subscribe is for reading"),
    ("cast(id as string) as value", {"topic": "t", "deliveryGuarantee": "exactly-once",
                                     "transactionalIdPrefix": "p"}, "a batch write needs the batchId option"),
])
def test_bad_writes_fail_before_any_task(spark, columns, options, message):
    writer = spark.range(3).selectExpr(*columns.split(", ")).write.format("weir").mode("append")
    writer = writer.option("kafka.bootstrap.servers", "127.0.0.1:1")
    for k, v in options.items():
        writer = writer.option(k, v)
    with pytest.raises(Exception, match=message):
        writer.save()

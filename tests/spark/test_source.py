"""Reading Weir with Spark: batch, streaming with restarts, read limits, data loss, bad options."""

import json

import pytest
from pyspark.sql import functions as F
from spark.helpers import BASE_TS, create_topic, produce, values, wait_until

from weir.spark.log_reader import list_offsets
from weir.spark.options import EARLIEST, parse_read_options


def reader(spark, bootstrap, **options):
    r = spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def stream(spark, bootstrap, **options):
    r = spark.readStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_equals_what_was_produced_with_every_codec(spark, broker):
    bs = broker.bootstrap
    expected = {}
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        create_topic(bs, f"codec-{codec}", partitions=2)
        for p, key, value in produce(bs, f"codec-{codec}", values(400, codec), partitions=2, compression=codec,
                                     headers=True):
            expected.setdefault(f"codec-{codec}", []).append((p, key, value))
    df = reader(spark, bs, subscribePattern="codec-.*", includeHeaders="true")
    rows = df.collect()
    got = {}
    for r in rows:
        got.setdefault(r.topic, []).append((r.partition, r.offset, r.key, r.value, r.timestampType,
                                            [(h.key, h.value) for h in r.headers]))
    assert set(got) == set(expected)
    for topic, produced in expected.items():
        mine = sorted(got[topic])
        assert [(p, k, v) for p, _, k, v, _, _ in mine] == sorted(produced, key=lambda t: (t[0], int(t[1][1:])))
        for p in (0, 1):  # offsets are dense from 0 in every partition
            assert [o for pp, o, *_ in mine if pp == p] == list(range(200))
        assert all(tt == 0 and hs[0][0] == "seq" and hs[1] == ("h", b"x") for *_, tt, hs in mine)
    first = df.where("topic = 'codec-none' and partition = 0 and offset = 0").collect()[0]
    assert first.timestamp.timestamp() == BASE_TS / 1000  # CreateTime of record 0, in UTC


def test_offset_options_and_splitting(spark, broker):
    bs = broker.bootstrap
    create_topic(bs, "ranges", partitions=2)
    produce(bs, "ranges", values(1000), partitions=2)
    df = reader(spark, bs, subscribe="ranges", startingOffsets=json.dumps({"ranges": {"0": 100, "1": -2}}),
                endingOffsets=json.dumps({"ranges": {"0": 300, "1": -1}}), maxRecordsPerPartition="50")
    assert df.rdd.getNumPartitions() == 4 + 10
    got = df.groupBy("partition").agg(F.min("offset"), F.max("offset"), F.count("*")).orderBy("partition").collect()
    assert [tuple(r) for r in got] == [(0, 100, 299, 200), (1, 0, 499, 500)]
    # minPartitions splits in proportion; assign picks partitions
    df = reader(spark, bs, assign=json.dumps({"ranges": [1]}), minPartitions="5")
    assert df.rdd.getNumPartitions() == 5
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(500))
    # startingTimestamp: the first offset whose timestamp is at or after it
    df = reader(spark, bs, subscribe="ranges", startingTimestamp=str(BASE_TS + 900))
    assert df.count() == 100
    # nothing to read (no partition matches, or start = end): no rows, as Spark's Kafka source
    assert reader(spark, bs, subscribePattern="nothing-.*").count() == 0
    assert reader(spark, bs, subscribe="ranges", startingOffsets=json.dumps({"ranges": {"0": 500, "1": 500}})).count() == 0
    # endingTimestamp: up to the first offset at or after it; a timestamp option wins over startingOffsets
    df = reader(spark, bs, subscribe="ranges", startingOffsets="earliest", startingTimestamp=str(BASE_TS + 100),
                endingTimestamp=str(BASE_TS + 300))
    assert sorted(tuple(r) for r in df.groupBy("partition").agg(F.min("offset"), F.max("offset")).collect()) == [
        (0, 50, 149), (1, 50, 149)]
    # a starting timestamp after every record fails, unless startingOffsetsByTimestampStrategy=latest
    with pytest.raises(Exception, match="No offset matched from request of topic-partition ranges-0"):
        reader(spark, bs, subscribe="ranges", startingTimestamp=str(BASE_TS + 5000)).count()
    assert reader(spark, bs, subscribe="ranges", startingTimestamp=str(BASE_TS + 5000),
                  startingOffsetsByTimestampStrategy="latest").count() == 0


def test_streaming_restarts_read_each_record_exactly_once(spark, broker, tmp_path):
    """AvailableNow and processing-time queries, stopped and restarted from one checkpoint."""
    bs = broker.bootstrap
    create_topic(bs, "events", partitions=3)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run_available_now(max_offsets=None):
        options = {"subscribe": "events", "startingOffsets": "earliest"}
        if max_offsets:
            options["maxOffsetsPerTrigger"] = str(max_offsets)
        query = (stream(spark, bs, **options).select("partition", "offset", "value").writeStream
                 .format("parquet").option("path", out).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None
        return [p["numInputRows"] for p in query.recentProgress]

    produced = produce(bs, "events", values(600), partitions=3)
    sizes = run_available_now(max_offsets=250)
    assert sum(sizes) == 600 and max(sizes) <= 250 and len([s for s in sizes if s]) >= 3, sizes
    produced += produce(bs, "events", values(300, start=600), partitions=3, start=600)
    sizes = run_available_now()
    assert sum(sizes) == 300, sizes

    # a processing-time query picks up records as they arrive, then stops; a restart goes on
    query = (stream(spark, bs, subscribe="events").select("partition", "offset", "value").writeStream
             .format("parquet").option("path", out).option("checkpointLocation", checkpoint)
             .trigger(processingTime="1 second").start())
    try:
        produced += produce(bs, "events", values(150, start=900), partitions=3, start=900)
        wait_until(lambda: spark.read.parquet(out).count() >= 1050, "the running query to catch up", 120)
    finally:
        query.stop()
    produced += produce(bs, "events", values(50, start=1050), partitions=3, start=1050)
    run_available_now()

    rows = spark.read.parquet(out).collect()
    assert len(rows) == 1100
    assert sorted(r.value for r in rows) == sorted(v for _, _, v in produced)
    assert len({(r.partition, r.offset) for r in rows}) == 1100


def test_fail_on_data_loss_both_ways(spark, start_broker):
    broker = start_broker(0, log_retention_check_interval_ms="300")
    bs = broker.bootstrap
    create_topic(bs, "shrinking", partitions=1, **{"segment.bytes": "2048", "retention.bytes": "2048"})
    for i in range(10):
        produce(bs, "shrinking", values(40, start=i * 40), start=i * 40)
    opts = parse_read_options({"kafka.bootstrap.servers": bs, "subscribe": "shrinking"}, streaming=False)
    log_start = wait_until(lambda: list_offsets(opts, {("shrinking", 0): EARLIEST})[("shrinking", 0)],
                           "retention to delete the first segments")
    options = {"subscribe": "shrinking", "startingOffsets": json.dumps({"shrinking": {"0": 0}})}
    with pytest.raises(Exception, match=r"shrinking-0: offsets \[0, \d+\) are gone"):
        reader(spark, bs, **options).count()
    rows = reader(spark, bs, failOnDataLoss="false", **options).select("offset").collect()
    offsets = [r.offset for r in rows]
    assert offsets and offsets[0] >= log_start and offsets == list(range(offsets[0], 400))


def test_a_schema_picks_the_columns_a_query_reads(spark, broker):
    """Spark's Python data source API pushes no columns down: a schema given with .schema() is how a
    query reads fewer (weir bench: a group-by over the value alone is faster than over all seven)."""
    bs = broker.bootstrap
    create_topic(bs, "projected")
    produced = [v for _, _, v in produce(bs, "projected", values(300))]

    def projected(schema: str, **options):
        r = spark.read.format("weir").schema(schema).option("kafka.bootstrap.servers", bs)
        for k, v in {"subscribe": "projected", **options}.items():
            r = r.option(k, v)
        return r.load()

    df = projected("offset long, value binary")
    assert df.columns == ["offset", "value"]
    assert sorted((r.offset, r.value) for r in df.collect()) == list(enumerate(produced))
    for schema, message in [("vale binary", "column 'vale' is not one of the Kafka source's: key, value"),
                            ("offset int", "column 'offset' is bigint, not int"),
                            ("headers array<struct<key:string,value:binary>>", "with includeHeaders=true")]:
        with pytest.raises(Exception, match=message):
            projected(schema).collect()


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "t", "subscrbe": "t"}, "unknown read option 'subscrbe'; did you mean 'subscribe'"),
    ({"subscribe": "t", "assign": '{"t":[0]}'}, "exactly one of subscribe, subscribePattern or assign"),
    ({"subscribe": "t", "startingOffsets": "latest"}, "startingOffsets=latest makes no sense"),
    ({"subscribe": "t", "endingOffsets": '{"t":{"0":"x"}}'}, "t-0 must be a whole number"),
    ({"subscribe": "t", "failOnDataLoss": "maybe"}, "failOnDataLoss must be true or false"),
])
def test_bad_options_fail_before_the_query_starts(spark, options, message):
    with pytest.raises(Exception, match=message.replace("[", r"\[").replace("(", r"\(")):
        reader(spark, "127.0.0.1:1", **options).collect()


def test_bad_streaming_options(spark):
    with pytest.raises(Exception, match="kafka.bootstrap.servers is required"):
        spark.readStream.format("weir").option("subscribe", "t").load()
    query = stream(spark, "127.0.0.1:1", subscribe="t", endingOffsets="latest").writeStream.format("noop").start()
    with pytest.raises(Exception, match="endingOffsets is for batch queries only"):
        query.awaitTermination(60)

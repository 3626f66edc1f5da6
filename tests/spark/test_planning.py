"""Planning and options (no Spark, no broker)."""

import pytest

from weir.spark.options import EARLIEST, LATEST, OptionError, parse_read_options, parse_write_options
from weir.spark.planning import OffsetRange, rate_limit, split_ranges


def test_rate_limit_never_exceeds_the_limit_and_always_progresses():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    latest = {("t", 0): 1000, ("t", 1): 101, ("t", 2): 50, ("t", 3): 7}
    for limit in (1, 2, 3, 10, 333, 1000, 5000):
        end = rate_limit(start, latest, limit)
        taken = sum(end[tp] - start.get(tp, latest[tp]) for tp in latest)
        assert 0 < taken <= limit
        assert all(start.get(tp, latest[tp]) <= end[tp] <= latest[tp] for tp in latest)
    assert rate_limit(start, latest, 10_000) == latest
    # a partition whose log went backwards (truncation) goes back: the loss is reported when planned
    assert rate_limit({("t", 0): 10}, {("t", 0): 5}, 3) == {("t", 0): 5}


def test_split_ranges():
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 5, 5), OffsetRange("t", 2, 0, 10)]
    out = split_ranges(ranges, 300, None)
    assert [(r.partition, r.start, r.end) for r in out] == [
        (0, 0, 250), (0, 250, 500), (0, 500, 750), (0, 750, 1000), (2, 0, 10)]
    out = split_ranges(ranges, None, 8)
    assert len(out) >= 8 and sum(r.size for r in out) == 1010


def test_read_options():
    opts = parse_read_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a, b",
                               "startingoffsets": '{"a":{"0":5,"1":-2}}', "maxoffsetspertrigger": "10",
                               "includeheaders": "TRUE"}, streaming=True)
    assert opts.subscribe == ("a", "b") and opts.include_headers and opts.max_offsets_per_trigger == 10
    assert opts.starting.offsets == {("a", 0): 5, ("a", 1): EARLIEST} and opts.starting.default == LATEST
    assert parse_read_options({"kafka.bootstrap.servers": "h:1", "subscribepattern": "p.*"},
                              streaming=False).matches("pq")


@pytest.mark.parametrize("options, message", [
    ({}, "kafka.bootstrap.servers is required"),
    ({"kafka.bootstrap.servers": "nohost"}, "'nohost' is not host:port"),
    ({"subscribe": "t", "subscribepattern": "x"}, "exactly one of"),
    ({"assign": "[0]"}, "option assign must be JSON like"),
    ({"subscribe": "t", "startingoffsets": "{bad"}, "startingOffsets is not valid JSON"),
    ({"subscribe": "t", "startingoffsets": '{"u":{"0":1}}'}, "names topics that subscribe does not: u"),
    ({"subscribe": "t", "endingoffsets": "earliest"}, "endingOffsets=earliest makes no sense"),
    ({"subscribe": "t", "startingoffsetsbytimestampstrategy": "earliest"}, "must be error or latest"),
    ({"subscribe": "t", "endingoffsetsbytimestamp": '{"u":{"0":1}}'}, "names topics that subscribe does not: u"),
    ({"subscribe": "t", "subscribepattern": "("}, "exactly one of"),
    ({"subscribepattern": "("}, "not a valid regular expression"),
    ({"subscribe": "t", "minpartitions": "0"}, "minPartitions must be positive"),
    ({"subscribe": "t", "kafka.isolation.level": "serializable"}, "read_uncommitted or read_committed"),
])
def test_bad_read_options(options, message):
    options = {"kafka.bootstrap.servers": "h:1", **options} if options and "kafka.bootstrap.servers" not in options \
        else options
    with pytest.raises(OptionError, match=message.replace("(", r"\(")):
        parse_read_options(options, streaming=False)


def test_write_options():
    opts = parse_write_options({"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.linger.ms": "50"})
    assert opts.topic == "t" and opts.producer_config == {"linger.ms": "50"}
    with pytest.raises(OptionError, match="unknown write option 'topik'; did you mean 'topic'"):
        parse_write_options({"kafka.bootstrap.servers": "h:1", "topik": "t"})
    assert not opts.exactly_once


def test_read_committed_and_exactly_once_options():
    base = {"kafka.bootstrap.servers": "h:1"}
    assert parse_read_options({**base, "subscribe": "t", "kafka.isolation.level": "READ_COMMITTED"},
                              streaming=True).read_committed
    assert not parse_read_options({**base, "subscribe": "t"}, streaming=True).read_committed
    opts = parse_write_options({**base, "topic": "t", "deliveryGuarantee": "exactly-once",
                                "transactionalIdPrefix": "counts", "batchId": "0"})
    assert opts.exactly_once and opts.transactional_id_prefix == "counts" and opts.batch_id == 0


@pytest.mark.parametrize("options, message", [
    ({"topic": "t", "deliveryguarantee": "exactly-once"}, "needs transactionalIdPrefix"),
    ({"deliveryguarantee": "exactly-once", "transactionalidprefix": "p"}, "needs the topic option"),
    ({"topic": "t", "transactionalidprefix": "p"}, "transactionalIdPrefix is for deliveryGuarantee=exactly-once"),
    ({"topic": "t", "kafka.transactional.id": "x"}, "name it with transactionalIdPrefix"),
    ({"topic": "t", "deliveryguarantee": "twice"}, "at-least-once or exactly-once"),
    ({"topic": "t", "batchid": "3"}, "batchId is for deliveryGuarantee=exactly-once"),
    ({"topic": "t", "deliveryguarantee": "exactly-once", "transactionalidprefix": "p", "batchid": "-1"},
     "batchId must be a micro-batch id"),
])
def test_bad_exactly_once_options(options, message):
    with pytest.raises(OptionError, match=message):
        parse_write_options({"kafka.bootstrap.servers": "h:1", **options})


def test_kafka_consumer_options_pass_as_in_sparks_kafka_source():
    """Spark hands every kafka.* option to its consumer and refuses only a few, naming why
    (KafkaSourceProvider.validateGeneralOptions)."""
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    parse_read_options({**base, "kafka.request.timeout.ms": "40000", "kafka.max.partition.fetch.bytes": "1048576",
                        "kafka.client.id": "job", "kafka.session.timeout.ms": "10000"}, streaming=True)
    for key, message in [("kafka.auto.offset.reset", "set the source option 'startingOffsets'"),
                         ("kafka.key.deserializer", "keys are deserialized as byte arrays"),
                         ("kafka.value.deserializer", "values are deserialized as byte arrays"),
                         ("kafka.enable.auto.commit", "'enable.auto.commit' is not supported"),
                         ("kafka.interceptor.classes", "'interceptor.classes' is not supported")]:
        with pytest.raises(OptionError, match=message):
            parse_read_options({**base, key: "x"}, streaming=False)


def test_java_producer_options_of_a_write():
    """Spark's Kafka sink hands kafka.* to the Java producer and refuses the serializers
    (KafkaSourceProvider.kafkaParamsForProducer); Weir's producer is librdkafka: the Java names it
    spells otherwise are renamed, and one it does not know fails on the driver, not in every task."""
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    opts = parse_write_options({**base, "kafka.max.request.size": "2097152", "kafka.buffer.memory": "33554432",
                                "kafka.max.block.ms": "60000", "kafka.send.buffer.bytes": "-1",
                                "kafka.compression.type": "zstd", "kafka.acks": "1", "kafka.linger.ms": "20"})
    assert opts.producer_config == {"message.max.bytes": "2097152", "queue.buffering.max.kbytes": "32768",
                                    "socket.send.buffer.bytes": "0", "compression.type": "zstd", "acks": "1",
                                    "linger.ms": "20"}
    for key, value, message in [("kafka.key.serializer", "x", "keys are serialized with ByteArraySerializer"),
                                ("kafka.value.serializer", "x", "value are serialized with ByteArraySerializer"),
                                ("kafka.buffer.memory", "lots", "kafka.buffer.memory must be a whole number"),
                                ("kafka.frobnicate.ms", "1", 'No such configuration property: "frobnicate.ms"'),
                                ("kafka.acks", "sometimes", "Invalid value")]:
        with pytest.raises(OptionError, match=message):
            parse_write_options({**base, key: value})


def test_a_read_planned_with_no_partitions_is_empty():
    """A batch read with nothing to read (an empty topic, starting at the end, a pattern that matches
    nothing) plans no partitions; PySpark then hands `read` one InputPartition(None), and Spark's Kafka
    source answers such a read with no rows."""
    from pyspark.sql.datasource import InputPartition

    from weir.spark.source import WeirBatchReader, kafka_schema
    opts = parse_read_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t"}, streaming=False)
    assert list(WeirBatchReader(opts, kafka_schema()).read(InputPartition(None))) == []


def test_offset_options_take_precedence_as_in_sparks_kafka_source():
    """KafkaSourceProvider.getKafkaOffsetRangeLimit: the global timestamp, then the timestamps per
    partition, then the offsets; the ending ones too; the read limits are ignored by a batch read."""
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    opts = parse_read_options({**base, "startingoffsets": "earliest", "startingoffsetsbytimestamp": '{"t":{"0":5}}',
                               "startingtimestamp": "7", "endingoffsets": "latest",
                               "endingoffsetsbytimestamp": '{"t":{"0":9}}', "maxoffsetspertrigger": "10"},
                              streaming=False)
    assert opts.starting.timestamp == 7 and opts.ending.timestamps == {("t", 0): 9} and not opts.ending.offsets
    assert opts.ending.is_explicit(("t", 0)) and not opts.no_match_latest
    opts = parse_read_options({**base, "startingoffsets": "earliest", "startingoffsetsbytimestamp": '{"t":{"0":5}}',
                               "endingtimestamp": "8", "startingoffsetsbytimestampstrategy": "LATEST"}, streaming=False)
    assert opts.starting.timestamps == {("t", 0): 5} and opts.starting.default == EARLIEST
    assert opts.ending.timestamp == 8 and opts.no_match_latest
    with pytest.raises(OptionError, match="endingOffsetsByTimestamp is for batch queries only"):
        parse_read_options({**base, "endingoffsetsbytimestamp": '{"t":{"0":9}}'}, streaming=True)


def test_min_offsets_per_trigger_waits_up_to_max_trigger_delay(monkeypatch):
    """KafkaMicroBatchStream.delayBatch: fewer new offsets than minOffsetsPerTrigger give no
    micro-batch (latestOffset answers the start) until maxTriggerDelay has passed since the last one."""
    from weir.spark import source
    log_end = {("t", 0): 10}
    monkeypatch.setattr(source, "discover_partitions", lambda opts: list(log_end))
    monkeypatch.setattr(source, "list_offsets", lambda opts, wanted, *a: {tp: log_end[tp] for tp in wanted})
    opts = parse_read_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "minOffsetsPerTrigger": "5",
                               "maxTriggerDelay": "30s", "maxOffsetsPerTrigger": "100"}, streaming=True)
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (5, 30_000)
    reader = source.WeirStreamReader(opts, source.kafka_schema())
    now = [1_000_000.0]
    reader.clock_ms = lambda: now[0]
    limit = reader.getDefaultReadLimit()
    assert reader.latestOffset({"t": {"0": 0}}, limit) == {"t": {"0": 10}}  # the first trigger goes ahead
    log_end[("t", 0)] = 13
    now[0] += 1000
    assert reader.latestOffset({"t": {"0": 10}}, limit) == {"t": {"0": 10}}  # 3 new < 5: wait
    log_end[("t", 0)] = 15
    assert reader.latestOffset({"t": {"0": 10}}, limit) == {"t": {"0": 15}}  # 5 new: go
    log_end[("t", 0)] = 16
    now[0] += 29_999
    assert reader.latestOffset({"t": {"0": 15}}, limit) == {"t": {"0": 15}}
    now[0] += 1
    assert reader.latestOffset({"t": {"0": 15}}, limit) == {"t": {"0": 16}}  # maxTriggerDelay passed
    for options, message in [({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, "is higher than the"),
                             ({"maxTriggerDelay": "soon"}, "maxTriggerDelay must be a time")]:
        with pytest.raises(OptionError, match=message):
            parse_read_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t", **options}, streaming=True)


def test_partitions_gone_or_added_late_are_data_loss(monkeypatch):
    """KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets: a partition of the start missing
    from the end (its topic deleted) and a partition added whose log does not start at 0 are data
    loss; with failOnDataLoss=false the gone partition leaves the offsets (a topic of that name
    created again is read from its earliest offset)."""
    from weir.spark import source
    from weir.spark.log_reader import DataLossError
    log_start = {("t", 0): 0, ("t", 1): 4}
    log_end = {("t", 0): 9, ("t", 1): 9}
    monkeypatch.setattr(source, "discover_partitions", lambda opts: sorted(log_end))
    monkeypatch.setattr(source, "list_offsets",
                        lambda opts, wanted, *a: {tp: (log_start if o == EARLIEST else log_end)[tp]
                                                  for tp, o in wanted.items()})
    base = {"kafka.bootstrap.servers": "h:1", "subscribePattern": "t|u"}
    strict = source.WeirStreamReader(parse_read_options(base, streaming=True), source.kafka_schema())
    lenient = source.WeirStreamReader(parse_read_options({**base, "failOnDataLoss": "false"}, streaming=True),
                                      source.kafka_schema())
    start = {"t": {"0": 2}, "u": {"0": 3}}
    end = lenient.latestOffset(start, lenient.getDefaultReadLimit())
    assert end == {"t": {"0": 9, "1": 9}}
    with pytest.raises(DataLossError, match="u-0 are gone"):
        strict.partitions(start, end)
    with pytest.raises(DataLossError, match="Added partition t-1 starts from 4 instead of 0"):
        strict.partitions({"t": {"0": 2}}, end)
    assert [p.range for p in lenient.partitions(start, end)] == [OffsetRange("t", 0, 2, 9), OffsetRange("t", 1, 4, 9)]


def test_a_timestamp_column_in_milliseconds_as_kafka_write_task_casts_it():
    import datetime

    from weir.spark.produce import _millis
    aware = datetime.datetime(2024, 5, 1, 12, 0, 0, 123999, tzinfo=datetime.timezone.utc)
    assert _millis(aware) == 1714564800123
    assert _millis(aware.astimezone().replace(tzinfo=None)) == 1714564800123  # naive: local time, as PySpark
    assert _millis(1714564800.5) == 1714564800500


def test_sparks_offset_fetch_retry_options_are_taken():
    parse_read_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "fetchOffset.numRetries": "5",
                        "fetchOffset.retryIntervalMs": "100", "groupIdPrefix": "job"}, streaming=True)

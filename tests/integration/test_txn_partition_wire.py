"""Transactions on a partition leader, over the wire (KIP-98): hand-built transactional batches
and WriteTxnMarkers requests, as the coordinator and a transactional producer send them; the LSO
(ListOffsets, Fetch), READ_COMMITTED fetches with their aborted transactions, refused appends
that write nothing, DescribeProducers, and an open transaction surviving kill -9 and a failover."""

import datetime
import struct
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from crc32c import crc32c
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.write_txn_markers.v1.request import WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest
from raw_protocol import NONE, UNKNOWN_TOPIC_OR_PARTITION, RawClient, assert_healthy, create_topic
from waiting import wait_until

from weir.broker.txn_verification import verification_supported
from weir.protocol.codec import build, request_schema
from weir.protocol.record_batch import TRANSACTIONAL_BIT, batch_headers
from weir.protocol.records import encode_batch
from weir.transactions.read_committed import consume_read_committed, consume_read_uncommitted

PRODUCE, FETCH, LIST_OFFSETS, DESCRIBE_PRODUCERS, WRITE_TXN_MARKERS = 0, 1, 2, 61, 27
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, TRANSACTION_COORDINATOR_FENCED, UNKNOWN_SERVER_ERROR = 47, 48, 52, -1
NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 6, 19, 53
P, Q, R = 4000, 5000, 6000
NO_VERIFICATION = {"transaction_partition_verification_enable": "false"}


def txn_batch(values: list[bytes], pid: int, seq: int, epoch: int = 0, transactional: bool = True) -> bytes:
    raw = bytearray(encode_batch(values, keys=[b"k%d" % i for i in range(len(values))], producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq))
    if transactional:
        struct.pack_into(">h", raw, 21, TRANSACTIONAL_BIT)
        struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


def produce(client: RawClient, topic: str, records: bytes, transactional_id: str | None = "tx", partition: int = 0):
    request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout=datetime.timedelta(seconds=10),
                             topic_data=(TopicProduceData(name=topic, partition_data=(
                                 PartitionProduceData(index=partition, records=records),)),))
    return client.call(PRODUCE, 9, request).responses[0].partition_responses[0]


def write_marker(client: RawClient, topic: str, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0,
                 partitions: tuple[int, ...] = (0,)) -> dict[int, int]:
    response = client.call(WRITE_TXN_MARKERS, 1, WriteTxnMarkersRequest(markers=(WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=(WritableTxnMarkerTopic(name=topic, partition_indexes=partitions),)),)))
    [marker] = response.markers
    assert marker.producer_id == pid
    return {p.partition_index: p.error_code for t in marker.topics for p in t.partitions}


def latest(client: RawClient, topic: str, isolation_level: int) -> int:
    response = client.call(LIST_OFFSETS, 7, ListOffsetsRequest(
        replica_id=-1, isolation_level=isolation_level,
        topics=(ListOffsetsTopic(name=topic, partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),)),)))
    partition = response.topics[0].partitions[0]
    assert partition.error_code == NONE, partition
    return partition.offset


def fetch(client: RawClient, topic: str, offset: int, isolation_level: int):
    response = client.call(FETCH, 12, FetchRequest(
        max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=10 << 20, isolation_level=isolation_level,
        topics=(FetchTopic(topic=topic, partitions=(
            FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=10 << 20),)),),
        forgotten_topics_data=(), rack_id=""))
    partition = response.responses[0].partitions[0]
    assert partition.error_code == NONE, partition
    return partition


def aborted(partition) -> list[tuple[int, int]] | None:
    if partition.aborted_transactions is None:
        return None
    return [(a.producer_id, a.first_offset) for a in partition.aborted_transactions]


def values(records) -> list[bytes]:
    return [r.value for r in records]


def read_committed_values(client: RawClient, topic: str) -> list[bytes]:
    answer = fetch(client, topic, 0, 1)
    return values(consume_read_committed(split(bytes(answer.records)) if answer.records else [], aborted(answer)))


def split(records: bytes) -> list[bytes]:
    out, position = [], 0
    for header in batch_headers(records):
        out.append(records[position:position + header.length])
        position += header.length
    return out


def write_two_transactions(client: RawClient, topic: str) -> None:
    """P commits a-b, Q aborts x, a plain record between, R's transaction left open at the end."""
    assert produce(client, topic, txn_batch([b"a"], P, 0)).error_code == NONE  # 0
    assert produce(client, topic, txn_batch([b"x"], Q, 0)).error_code == NONE  # 1
    assert produce(client, topic, encode_batch([b"plain"], keys=[b"k"]), None).error_code == NONE  # 2
    assert produce(client, topic, txn_batch([b"b"], P, 1)).error_code == NONE  # 3
    assert write_marker(client, topic, P, commit=True) == {0: NONE}  # 4
    assert write_marker(client, topic, Q, commit=False) == {0: NONE}  # 5
    assert produce(client, topic, txn_batch([b"open"], R, 0)).error_code == NONE  # 6


def test_read_committed_fetch_and_list_offsets_follow_the_lso(start_broker):
    broker = start_broker(**NO_VERIFICATION)
    with RawClient(broker.port) as client:
        create_topic(client, "txn")
        assert produce(client, "txn", txn_batch([b"a"], P, 0)).error_code == NONE  # 0
        assert produce(client, "txn", txn_batch([b"x"], Q, 0)).error_code == NONE  # 1
        assert latest(client, "txn", 0) == 2 and latest(client, "txn", 1) == 0  # P's transaction is open
        uncommitted = fetch(client, "txn", 0, 0)
        assert uncommitted.last_stable_offset == 0 and aborted(uncommitted) is None
        committed = fetch(client, "txn", 0, 1)
        assert committed.records is None or len(committed.records) == 0
        assert aborted(committed) == []
        assert produce(client, "txn", encode_batch([b"plain"], keys=[b"k"]), None).error_code == NONE  # 2
        assert produce(client, "txn", txn_batch([b"b"], P, 1)).error_code == NONE  # 3
        assert write_marker(client, "txn", P, commit=True) == {0: NONE}  # 4
        assert latest(client, "txn", 1) == 1  # Q's, from 1, still open
        assert write_marker(client, "txn", Q, commit=False) == {0: NONE}  # 5
        assert latest(client, "txn", 1) == 6 == latest(client, "txn", 0)
        assert produce(client, "txn", txn_batch([b"open"], R, 0)).error_code == NONE  # 6
        assert latest(client, "txn", 1) == 6 and latest(client, "txn", 0) == 7

        answer = fetch(client, "txn", 0, 1)
        assert answer.last_stable_offset == 6 and answer.high_watermark == 7
        assert aborted(answer) == [(Q, 1)]
        batches = split(bytes(answer.records))
        assert [h.base_offset for h in batches_headers(batches)] == [0, 1, 2, 3, 4, 5]  # below the LSO only
        assert values(consume_read_committed(batches, aborted(answer))) == [b"a", b"plain", b"b"]
        everything = split(bytes(fetch(client, "txn", 0, 0).records))
        assert values(consume_read_uncommitted(everything)) == [b"a", b"x", b"plain", b"b", b"open"]
        # a fetch past the aborted transaction does not list it
        assert aborted(fetch(client, "txn", 6, 1)) == []
        assert aborted(fetch(client, "txn", 5, 1)) == [(Q, 1)]  # its marker is at 5
    assert_healthy(broker)


def batches_headers(batches: list[bytes]):
    return [batch_headers(b)[0] for b in batches]


def test_refused_transactional_appends_write_nothing(start_broker):
    broker = start_broker(**NO_VERIFICATION)
    with RawClient(broker.port) as client:
        create_topic(client, "refused")
        assert produce(client, "refused", txn_batch([b"a"], P, 0, epoch=3)).error_code == NONE  # 0
        assert write_marker(client, "refused", P, commit=False, epoch=3, coordinator_epoch=7) == {0: NONE}  # 1
        assert produce(client, "refused", txn_batch([b"b"], P, 1, epoch=3)).error_code == NONE  # 2
        leo = latest(client, "refused", 0)
        # a non-transactional batch of a producer inside its transaction
        assert produce(client, "refused", txn_batch([b"c"], P, 2, epoch=3, transactional=False)).error_code \
            == INVALID_TXN_STATE
        # a deposed coordinator's marker, then one of an older producer epoch
        assert write_marker(client, "refused", P, commit=True, epoch=3, coordinator_epoch=6) == \
            {0: TRANSACTION_COORDINATOR_FENCED}
        assert write_marker(client, "refused", P, commit=True, epoch=2, coordinator_epoch=7) == \
            {0: INVALID_PRODUCER_EPOCH}
        # a client's control batch is an invalid record, whatever its producer
        control = bytearray(txn_batch([b"m"], P, 2, epoch=3))
        struct.pack_into(">h", control, 21, 0x30)
        struct.pack_into(">I", control, 17, crc32c(bytes(control[21:])))
        assert produce(client, "refused", bytes(control)).error_code == 87  # INVALID_RECORD
        assert latest(client, "refused", 0) == leo == 3
        assert values(consume_read_uncommitted(split(bytes(fetch(client, "refused", 0, 0).records)))) == [b"a", b"b"]
        # markers for a partition this broker does not have
        assert write_marker(client, "refused", P, commit=True, epoch=3, coordinator_epoch=7, partitions=(0, 5)) == \
            {0: NONE, 5: UNKNOWN_TOPIC_OR_PARTITION}
        assert latest(client, "refused", 1) == 4
    assert_healthy(broker)


def test_transactional_produce_is_verified_with_the_coordinator(start_broker):
    """transaction.partition.verification.enable (KIP-890, on by default): a batch starting a
    transaction on the partition waits for the coordinator's verification; with no coordinator
    (no __transaction_state) the producer gets the retriable NOT_ENOUGH_REPLICAS and nothing is
    written. A transactional batch needs a transactional id in the request."""
    broker = start_broker()
    with RawClient(broker.port) as client:
        create_topic(client, "verified")
        assert produce(client, "verified", txn_batch([b"a"], P, 0)).error_code == NOT_ENOUGH_REPLICAS
        assert produce(client, "verified", txn_batch([b"a"], P, 0), None).error_code == \
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert latest(client, "verified", 0) == 0
        # non-transactional batches never ask
        assert produce(client, "verified", txn_batch([b"i"], Q, 0, transactional=False), None).error_code == NONE
        create_topic(client, "__transaction_state")  # a coordinator partition led here
        answer = produce(client, "verified", txn_batch([b"a"], P, 0))
        if verification_supported():  # the coordinator knows no transaction of "tx": refused
            assert answer.error_code != NONE and latest(client, "verified", 0) == 1
        else:  # a coordinator that cannot verify: appended unverified, as Kafka does
            assert answer.error_code == NONE and latest(client, "verified", 1) == 1
    assert_healthy(broker)


def describe_producers(client: RawClient, topic: str) -> dict[int, tuple[int, int]]:
    response = client.call(DESCRIBE_PRODUCERS, 0, DescribeProducersRequest(
        topics=(TopicRequest(name=topic, partition_indexes=(0,)),)))
    return {p.producer_id: (p.coordinator_epoch, p.current_txn_start_offset)
            for p in response.topics[0].partitions[0].active_producers}


def test_an_open_transaction_survives_kill_9_and_describe_producers_shows_it(start_broker):
    broker = start_broker(**NO_VERIFICATION)
    with RawClient(broker.port) as client:
        create_topic(client, "durable")
        write_two_transactions(client, "durable")
        assert describe_producers(client, "durable") == {P: (0, -1), Q: (0, -1), R: (-1, 6)}
    broker.kill()
    broker.start()
    with RawClient(broker.port) as client:
        wait_until(lambda: latest_or_none(client, "durable", 0) == 7, "the leader back", timeout_s=30)
        assert latest(client, "durable", 1) == 6  # R's transaction is still open
        assert describe_producers(client, "durable") == {P: (0, -1), Q: (0, -1), R: (-1, 6)}
        answer = fetch(client, "durable", 0, 1)
        assert aborted(answer) == [(Q, 1)]  # the index came back
        assert write_marker(client, "durable", R, commit=True) == {0: NONE}  # 7
        assert latest(client, "durable", 1) == 8
        assert read_committed_values(client, "durable") == [b"a", b"plain", b"b", b"open"]
    broker.stop()  # a clean stop writes the snapshot; it loads again
    broker.start()
    with RawClient(broker.port) as client:
        wait_until(lambda: latest_or_none(client, "durable", 1) == 8, "the leader back", timeout_s=30)
        assert read_committed_values(client, "durable") == [b"a", b"plain", b"b", b"open"]
    assert_healthy(broker)


def latest_or_none(client: RawClient, topic: str, isolation_level: int) -> int | None:
    response = client.call(LIST_OFFSETS, 7, ListOffsetsRequest(
        replica_id=-1, isolation_level=isolation_level,
        topics=(ListOffsetsTopic(name=topic, partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),)),)))
    partition = response.topics[0].partitions[0]
    return partition.offset if partition.error_code == NONE else None


def partition_metadata(bootstrap: str, topic: str) -> dict:
    """partition -> (leader, replicas, isr)."""
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in topics[topic].partitions.values()}


def read_committed_by_librdkafka(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """What a real read_committed consumer (librdkafka) reads of partition 0 from the start."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while len(out) < expected and time.monotonic() < deadline:
            out += [m.value() for m in consumer.consume(100, timeout=0.5) if m.error() is None]
        out += [m.value() for m in consumer.consume(100, timeout=1) if m.error() is None]  # nothing more
    finally:
        consumer.close()
    return out


def test_a_follower_that_becomes_leader_keeps_the_lso_and_the_aborted_index(start_cluster):
    cluster = start_cluster(**NO_VERIFICATION)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("failover", 1, 3, config={"min.insync.replicas": "2"})])["failover"].result(30)
    wait_until(lambda: len(partition_metadata(cluster.bootstrap, "failover")[0][2]) == 3, "a full ISR")
    leader_id = partition_metadata(cluster.bootstrap, "failover")[0][0]
    with RawClient(cluster.brokers[leader_id].port) as client:
        write_two_transactions(client, "failover")
        assert latest(client, "failover", 1) == 6
    assert read_committed_by_librdkafka(cluster.bootstrap, "failover", 3) == [b"a", b"plain", b"b"]
    cluster.brokers[leader_id].kill()
    wait_until(lambda: partition_metadata(cluster.bootstrap, "failover")[0][0] not in (leader_id, -1),
               "a new leader")
    new_leader = cluster.brokers[partition_metadata(cluster.bootstrap, "failover")[0][0]]
    with RawClient(new_leader.port) as client:
        wait_until(lambda: latest_or_none(client, "failover", 0) == 7, "the new leader's HW")
        assert latest(client, "failover", 1) == 6  # R's transaction is still open on the new leader
        assert aborted(fetch(client, "failover", 0, 1)) == [(Q, 1)]
        assert describe_producers(client, "failover") == {P: (0, -1), Q: (0, -1), R: (-1, 6)}
        assert write_marker(client, "failover", R, commit=False) == {0: NONE}  # 7: R aborts on the new leader
        assert latest(client, "failover", 1) == 8
        assert aborted(fetch(client, "failover", 0, 1)) == [(Q, 1), (R, 6)]
    assert read_committed_by_librdkafka(cluster.bootstrap, "failover", 3) == [b"a", b"plain", b"b"]


def test_write_txn_markers_v0_and_v1_answer_alike(start_broker):
    """Version 0 is version 1 unflexible (kio lacks its schema: weir.protocol.legacy_schemas)."""
    broker = start_broker(**NO_VERIFICATION)
    with RawClient(broker.port) as client:
        create_topic(client, "v0")
        assert produce(client, "v0", txn_batch([b"a"], P, 0)).error_code == NONE
        request = build(request_schema(WRITE_TXN_MARKERS, 0), {"markers": [{
            "producer_id": P, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
            "topics": [{"name": "v0", "partition_indexes": [0, 3]}]}]})
        response = client.call(WRITE_TXN_MARKERS, 0, request)
        [marker] = response.markers
        assert {p.partition_index: p.error_code for t in marker.topics for p in t.partitions} == \
            {0: NONE, 3: UNKNOWN_TOPIC_OR_PARTITION}
        assert latest(client, "v0", 1) == 2
    assert_healthy(broker)


def test_a_marker_without_a_valid_producer_id_refuses_the_request(start_broker):
    """Kafka's appendEndTxnMarker throws for producer id -1; getErrorResponse answers the whole
    request with UNKNOWN_SERVER_ERROR. Nothing is written, not even the valid marker beside it."""
    broker = start_broker(**NO_VERIFICATION)
    with RawClient(broker.port) as client:
        create_topic(client, "no-pid")
        assert produce(client, "no-pid", txn_batch([b"a"], P, 0)).error_code == NONE
        response = client.call(WRITE_TXN_MARKERS, 1, WriteTxnMarkersRequest(markers=tuple(
            WritableTxnMarker(producer_id=pid, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
                              topics=(WritableTxnMarkerTopic(name="no-pid", partition_indexes=(0, 3)),))
            for pid in (P, -1))))
        assert [(m.producer_id, {p.partition_index: p.error_code for t in m.topics for p in t.partitions})
                for m in response.markers] == [(P, {0: UNKNOWN_SERVER_ERROR, 3: UNKNOWN_SERVER_ERROR}),
                                               (-1, {0: UNKNOWN_SERVER_ERROR, 3: UNKNOWN_SERVER_ERROR})]
        assert latest(client, "no-pid", 0) == 1
    assert_healthy(broker)

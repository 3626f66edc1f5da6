"""KIP-890 part 1 end to end, with transaction.partition.verification.enable on (Kafka's default):
the partition leader asks the transaction coordinator before a producer's first transactional
batch on a partition. A real transactional producer (confluent-kafka) commits and aborts through
it, with the coordinator on the same broker or on another one; a batch whose partition was never
added to the transaction is refused (INVALID_TXN_STATE) and writes nothing."""

import datetime
import struct

from confluent_kafka import Consumer, Producer, TopicPartition
from crc32c import crc32c
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from raw_protocol import NONE, RawClient, assert_healthy
from transactions.client_helpers import create_topics, read_committed
from waiting import wait_until

from weir.protocol.record_batch import TRANSACTIONAL_BIT
from weir.protocol.records import encode_batch

SETTINGS = {"transaction_state_log_num_partitions": "3", "offsets_topic_num_partitions": "3",
            "group_initial_rebalance_delay_ms": "0"}
INIT_PRODUCER_ID, PRODUCE, FIND_COORDINATOR = 22, 0, 10
INVALID_TXN_STATE = 48


def commit_and_abort(bootstrap: str, transactional_id: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(6):
        producer.produce("verified", f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce("verified", f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("verified", b"last", partition=0)
    producer.commit_transaction(30)


def test_a_transactional_producer_commits_and_aborts_through_verification(start_broker):
    broker = start_broker(0, **SETTINGS)
    create_topics(broker.bootstrap, "verified")
    commit_and_abort(broker.bootstrap, "verified-app")
    assert sorted(read_committed(broker.bootstrap, "verified", 7)) == sorted(
        [f"committed-{i}".encode() for i in range(6)] + [b"last"])
    assert_healthy(broker)


def test_verification_with_the_coordinator_on_another_broker(start_cluster):
    cluster = start_cluster(**SETTINGS)
    create_topics(cluster.bootstrap, "verified", replication=3)
    commit_and_abort(cluster.bootstrap, "verified-app")  # the coordinator: one of three brokers
    commit_and_abort(cluster.bootstrap, "another-app")
    values = read_committed(cluster.bootstrap, "verified", 14)
    assert sorted(values) == sorted(2 * ([f"committed-{i}".encode() for i in range(6)] + [b"last"]))


def transactional_batch(pid: int, epoch: int) -> bytes:
    raw = bytearray(encode_batch([b"sneaky"], keys=[b"k"], producer_id=pid, producer_epoch=epoch, base_sequence=0))
    struct.pack_into(">h", raw, 21, TRANSACTIONAL_BIT)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


def test_a_partition_never_added_to_the_transaction_is_refused(start_broker):
    broker = start_broker(0, **SETTINGS)
    create_topics(broker.bootstrap, "verified", partitions=1)
    with RawClient(broker.port) as client:
        def coordinator_ready() -> bool:
            found = client.call(FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=("raw-app",)))
            return found.coordinators[0].error_code == NONE  # (it creates __transaction_state)

        def init():
            return client.call(INIT_PRODUCER_ID, 4, InitProducerIdRequest(
                transactional_id="raw-app", transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                producer_epoch=-1))
        wait_until(coordinator_ready, "a transaction coordinator")
        wait_until(lambda: init().error_code == NONE, "the coordinator loaded")
        answer = init()
        request = ProduceRequest(transactional_id="raw-app", acks=-1, timeout=datetime.timedelta(seconds=10),
                                 topic_data=(TopicProduceData(name="verified", partition_data=(
                                     PartitionProduceData(index=0, records=transactional_batch(
                                         answer.producer_id, answer.producer_epoch)),)),))
        refused = client.call(PRODUCE, 9, request).responses[0].partition_responses[0]
        assert refused.error_code == INVALID_TXN_STATE  # no AddPartitionsToTxn: not in the transaction
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    low, high = consumer.get_watermark_offsets(TopicPartition("verified", 0), 10)
    consumer.close()
    assert (low, high) == (0, 0)  # nothing written
    assert_healthy(broker)

"""Issue 41 on a real broker under `prlimit --nofile=256`: asked for more replicas than its
descriptors allow, it refuses those that do not fit (CreateTopics answers KAFKA_STORAGE_ERROR, as
Kafka's broker answers for a replica it cannot create) with a log line naming RLIMIT_NOFILE, and
goes on serving: produce, fetch and metadata for the partitions it has, new connections,
checkpoints; a topic deleted gives its descriptors back."""

import datetime
import os
import time

import pytest
from conftest import settings, stop_all
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from raw_protocol import (CREATE_TOPICS, CREATE_TOPICS_V, NONE, TIMEOUT_S, CreatableTopic, CreateTopicsRequest,
                          RawClient, assert_healthy, create_topic, fetch, metadata, produce, wait_for_log)

from weir.lab.local_cluster import BrokerProcess
from weir.protocol.records import encode_batch

NOFILE = 256
ANSWER_S = 60  # a CreateTopics of 300 partitions on a loaded machine may take more than raw_protocol's 5 s
KAFKA_STORAGE_ERROR = 56
DELETE_TOPICS = 20


@pytest.fixture
def broker(tmp_path, zookeeper_connect):
    process = BrokerProcess(0, tmp_path / "broker-0", zookeeper_connect, max_open_files=NOFILE,
                            overrides=settings({"log.flush.offset.checkpoint.interval.ms": "200"}))
    yield process.start()
    stop_all([process])


def create(client: RawClient, name: str, partitions: int):
    response = client.call(CREATE_TOPICS, CREATE_TOPICS_V, CreateTopicsRequest(
        topics=(CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=(),
                               configs=()),), timeout=datetime.timedelta(seconds=30), validate_only=False))
    return response.topics[0]


def until(condition, what: str):
    deadline = time.monotonic() + 4 * TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def checkpointed_hw(broker, topic: str, partition: int) -> int | None:
    path = broker.data_dir / "replication-offset-checkpoint"
    try:
        lines = path.read_text().splitlines()[2:]
    except FileNotFoundError:
        return None
    return next((int(line.split()[2]) for line in lines if line.split()[:2] == [topic, str(partition)]), None)


def test_replicas_beyond_the_descriptors_are_refused_and_the_others_keep_serving(broker):
    with RawClient(broker.port, timeout=ANSWER_S) as client:
        create_topic(client, "small", partitions=10)
        for p in range(10):
            assert produce(client, "small", encode_batch([b"before %d" % p]), partition=p).error_code == NONE

        big = create(client, "big", 300)
        assert big.error_code == KAFKA_STORAGE_ERROR, big
        assert "could not create" in big.error_message and "RLIMIT_NOFILE soft 256, hard 256" in big.error_message
    line = wait_for_log(broker, "could not create", "replica(s)", "RLIMIT_NOFILE soft 256, hard 256")
    assert "open" in line and "go on serving" in line
    open_now = len(os.listdir(f"/proc/{broker.proc.pid}/fd"))
    assert open_now < NOFILE - 64, "room is left for connections and short-lived files"

    with RawClient(broker.port, timeout=ANSWER_S) as client:  # a new connection: the broker accepts
        answers = [produce(client, "big", encode_batch([b"x"]), partition=p).error_code for p in range(300)]
        refused = answers.count(KAFKA_STORAGE_ERROR)
        assert answers.count(NONE) + refused == 300 and f"could not create {refused} replica(s)" in big.error_message
        assert answers.count(NONE) >= 80  # 128 descriptors for replicas: about one a replica, not two or three
        for p in range(10):
            assert produce(client, "small", encode_batch([b"after %d" % p]), partition=p).error_code == NONE
            records = fetch(client, "small", 0, partition=p).records
            assert b"before %d" % p in records and b"after %d" % p in records
        assert [t.error_code for t in metadata(client, ["small"], False).topics] == [NONE]
    until(lambda: checkpointed_hw(broker, "small", 9) == 2, "the checkpoint task goes on writing")
    assert "periodic task failed" not in broker.output()

    with RawClient(broker.port, timeout=ANSWER_S) as client:  # a deleted topic gives its descriptors back
        deleted = client.call(DELETE_TOPICS, 6, DeleteTopicsRequest(
            topics=(DeleteTopicState(name="big", topic_id=None),), timeout=datetime.timedelta(seconds=30)))
        assert deleted.responses[0].error_code == NONE
        until(lambda: len(os.listdir(f"/proc/{broker.proc.pid}/fd")) < open_now - 40, "the replicas of big close")
        assert create(client, "later", 20).error_code == NONE
    assert_healthy(broker)

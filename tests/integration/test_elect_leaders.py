"""ElectLeaders from confluent-kafka's admin client: partitions named are each answered
(ELECTION_NOT_NEEDED when the preferred replica already leads, UNKNOWN_TOPIC_OR_PARTITION when
there is no such partition); for all partitions (none named) only those elected or failed are,
as Kafka's KafkaApis.handleElectLeaders filters ELECTION_NOT_NEEDED out."""

import datetime

from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.elect_leaders.v1.request import ElectLeadersRequest, TopicPartitions
from raw_protocol import RawClient, assert_healthy, create_topic

ELECT_LEADERS, UNKNOWN_SERVER_ERROR = 43, -1


def answered(result: dict) -> dict[tuple[str, int], str | None]:
    return {(tp.topic, tp.partition): None if error is None else error.name()
            for tp, error in result.items()}


def test_election_not_needed_is_answered_only_for_partitions_named(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("lead", 2, 1)])["lead"].result(30)

    named = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("lead", 0), TopicPartition("lead", 5)])
    assert answered(named.result(30)) == {("lead", 0): "ELECTION_NOT_NEEDED",
                                          ("lead", 5): "UNKNOWN_TOPIC_OR_PART"}  # librdkafka's name
    assert answered(admin.elect_leaders(ElectionType.PREFERRED, None).result(30)) == {}
    assert answered(admin.elect_leaders(ElectionType.UNCLEAN, None).result(30)) == {}


def test_an_unknown_election_type_is_answered_with_kafkas_error_for_each_partition(broker):
    """Kafka's ElectionType.valueOf throws on it and KafkaApis answers UNKNOWN_SERVER_ERROR, for the
    request and each partition named; Weir's handler failed (a traceback, the connection closed)."""
    with RawClient(broker.port) as client:
        create_topic(client, "lead", 1)
        for election_type in (-1, 2, 8):
            response = client.call(ELECT_LEADERS, 1, ElectLeadersRequest(
                election_type=election_type, timeout=datetime.timedelta(seconds=5),
                topic_partitions=(TopicPartitions(topic="lead", partitions=(0,)),)))
            assert response.error_code == UNKNOWN_SERVER_ERROR
            [result] = response.replica_election_results
            assert [(p.partition_id, p.error_code) for p in result.partition_result] == [(0, UNKNOWN_SERVER_ERROR)]
    assert_healthy(broker)

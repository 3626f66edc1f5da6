"""ElectLeaders from confluent-kafka's admin client: partitions named are each answered
(ELECTION_NOT_NEEDED when the preferred replica already leads, UNKNOWN_TOPIC_OR_PARTITION when
there is no such partition); for all partitions (none named) only those elected or failed are,
as Kafka's KafkaApis.handleElectLeaders filters ELECTION_NOT_NEEDED out."""

from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


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

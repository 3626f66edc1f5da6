"""CreateTopics' rules on a real broker through confluent-kafka's AdminClient, as Kafka's
(core/src/main/scala/kafka/zk/AdminZkClient.scala validateTopicCreate)."""

import datetime

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from raw_protocol import (CREATE_TOPICS, CREATE_TOPICS_V, NONE, UNKNOWN_TOPIC_OR_PARTITION, CreatableTopic,
                          CreateTopicsRequest, RawClient, metadata)

CREATE_PARTITIONS, INVALID_REQUEST = 37, 42


def test_a_name_colliding_with_an_existing_topic_once_dots_are_underscores_is_refused(broker):
    """'orders.eu' and 'orders_eu' would share their metric names: Kafka refuses the second with
    INVALID_TOPIC_EXCEPTION, validate_only too; a name that merely looks alike is fine."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("orders.eu", 1, 1)])["orders.eu"].result(30)
    for validate_only in (True, False):
        with pytest.raises(KafkaException) as refused:
            admin.create_topics([NewTopic("orders_eu", 1, 1)], validate_only=validate_only)["orders_eu"].result(30)
        error = refused.value.args[0]
        assert error.code() == KafkaError.TOPIC_EXCEPTION
        assert "collides with existing topics: orders.eu" in error.str()
    admin.create_topics([NewTopic("orders-eu", 1, 1)])["orders-eu"].result(30)
    assert {"orders.eu", "orders-eu"} <= set(admin.list_topics(timeout=30).topics)
    assert "orders_eu" not in admin.list_topics(timeout=30).topics


def test_a_topic_named_twice_in_one_request_is_an_invalid_request_and_not_created(broker):
    """Kafka's KafkaApis: every entry of a topic named twice in CreateTopics is INVALID_REQUEST
    ("Found multiple entries for this topic."), CreatePartitions answers such a topic once with
    INVALID_REQUEST ("Duplicate topic in request."), and neither creates anything for it;
    __cluster_metadata may not be created. Sent by hand: librdkafka refuses duplicates itself."""
    with RawClient(broker.port) as client:
        topic = lambda name: CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=(),  # noqa: E731
                                            configs=())
        created = client.call(CREATE_TOPICS, CREATE_TOPICS_V, CreateTopicsRequest(
            topics=(topic("twice"), topic("once"), topic("twice"), topic("__cluster_metadata")),
            timeout=datetime.timedelta(seconds=30), validate_only=False))
        assert [(t.name, t.error_code, t.error_message) for t in created.topics] == [
            ("twice", INVALID_REQUEST, "Found multiple entries for this topic."), ("once", NONE, None),
            ("twice", INVALID_REQUEST, "Found multiple entries for this topic."),
            ("__cluster_metadata", INVALID_REQUEST, "Creation of internal topic __cluster_metadata is prohibited.")]
        found = {t.name: t for t in metadata(client, ["twice", "once", "__cluster_metadata"], False).topics}
        assert (found["twice"].error_code, found["once"].error_code) == (UNKNOWN_TOPIC_OR_PARTITION, NONE)
        assert found["__cluster_metadata"].error_code == UNKNOWN_TOPIC_OR_PARTITION

        added = client.call(CREATE_PARTITIONS, 3, CreatePartitionsRequest(
            topics=(CreatePartitionsTopic(name="once", count=2, assignments=None),
                    CreatePartitionsTopic(name="once", count=3, assignments=None)),
            timeout=datetime.timedelta(seconds=30), validate_only=False))
        assert [(t.name, t.error_code, t.error_message) for t in added.results] == [
            ("once", INVALID_REQUEST, "Duplicate topic in request.")]
        [once] = metadata(client, ["once"], False).topics
        assert len(once.partitions) == 1

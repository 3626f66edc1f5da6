"""CreateTopics' rules on a real broker through confluent-kafka's AdminClient, as Kafka's
(core/src/main/scala/kafka/zk/AdminZkClient.scala validateTopicCreate)."""

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


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

"""OffsetDelete (KIP-496) on a real broker, asked by kafka-python's admin client while a
confluent-kafka consumer holds the group: offsets of topics the group consumes stay, the others go,
and the deletion outlives a restart of the coordinator."""

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError
from waiting import wait_until

from .test_consumer_groups import GROUP_SETTINGS, create_topic, produce


def committed(admin: KafkaAdminClient, group: str) -> dict:
    return {(tp.topic, tp.partition): meta.offset for tp, meta in admin.list_group_offsets(group)[group].items()
            if meta.offset >= 0}


def test_offsets_of_topics_the_group_does_not_consume_are_deleted(start_broker):
    broker = start_broker(0, **GROUP_SETTINGS)
    create_topic(broker.bootstrap, "consumed", 1)
    create_topic(broker.bootstrap, "abandoned", 1)
    produce(broker.bootstrap, "consumed", 10, 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})
    consumer.subscribe(["consumed"])
    read = 0
    while read < 10:
        msg = consumer.poll(10)
        assert msg is not None, "nothing consumed"
        read += msg.error() is None
    consumer.commit(asynchronous=False)
    consumer.commit(offsets=[TopicPartition("abandoned", 0, 7)], asynchronous=False)

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert committed(admin, "g") == {("consumed", 0): 10, ("abandoned", 0): 7}
        consumed, abandoned = KafkaPythonTopicPartition("consumed", 0), KafkaPythonTopicPartition("abandoned", 0)
        assert admin.delete_group_offsets("g", [consumed, abandoned]) == {
            consumed: GroupSubscribedToTopicError, abandoned: NoError}
        assert committed(admin, "g") == {("consumed", 0): 10}

        consumer.close()  # the group is Empty now: every offset may go
        wait_until(lambda: admin.describe_groups(["g"])["g"]["group_state"] == "Empty", "an empty group", 30)
        assert admin.delete_group_offsets("g", [consumed]) == {consumed: NoError}
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets("no-such-group", [consumed])
    finally:
        admin.close()

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g2", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("abandoned", 0, 3), TopicPartition("consumed", 0, 4)], asynchronous=False)
    consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.delete_group_offsets("g2", [KafkaPythonTopicPartition("abandoned", 0)])
    finally:
        admin.close()
    broker.stop()
    broker.start()  # the coordinator reloads the group from __consumer_offsets
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert committed(admin, "g2") == {("consumed", 0): 4}
        assert committed(admin, "g") == {}
    finally:
        admin.close()

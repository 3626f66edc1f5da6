"""Metadata requests a client may send that are unusual but valid, answered as Kafka's
KafkaApis.handleTopicMetadataRequest answers them."""

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource


def _configs(admin: AdminClient, topic: str) -> dict[str, str]:
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    return {name: entry.value for name, entry in future.result(30).items()}


def test_auto_creating_an_internal_topic_creates_it_as_its_coordinator_would(start_broker):
    """A producer asking for __consumer_offsets or __transaction_state before any group or
    transaction exists auto-creates it (librdkafka producers allow auto-creation). Kafka creates
    it with the coordinator's partitions and configs (AutoTopicCreationManager.creatableTopic:
    offsets.topic.num.partitions and the compacted groupMetadataTopicConfigs); Weir created a
    plain topic of num.partitions with cleanup.policy delete, which the group coordinator then
    kept for good."""
    broker = start_broker(offsets_topic_num_partitions=3, transaction_state_log_num_partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for topic, partitions in (("__consumer_offsets", 3), ("__transaction_state", 2)):
        found = producer.list_topics(topic, timeout=30).topics[topic]
        assert found.error is None, found.error
        assert len(found.partitions) == partitions, topic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _configs(admin, "__consumer_offsets")["cleanup.policy"] == "compact"
    assert _configs(admin, "__transaction_state")["cleanup.policy"] == "compact"

"""Metadata requests a client may send that are unusual but valid, answered as Kafka's
KafkaApis.handleTopicMetadataRequest answers them."""

import typing
import uuid
from dataclasses import fields

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from kio.index import load_request_schema
from raw_protocol import METADATA, NONE, RawClient, assert_healthy, create_topic, metadata

INVALID_REQUEST = 42


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


def test_metadata_v10_and_v11_by_topic_id_or_without_a_name_is_an_invalid_request(broker):
    """Those versions carry a topic id and a nullable name, but Kafka takes topic ids only from v12:
    each topic is answered INVALID_REQUEST, a null name as "" (KafkaApis.handleTopicMetadataRequest,
    MetadataRequest.getErrorResponse). Weir's answer had a null name where v10-11 allow none: its
    encoding failed (a traceback, the connection closed)."""
    known = uuid.UUID(int=7)
    with RawClient(broker.port) as client:
        create_topic(client, "named")
        for version in (10, 11):
            schema = load_request_schema(METADATA, version)
            topic_schema = typing.get_args(typing.get_args(fields(schema)[0].type)[0])[0]
            cluster_operations = {"include_cluster_authorized_operations": False} if version == 10 else {}
            response = client.call(METADATA, version, schema(
                topics=(topic_schema(topic_id=known, name="named"), topic_schema(topic_id=None, name=None)),
                allow_auto_topic_creation=True, include_topic_authorized_operations=False, **cluster_operations))
            assert [(t.name, t.error_code) for t in response.topics] == [("named", INVALID_REQUEST), ("", INVALID_REQUEST)]
        assert metadata(client, ["named"]).topics[0].error_code == NONE
    assert_healthy(broker)

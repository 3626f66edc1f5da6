"""Metadata answers built from a cluster view, without a broker: what Kafka's
KafkaApis.handleTopicMetadataRequest and ZkMetadataCache.getPartitionMetadata answer."""

import uuid
from types import SimpleNamespace

from kio.index import load_response_schema
from kio.serial import entity_reader

from weir.broker.admin_apis import AdminApis
from weir.config import BrokerConfig
from weir.coordination.model import BrokerInfo, ClusterView, PartitionState, TopicAssignment
from weir.protocol.codec import build, request_schema
from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey


def metadata(view: ClusterView, version: int, topics, listener: str = ""):
    apis = AdminApis(SimpleNamespace(config=BrokerConfig(), view=view), None, None)
    header = RequestHeader(int(ApiKey.METADATA), version, 1, "test", 0, "/127.0.0.1", listener, "User:ANONYMOUS")
    request = build(request_schema(ApiKey.METADATA, version), {
        "topics": topics, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
        "include_cluster_authorized_operations": False})
    body = apis.metadata(header, request)
    return entity_reader(load_response_schema(ApiKey.METADATA, version))(b"\0" * 4 + bytes(body), 4)[0]


def test_an_unknown_topic_id_is_unknown_topic_id():
    """Kafka answers a topic id it does not know UNKNOWN_TOPIC_ID with a null name
    (handleTopicMetadataRequest's unknownTopicIdsTopicMetadata); Weir answered
    UNKNOWN_TOPIC_OR_PARTITION, which tells a client asking by id the wrong thing."""
    known = TopicAssignment("known", uuid.uuid4(), {0: (0,)})
    view = ClusterView(brokers={0: BrokerInfo(0, "127.0.0.1", 9092)}, topics={"known": known},
                       states={("known", 0): PartitionState(0, 0, (0,), 1, 0)})
    missing = uuid.uuid4()
    answer = metadata(view, 12, [{"topic_id": missing, "name": None}, {"topic_id": known.topic_id, "name": None}])
    assert [(t.error_code, t.name, t.topic_id) for t in answer.topics] == [
        (ErrorCode.unknown_topic_id, None, missing), (ErrorCode.none, "known", known.topic_id)]

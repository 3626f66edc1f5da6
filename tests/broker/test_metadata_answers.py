"""Metadata answers built from a cluster view, without a broker: what Kafka's
KafkaApis.handleTopicMetadataRequest and ZkMetadataCache.getPartitionMetadata answer."""

import uuid
from types import SimpleNamespace

from kio.index import load_response_schema
from kio.serial import entity_reader

from weir.broker.admin_apis import AdminApis
from weir.config.broker_config import BrokerConfig
from weir.protocol.codec import build, request_schema
from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey
from weir.zk.model import BrokerInfo, ClusterView, PartitionState, TopicAssignment


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


def test_a_leader_without_the_clients_listener_or_not_live_is_no_leader():
    """Kafka names no leader (-1) for a partition whose leader is not live (LEADER_NOT_AVAILABLE)
    or has no endpoint on the listener the client came on (LISTENER_NOT_FOUND from v6, before
    LEADER_NOT_AVAILABLE: ZkMetadataCache.getPartitionMetadata). Weir named the leader, a broker
    the answer's broker list leaves out, so a client had a leader it could not connect to."""
    both = (("INTERNAL", "127.0.0.1", 9092), ("EXTERNAL", "localhost", 9093))
    view = ClusterView(
        brokers={0: BrokerInfo(0, "127.0.0.1", 9092, endpoints=both),
                 1: BrokerInfo(1, "127.0.0.1", 9094, endpoints=(("INTERNAL", "127.0.0.1", 9094),))},
        topics={"t": TopicAssignment("t", uuid.uuid4(), {0: (0, 1), 1: (1, 0), 2: (2, 0)})},
        states={("t", 0): PartitionState(0, 3, (0, 1), 1, 0), ("t", 1): PartitionState(1, 4, (1, 0), 1, 0),
                ("t", 2): PartitionState(2, 5, (2, 0), 1, 0)})

    def partitions(version: int, listener: str):
        [topic] = metadata(view, version, [{"name": "t", "topic_id": None}], listener).topics
        return [(p.partition_index, p.error_code, p.leader_id, getattr(p, "leader_epoch", None)) for p in topic.partitions]

    assert partitions(12, "EXTERNAL") == [(0, ErrorCode.none, 0, 3), (1, ErrorCode.listener_not_found, -1, 4),
                                          (2, ErrorCode.leader_not_available, -1, 5)]
    assert partitions(5, "EXTERNAL") == [(0, ErrorCode.none, 0, None), (1, ErrorCode.leader_not_available, -1, None),
                                         (2, ErrorCode.leader_not_available, -1, None)]  # no epochs before v7
    assert partitions(12, "INTERNAL") == [(0, ErrorCode.none, 0, 3), (1, ErrorCode.none, 1, 4),
                                          (2, ErrorCode.leader_not_available, -1, 5)]

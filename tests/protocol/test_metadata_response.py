"""The hand-written Metadata encoder against kio's generic one, which follows Kafka's
MetadataResponse.json: the same bytes for every version, whatever the topics hold."""

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.protocol import codec
from weir.protocol.metadata_response import BrokerEntry, PartitionEntry, encode_metadata_response, encode_topic
from weir.protocol.versions import ApiKey

ids = st.lists(st.integers(0, 2**31 - 1), max_size=4)
partitions = st.lists(st.builds(PartitionEntry, st.sampled_from([0, 5, 9]), st.integers(0, 2**31 - 1),
                                st.integers(-1, 2**31 - 1), st.integers(-1, 2**31 - 1), ids, ids, ids), max_size=4)
topics = st.lists(st.tuples(st.sampled_from([0, 3, 100]), st.text(min_size=1, max_size=12), st.uuids(), st.booleans(),
                            partitions, st.integers(-2**31, 2**31 - 1)), max_size=4)
brokers = st.lists(st.builds(BrokerEntry, st.integers(0, 2**31 - 1), st.text(min_size=1, max_size=12),
                             st.integers(0, 65535), st.none() | st.text(max_size=6)), max_size=3)


def kio_body(version, brokers, cluster_id, controller_id, topics, cluster_operations, throttle, error):
    body = {"throttle_time": throttle, "cluster_id": cluster_id, "controller_id": controller_id,
            "cluster_authorized_operations": cluster_operations, "error_code": error,
            "brokers": [b._asdict() for b in brokers],
            "topics": [{"error_code": code, "name": name, "topic_id": topic_id, "is_internal": internal,
                        "topic_authorized_operations": ops,
                        "partitions": [{"error_code": p.error_code, "partition_index": p.index, "leader_id": p.leader,
                                        "leader_epoch": p.leader_epoch, "replica_nodes": p.replicas,
                                        "isr_nodes": p.isr, "offline_replicas": p.offline} for p in parts]}
                       for code, name, topic_id, internal, parts, ops in topics]}
    encoded = codec.encode_response(ApiKey.METADATA, version, 0, body)
    return encoded[5 if version >= 9 else 4:]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 13), brokers, st.none() | st.text(max_size=8), st.integers(-1, 2**31 - 1), topics,
       st.integers(-2**31, 2**31 - 1), st.integers(0, 2**31 - 1), st.sampled_from([0, 41]))
def test_the_same_bytes_as_kio_in_every_version(version, brokers, cluster_id, controller_id, topics,
                                                cluster_operations, throttle, error):
    hand = encode_metadata_response(
        version, brokers, cluster_id, controller_id,
        [encode_topic(version, code, name, topic_id, internal, parts, ops)
         for code, name, topic_id, internal, parts, ops in topics], cluster_operations, throttle, error)
    assert hand == kio_body(version, brokers, cluster_id, controller_id, topics, cluster_operations, throttle, error)


def test_a_nameless_topic_by_id_from_v12():
    topic_id = uuid.uuid4()
    for version in (12, 13):
        hand = encode_metadata_response(version, [], "c", 0, [encode_topic(version, 100, None, topic_id, False, [], 0)],
                                        0)
        assert hand == kio_body(version, [], "c", 0, [(100, None, topic_id, False, [], 0)], 0, 0, 0)

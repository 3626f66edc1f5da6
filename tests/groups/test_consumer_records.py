"""The consumer-protocol group's records (weir.groups.consumer_records): Kafka's bytes, and a
group rebuilt from them as it was."""

import uuid

from weir.groups.consumer_group import ConsumerGroup, ConsumerGroupConfig, HeartbeatRequest, TopicInfo
from weir.groups.consumer_records import METADATA, ConsumerGroupKey, consumer_key, group_records, read_key, rebuild
from weir.groups.records import OffsetKey, offset_key

T = uuid.UUID(int=7)
TOPICS = {"t": TopicInfo(T, "t", 4)}


def test_keys_and_values_are_kafkas_bytes():
    assert consumer_key(METADATA, "g") == b"\x00\x03\x00\x01g"
    assert read_key(b"\x00\x08\x00\x01g\x00\x01m") == ConsumerGroupKey(8, "g", "m")
    assert read_key(offset_key("g", "t", 1)) == OffsetKey("g", "t", 1)
    group = ConsumerGroup("g", ConsumerGroupConfig())
    group.group_epoch = 5
    records = group_records(group)
    assert records[consumer_key(METADATA, "g")] == b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00"  # version, epoch, tags


def test_a_group_is_rebuilt_from_its_records():
    group = ConsumerGroup("g", ConsumerGroupConfig(), partition=2)
    for member in ("a", "b"):
        group.heartbeat(HeartbeatRequest(member, 0, instance_id="i-" + member, rebalance_timeout_ms=1000,
                                         subscribed_topic_names=("t",), owned={}, client_id="c", client_host="/h"),
                        TOPICS, 0)
    group.heartbeat(HeartbeatRequest("a", 1, owned={T: frozenset(range(4))}), TOPICS, 1)  # a still owns all
    assert group.members["a"].pending_revocation
    values = {read_key(k): v for k, v in group_records(group).items()}
    again, problems = rebuild("g", values, ConsumerGroupConfig(), 2, 100)
    assert problems == []
    assert group_records(again) == group_records(group)
    assert again.owners == group.owners and again.static_members == group.static_members
    assert again.members["b"].session_deadline == 100 + 45000

"""Kafka's ZooKeeper-mode JSON formats: pure encode/decode round trips, no ZooKeeper needed."""

import json
import uuid

import pytest

from weir.coordination.zk_client import broker_registration
from weir.zk.formats import (FormatError, decode_broker_endpoints, decode_broker_registration, decode_controller,
                             decode_controller_epoch, decode_partition_state, decode_topic_assignment,
                             decode_topic_config, decode_topic_id, encode_controller, encode_controller_epoch,
                             encode_partition_state, encode_topic_assignment, encode_topic_config, encode_topic_id,
                             parse_path, partition_state_path)
from weir.zk.model import NO_LEADER, BrokerInfo, PartitionState, TopicAssignment


def test_topic_id_is_kafka_style_base64url():
    topic_id = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")
    text = encode_topic_id(topic_id)
    assert len(text) == 22 and "=" not in text
    assert text == "ASNFZ4mrze8BI0VniavN7w"
    assert decode_topic_id(text) == topic_id
    for _ in range(50):
        random_id = uuid.uuid4()
        assert decode_topic_id(encode_topic_id(random_id)) == random_id
    with pytest.raises(FormatError):
        decode_topic_id("too-short")


def test_topic_assignment_round_trip_and_layout():
    assignment = TopicAssignment("orders", uuid.uuid4(), {0: (1, 2, 3), 1: (2, 3, 1), 10: (3, 1, 2)})
    data = encode_topic_assignment(assignment)
    obj = json.loads(data)
    assert obj == {"version": 3, "topic_id": encode_topic_id(assignment.topic_id),
                   "partitions": {"0": [1, 2, 3], "1": [2, 3, 1], "10": [3, 1, 2]},
                   "adding_replicas": {}, "removing_replicas": {}}
    assert decode_topic_assignment("orders", data) == assignment
    # An old (version 1) assignment has no topic id.
    old = decode_topic_assignment("t", b'{"version":1,"partitions":{"0":[1]}}')
    assert old.replicas == {0: (1,)} and old.topic_id == uuid.UUID(int=0)
    with pytest.raises(FormatError):
        decode_topic_assignment("t", b'{"version":3,"partitions":{"x":[1]}}')
    with pytest.raises(FormatError):
        decode_topic_assignment("t", b"not json")


def test_partition_state_round_trip_and_layout():
    state = PartitionState(leader=2, leader_epoch=7, isr=(2, 3), controller_epoch=4, partition_epoch=12)
    data = encode_partition_state(state)
    assert json.loads(data) == {"controller_epoch": 4, "leader": 2, "version": 1, "leader_epoch": 7,
                                "isr": [2, 3], "leader_recovery_state": 0}
    assert decode_partition_state(data, 12) == state  # the partition epoch is the znode version
    offline = PartitionState(NO_LEADER, 8, (), 4, 0)
    assert decode_partition_state(encode_partition_state(offline), 0) == offline
    with pytest.raises(FormatError):
        decode_partition_state(b'{"leader":1,"leader_epoch":0,"isr":[2],"controller_epoch":1}', 0)
    with pytest.raises(FormatError):
        decode_partition_state(b'{"leader":1,"isr":[1],"controller_epoch":1}', 0)


def test_controller_and_controller_epoch():
    data = encode_controller(3, 1700000000000)
    assert json.loads(data) == {"version": 2, "brokerid": 3, "timestamp": "1700000000000"}
    assert decode_controller(data) == 3
    assert decode_controller(b'{"version":1,"brokerid":0,"timestamp":"1"}') == 0
    assert encode_controller_epoch(42) == b"42"
    assert decode_controller_epoch(b"42") == 42
    with pytest.raises(FormatError):
        decode_controller_epoch(b"x")
    with pytest.raises(FormatError):
        decode_controller(b'{"version":2}')


def test_topic_config_round_trip():
    data = encode_topic_config({"retention.ms": 1000, "cleanup.policy": "compact"})
    assert json.loads(data) == {"version": 1,
                                "config": {"cleanup.policy": "compact", "retention.ms": "1000"}}
    assert decode_topic_config(data) == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert decode_topic_config(encode_topic_config({})) == {}


def test_broker_registration_matches_zk_client():
    data = json.dumps(broker_registration(5, "10.0.0.5", 9093, rack="r1")).encode()
    assert decode_broker_registration(5, data) == BrokerInfo(5, "10.0.0.5", 9093, "r1")
    assert decode_broker_endpoints(data) == [("PLAINTEXT", "10.0.0.5", 9093)]
    no_rack = json.dumps(broker_registration(6, "h", 1)).encode()
    assert decode_broker_registration(6, no_rack) == BrokerInfo(6, "h", 1, None)
    # Kafka leaves host null without a PLAINTEXT listener: the first endpoint is used.
    ssl_only = json.dumps({"version": 5, "host": None, "port": -1,
                           "endpoints": ["SSL://[::1]:9094"]}).encode()
    assert decode_broker_registration(7, ssl_only) == BrokerInfo(7, "::1", 9094, None)


def test_parse_path():
    assert parse_path("/controller") == ("controller", None)
    assert parse_path("/controller_epoch") == ("controller", None)
    assert parse_path("/brokers/ids") == ("broker_ids", None)
    assert parse_path("/brokers/ids/3") == ("broker", 3)
    assert parse_path("/brokers/topics") == ("topics", None)
    assert parse_path("/brokers/topics/a.b") == ("topic", "a.b")
    assert parse_path(partition_state_path("t", 17)) == ("state", ("t", 17))
    assert parse_path("/config/topics/t") == ("config", "t")
    assert parse_path("/brokers/topics/t/partitions") is None
    assert parse_path("/brokers/ids/x") is None

"""Run under kafka-python 1.4.x (its own protocol classes, an implementation of Kafka's old
versions independent of Weir's), not the test process's kafka-python:

    python old_kafka_python.py BOOTSTRAP TOPIC GROUP COUNT
    python old_kafka_python.py acls BOOTSTRAP TOPIC

Creates TOPIC with CreateTopics v0 (and validates another with v1), produces COUNT records,
consumes them in GROUP (committing), then speaks each API's oldest version Kafka 3.9 serves
(Produce and Fetch in message formats 0 and 1 among them), and prints what it got as one JSON
object.
"""

import json
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.client_async import KafkaClient
from kafka.protocol.admin import (CreateAclsRequest, CreateTopicsRequest, DeleteAclsRequest, DeleteTopicsRequest,
                                  DescribeAclsRequest, DescribeConfigsRequest)
from kafka.protocol.commit import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.fetch import FetchRequest
from kafka.protocol.offset import OffsetRequest
from kafka.protocol.produce import ProduceRequest
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

TOPIC_RESOURCE, EARLIEST, LATEST = 2, -2, -1
READ, ALLOW, ANY = 3, 3, 1  # ACL operation, permission type, and the filter's "any" of each
NO_CODEC, GZIP = 0, 1


def message_set(magic: int, codec: int, values: list[bytes]) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, 1_700_000_000_000 + i if magic else None, b"key", value)
    return bytes(builder.build())


def legacy_round_trip(client: KafkaClient, topic: str) -> dict:
    """Produce v0 (format 0, gzip), v1 (format 0) and v2 (format 1, gzip) to partition 1, then
    Fetch v0 (answered in format 0) and v3 (format 1) from its start."""
    out = {"produced": []}
    for version, magic, codec, values in [(0, 0, GZIP, [b"a", b"b"]), (1, 0, NO_CODEC, [b"c"]),
                                          (2, 1, GZIP, [b"d", b"e"])]:
        response = call(client, ProduceRequest[version](required_acks=-1, timeout=10_000, topics=[
            (topic, [(1, message_set(magic, codec, values))])]))
        [(_, [partition])] = response.topics
        out["produced"].append(list(partition[:3]))  # partition, error, base offset
    for version, magic in [(0, 0), (3, 1)]:
        fields = dict(replica_id=-1, max_wait_time=100, min_bytes=1, topics=[(topic, [(1, 0, 1 << 20)])])
        if version >= 3:
            fields["max_bytes"] = 1 << 20
        response = call(client, FetchRequest[version](**fields))
        [(_, [(_, error, high_watermark, records)])] = response.topics
        batches, fetched = MemoryRecords(records), []
        while batches.has_next():
            fetched.extend([r.offset, r.timestamp, r.key.decode(), r.value.decode()] for r in batches.next_batch())
        out[f"fetch_v{version}"] = [error, high_watermark, records[16], fetched]  # the first message's magic
    return out


def call(client: KafkaClient, request):
    node = client.least_loaded_node()
    while not client.ready(node):
        client.poll(timeout_ms=100)
    future = client.send(node, request)
    client.poll(future=future, timeout_ms=10_000)
    if future.failed():
        raise future.exception
    return future.value


def main(bootstrap: str, topic: str, group: str, count: int) -> None:
    out = {}
    client = KafkaClient(bootstrap_servers=bootstrap, client_id="kafka-python-1.4")
    out["inferred_broker_version"] = list(client.config["api_version"])
    created = call(client, CreateTopicsRequest[0](create_topic_requests=[(topic, 2, 1, [], [])], timeout=30_000))
    out["create_v0"] = [list(t) for t in created.topic_errors]
    validated = call(client, CreateTopicsRequest[1](create_topic_requests=[(topic + "-validated", 1, 1, [], [])],
                                                     timeout=30_000, validate_only=True))
    out["create_v1_validate_only"] = [list(t) for t in validated.topic_errors]

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(count):
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=20_000)
    received = []
    for record in consumer:
        received.append([record.partition, record.offset, record.value.decode()])
        if len(received) == count:
            break
    consumer.commit()
    consumer.close()
    out["consumed"] = received

    # the oldest versions, by hand
    legacy_group = group + "-v0"
    committed = call(client, OffsetCommitRequest[0](legacy_group, [(topic, [(0, 3, "from v0")])]))
    out["commit_v0"] = [[t, [list(p) for p in parts]] for t, parts in committed.topics]
    fetched = call(client, OffsetFetchRequest[0](legacy_group, [(topic, [0, 1])]))
    out["fetch_v0"] = [[t, [list(p) for p in parts]] for t, parts in fetched.topics]
    listed = call(client, OffsetRequest[0](replica_id=-1, topics=[(topic, [(0, LATEST, 1), (1, EARLIEST, 1)])]))
    out["list_offsets_v0"] = [[t, [list(p) for p in parts]] for t, parts in listed.topics]
    described = call(client, DescribeConfigsRequest[0](resources=[(TOPIC_RESOURCE, topic, ["cleanup.policy"])]))
    out["describe_configs_v0"] = [[r[0], r[3], [list(c) for c in r[4]]] for r in described.resources]
    acls = call(client, DescribeAclsRequest[0](resource_type=2, resource_name=topic, principal=None, host=None,
                                               operation=1, permission_type=1))
    out["describe_acls_v0_error"] = acls.error_code
    deleted = call(client, DeleteTopicsRequest[0](topics=[topic + "-gone"], timeout=10_000))
    out["delete_v0"] = [list(t) for t in deleted.topic_error_codes]
    out["legacy_round_trip"] = legacy_round_trip(client, topic)
    client.close()

    resumed = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    out["group_committed"] = [resumed.committed(TopicPartition(topic, p)) for p in range(2)]
    resumed.close()
    json.dump(out, sys.stdout)


def acls(bootstrap: str, topic: str) -> None:
    """ACLs v0 (literal names only): create one, describe it, delete it, describe none."""
    client = KafkaClient(bootstrap_servers=bootstrap, client_id="kafka-python-1.4")
    acl = (TOPIC_RESOURCE, topic, "User:alice", "*", READ, ALLOW)
    out = {"created": [list(r) for r in call(client, CreateAclsRequest[0](creations=[acl])).creation_responses]}

    def described():
        response = call(client, DescribeAclsRequest[0](resource_type=TOPIC_RESOURCE, resource_name=topic,
                                                       principal=None, host=None, operation=ANY, permission_type=ANY))
        return [response.error_code, [[r[0], r[1], [list(a) for a in r[2]]] for r in response.resources]]
    out["described"] = described()
    deleted = call(client, DeleteAclsRequest[0](filters=[(TOPIC_RESOURCE, topic, None, None, ANY, ANY)]))
    out["deleted"] = [[r[0], [list(m) for m in r[2]]] for r in deleted.filter_responses]
    out["described_after"] = described()
    client.close()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    if sys.argv[1] == "acls":
        acls(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))

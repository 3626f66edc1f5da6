"""DescribeLogDirs on a real broker: kafka-python's admin client and `weir log-dirs` see each
partition's size in the broker's one log directory."""

import json

from confluent_kafka import Producer
from kafka import KafkaAdminClient
from test_admin_cli import ok, weir


def test_log_dirs_show_each_partitions_size(broker):
    ok(weir(broker, "topics", "create", "--topic", "sized", "--partitions", "2", "--replication-factor", "1"))
    ok(weir(broker, "topics", "create", "--topic", "other", "--partitions", "1", "--replication-factor", "1"))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(50):
        producer.produce("sized", b"x" * 100, partition=0)
    assert producer.flush(30) == 0

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        (answer,) = admin.describe_log_dirs()
    finally:
        admin.close()
    assert answer["broker"] == 0
    (log_dir,) = answer["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"] == str(broker.data_dir.resolve())
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes[("sized", 1)] == 0 and sizes[("other", 0)] == 0
    assert sizes[("sized", 0)] > 50 * 100, "every record is on disk"

    out = ok(weir(broker, "log-dirs", "--describe", "--topic-list", "sized"))
    lines = out.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 0"]
    (described,) = json.loads(lines[2])["brokers"]
    (directory,) = described["logDirs"]
    assert directory["logDir"] == str(broker.data_dir.resolve()) and directory["error"] is None
    assert {p["partition"]: p["size"] for p in directory["partitions"]} == {
        "sized-0": sizes[("sized", 0)], "sized-1": 0}


def test_alter_replica_log_dirs_keeps_replicas_in_the_one_directory_and_refuses_others(broker):
    """A broker has one log directory: asking a replica to stay there succeeds (nothing moves), any
    other path, one no file system could have too, is LOG_DIR_NOT_FOUND (kafka-python's admin client)."""
    ok(weir(broker, "topics", "create", "--topic", "placed", "--partitions", "1", "--replication-factor", "1"))
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answers = admin.alter_replica_log_dirs({("placed", 0, 0): str(broker.data_dir.resolve())})
        assert [error.__name__ for error in answers.values()] == ["NoError"]
        for path in ("/no/such/dir", "/no\x00such"):  # a NUL made the handler fail (the connection closed)
            answers = admin.alter_replica_log_dirs({("placed", 0, 0): path})
            assert [error.__name__ for error in answers.values()] == ["LogDirNotFoundError"]
    finally:
        admin.close()

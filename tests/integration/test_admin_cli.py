"""The admin CLI (`weir topics|configs|elect-leaders|cluster`) as an operator runs it: a subprocess
against a real broker process, checking its output and exit status like kafka-topics.sh's.

Tests of APIs the broker does not implement yet (IncrementalAlterConfigs/AlterConfigs,
ElectLeaders) skip themselves only while the broker's ApiVersions lacks the API; they are written
to Kafka's semantics and start running as soon as the broker answers.
"""

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from weir.client import BrokerConnection

REPO = Path(__file__).resolve().parents[2]
ALTER_CONFIGS, ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS = 33, 43, 44


def weir(broker, *args, bootstrap=None, timeout=60) -> subprocess.CompletedProcess:
    """Run `python -m weir.cli.main <command> --bootstrap-server B <rest>`; args[0] is the command."""
    server = bootstrap or broker.bootstrap
    argv = [sys.executable, "-m", "weir.cli.main", args[0], "--bootstrap-server", server, *args[1:]]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result.stdout


def failed(result: subprocess.CompletedProcess) -> str:
    """A readable one-line error on stderr, exit status 1, no traceback."""
    assert result.returncode == 1, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("Error: "), result.stderr
    return result.stderr


def broker_supports(broker, api_key: int) -> bool:
    async def go():
        async with await BrokerConnection.open("127.0.0.1", broker.port, timeout_s=10) as conn:
            return api_key in await conn.api_versions()
    return asyncio.run(go())


def require_api(broker, *api_keys: int) -> None:
    if not any(broker_supports(broker, k) for k in api_keys):
        pytest.skip(f"broker API pending: api key(s) {api_keys} not in ApiVersions")


def partition_lines(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if line.startswith("\t")]


def topic_line(out: str, topic: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"Topic: {topic}\t"))


# -- topics -----------------------------------------------------------------------------------

def test_topics_create_list_describe_alter_delete(broker):
    out = ok(weir(broker, "topics", "create", "--topic", "orders", "--partitions", "3",
                  "--replication-factor", "1", "--config", "retention.ms=3600000",
                  "--config", "segment.bytes=1048576"))
    assert out.strip() == "Created topic orders."
    ok(weir(broker, "topics", "create", "--topic", "audit", "--partitions", "1", "--replication-factor", "1"))

    assert ok(weir(broker, "topics", "list")).split() == ["audit", "orders"]

    out = ok(weir(broker, "topics", "describe", "--topic", "orders"))
    header = topic_line(out, "orders")
    fields = dict(f.split(": ", 1) for f in header.split("\t"))
    assert fields["PartitionCount"] == "3" and fields["ReplicationFactor"] == "1"
    assert len(fields["TopicId"]) == 36
    assert fields["Configs"] == "retention.ms=3600000,segment.bytes=1048576"
    lines = partition_lines(out)
    assert len(lines) == 3
    for i, line in enumerate(lines):
        parts = dict(f.split(": ", 1) for f in line.split("\t"))
        assert parts["Topic"] == "orders" and parts["Partition"] == str(i)
        leader = parts["Leader"]
        assert parts["Replicas"] == leader and parts["Isr"] == leader
        assert "Offline" not in parts

    # all topics, sorted; nothing under-replicated or unavailable on a healthy broker
    out = ok(weir(broker, "topics", "describe"))
    assert [line.split("\t")[0] for line in out.splitlines() if line.startswith("Topic:")] == [
        "Topic: audit", "Topic: orders"]
    assert ok(weir(broker, "topics", "describe", "--under-replicated-partitions")) == ""
    assert ok(weir(broker, "topics", "describe", "--unavailable-partitions")) == ""

    out = ok(weir(broker, "topics", "alter", "--topic", "orders", "--partitions", "5"))
    assert "5 partitions" in out
    out = ok(weir(broker, "topics", "describe", "--topic", "orders"))
    assert "PartitionCount: 5" in topic_line(out, "orders") and len(partition_lines(out)) == 5

    out = ok(weir(broker, "topics", "delete", "--topic", "orders"))
    assert out.strip() == "Deleted topic orders."
    assert ok(weir(broker, "topics", "list")).split() == ["audit"]


def test_bootstrap_server_after_the_action_and_replica_assignment(broker):
    # --bootstrap-server is accepted after the action too, as operators type it
    result = subprocess.run([sys.executable, "-m", "weir.cli.main", "topics", "create", "--topic", "placed",
                             "--replica-assignment", "0,0", "--bootstrap-server", broker.bootstrap],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    ok(result)
    out = ok(weir(broker, "topics", "describe", "--topic", "placed"))
    assert "PartitionCount: 2" in out
    # a replica on a broker that does not exist
    err = failed(weir(broker, "topics", "create", "--topic", "misplaced", "--replica-assignment", "0:7"))
    assert "INVALID_REPLICA_ASSIGNMENT" in err


def test_topic_errors_are_readable(broker):
    ok(weir(broker, "topics", "create", "--topic", "dup", "--partitions", "1", "--replication-factor", "1"))
    err = failed(weir(broker, "topics", "create", "--topic", "dup", "--partitions", "1",
                      "--replication-factor", "1"))
    assert "TOPIC_ALREADY_EXISTS" in err and "dup" in err
    ok(weir(broker, "topics", "create", "--topic", "dup", "--partitions", "1", "--if-not-exists"))

    err = failed(weir(broker, "topics", "describe", "--topic", "missing"))
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err and "missing" in err
    err = failed(weir(broker, "topics", "delete", "--topic", "missing"))
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err
    ok(weir(broker, "topics", "delete", "--topic", "missing", "--if-exists"))

    err = failed(weir(broker, "topics", "alter", "--topic", "dup", "--partitions", "1"))
    assert "INVALID_PARTITIONS" in err
    err = failed(weir(broker, "topics", "create", "--topic", "bad name!", "--partitions", "1"))
    assert "INVALID_TOPIC_EXCEPTION" in err
    err = failed(weir(broker, "topics", "create", "--topic", "rf", "--partitions", "1",
                      "--replication-factor", "3"))
    assert "INVALID_REPLICATION_FACTOR" in err
    err = failed(weir(broker, "topics", "create", "--topic", "cfg", "--config", "no.such.config=1"))
    assert "INVALID_CONFIG" in err
    err = failed(weir(broker, "topics", "create", "--topic", "cfg", "--config", "novalue"))
    assert "key=value" in err


def test_unreachable_bootstrap_server(broker):
    broker.kill()
    for command in (["topics", "list"], ["topics", "describe"], ["cluster"],
                    ["configs", "--entity-type", "topics", "--entity-name", "t", "--describe"]):
        err = failed(weir(broker, *command, "--timeout", "5"))
        assert f"127.0.0.1:{broker.port}" in err, err


def test_cluster(broker):
    out = ok(weir(broker, "cluster"))
    lines = out.splitlines()
    assert lines[0].startswith("Cluster ID: ") and lines[0] != "Cluster ID: None"
    assert lines[1].startswith("Controller: ") and f"127.0.0.1:{broker.port}" in lines[1]
    assert "Brokers: 1" in lines
    assert any(f"127.0.0.1:{broker.port}" in line for line in lines[3:])


# -- configs -------------------------------------------------------------------------------------

def test_configs_describe(broker):
    ok(weir(broker, "topics", "create", "--topic", "conf", "--partitions", "1", "--config", "retention.ms=1234"))
    out = ok(weir(broker, "configs", "--entity-type", "topics", "--entity-name", "conf", "--describe"))
    lines = out.splitlines()
    assert lines[0] == "Dynamic configs for topic conf are:"
    assert lines[1:] == ["  retention.ms=1234 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1234, "
                         "DEFAULT_CONFIG:log.retention.ms=604800000}"]

    out = ok(weir(broker, "configs", "--entity-type", "topics", "--entity-name", "conf", "--describe", "--all"))
    assert out.splitlines()[0] == "All configs for topic conf are:"
    assert "  retention.ms=1234 " in out and "  segment.bytes=" in out and "DEFAULT_CONFIG" in out

    out = ok(weir(broker, "configs", "--entity-type", "brokers", "--entity-name", "0", "--describe", "--all"))
    assert out.splitlines()[0] == "All configs for broker 0 are:"
    assert f"  listeners=PLAINTEXT://127.0.0.1:{broker.port} " in out

    err = failed(weir(broker, "configs", "--entity-type", "topics", "--entity-name", "nope", "--describe"))
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err
    err = failed(weir(broker, "configs", "--entity-type", "brokers", "--entity-name", "9", "--describe"))
    assert "9" in err
    err = failed(weir(broker, "configs", "--entity-type", "topics", "--entity-name", "conf"))
    assert "--describe" in err


def test_configs_alter(broker):
    require_api(broker, INCREMENTAL_ALTER_CONFIGS, ALTER_CONFIGS)
    ok(weir(broker, "topics", "create", "--topic", "tune", "--partitions", "1", "--config", "retention.ms=1234"))
    out = ok(weir(broker, "configs", "--entity-type", "topics", "--entity-name", "tune", "--alter",
                  "--add-config", "retention.ms=3600000,max.message.bytes=2048"))
    assert out.strip() == "Completed updating config for topic tune."
    out = ok(weir(broker, "configs", "--entity-type", "topics", "--entity-name", "tune", "--describe"))
    assert "  retention.ms=3600000 " in out and "  max.message.bytes=2048 " in out
    assert "Configs: max.message.bytes=2048,retention.ms=3600000" in ok(
        weir(broker, "topics", "describe", "--topic", "tune"))

    ok(weir(broker, "configs", "--entity-type", "topics", "--entity-name", "tune", "--alter",
            "--delete-config", "retention.ms"))
    out = ok(weir(broker, "configs", "--entity-type", "topics", "--entity-name", "tune", "--describe"))
    assert "retention.ms" not in out and "  max.message.bytes=2048 " in out

    err = failed(weir(broker, "configs", "--entity-type", "topics", "--entity-name", "tune", "--alter",
                      "--add-config", "no.such.config=1"))
    assert "INVALID_CONFIG" in err
    err = failed(weir(broker, "configs", "--entity-type", "topics", "--entity-name", "gone", "--alter",
                      "--add-config", "retention.ms=1"))
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err


# -- elect-leaders ----------------------------------------------------------------------------------

def test_elect_leaders_preferred(broker):
    require_api(broker, ELECT_LEADERS)
    ok(weir(broker, "topics", "create", "--topic", "lead", "--partitions", "2"))
    # the preferred replica already leads every partition: Kafka answers ELECTION_NOT_NEEDED
    out = ok(weir(broker, "elect-leaders", "--election-type", "PREFERRED", "--topic", "lead", "--partition", "0"))
    assert out.strip() == "Valid replica already elected for partitions lead-0"
    # all partitions: as Kafka, those that need no election are not answered, and nothing is printed
    out = ok(weir(broker, "elect-leaders", "--election-type", "preferred", "--all-topic-partitions"))
    assert out.strip() == ""


def test_elect_leaders_unclean_and_errors(broker):
    require_api(broker, ELECT_LEADERS)
    ok(weir(broker, "topics", "create", "--topic", "lead", "--partitions", "1"))
    out = ok(weir(broker, "elect-leaders", "--election-type", "UNCLEAN", "--topic", "lead", "--partition", "0"))
    assert "lead-0" in out
    result = weir(broker, "elect-leaders", "--election-type", "PREFERRED", "--topic", "nope", "--partition", "0")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "nope-0: UNKNOWN_TOPIC_OR_PARTITION" in result.stdout


def test_elect_leaders_argument_errors(broker):
    err = failed(weir(broker, "elect-leaders", "--election-type", "SOMETIMES", "--all-topic-partitions"))
    assert "PREFERRED or UNCLEAN" in err
    err = failed(weir(broker, "elect-leaders", "--election-type", "PREFERRED"))
    assert "--all-topic-partitions" in err


def test_delete_records(broker, tmp_path):
    from confluent_kafka import Producer
    ok(weir(broker, "topics", "create", "--topic", "trim", "--partitions", "2", "--replication-factor", "1"))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        producer.produce("trim", b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    offsets = tmp_path / "offsets.json"
    offsets.write_text('{"partitions": [{"topic": "trim", "partition": 0, "offset": 5}], "version": 1}')
    out = ok(weir(broker, "delete-records", "--offset-json-file", str(offsets)))
    assert out == "Executing records delete operation\nRecords delete operation completed:\n" \
                  "partition: trim-0\tlow_watermark: 5\n"

    offsets.write_text('{"partitions": [{"topic": "trim", "partition": 1, "offset": 3}], "version": 1}')
    result = weir(broker, "delete-records", "--offset-json-file", str(offsets))
    assert result.returncode == 1 and "partition: trim-1\terror: OFFSET_OUT_OF_RANGE" in result.stdout, result

    offsets.write_text('{"partitions": [{"topic": "trim"}]}')
    assert "not an offset JSON file" in failed(weir(broker, "delete-records", "--offset-json-file", str(offsets)))

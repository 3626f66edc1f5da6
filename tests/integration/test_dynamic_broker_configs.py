"""Dynamic broker configs (KIP-226) on a running broker: the cluster-wide default (set with
`weir configs --entity-default`, as kafka-configs.sh) and a broker's own value (confluent-kafka's
admin client) take effect without a restart, in Kafka's order (this broker's, the cluster's, the
properties', the default), and are described with their sources; settings Kafka cannot change at
run time are refused."""

import subprocess
import sys

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic,
                                   ResourceType)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import ConfigResourceType
from waiting import wait_until

LARGE = b"x" * 5000


def weir_configs(broker, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "weir.cli.main", "configs", "--bootstrap-server", broker.bootstrap,
                             "--entity-type", "brokers", *args], capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    return result.stdout


def produce_error(bootstrap: str, value: bytes):
    """The error of producing `value` (None: stored)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors = []
    producer.produce("dynamic", value, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0
    return errors[0] and errors[0].name()


def max_message_bytes(bootstrap: str) -> tuple[str, str]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = client.describe_configs([KafkaPythonConfigResource(ConfigResourceType.TOPIC, "dynamic")],
                                            include_synonyms=True, config_filter="all")["topic"]["dynamic"]
    finally:
        client.close()
    return described["max.message.bytes"]["value"], described["max.message.bytes"]["config_source"]


def set_on_broker_0(admin: AdminClient, name: str, value: str | None) -> None:
    operation = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    change = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry(name, value, incremental_operation=operation)])
    admin.incremental_alter_configs([change])[change].result(30)


def test_dynamic_broker_configs_apply_at_once_in_kafkas_order(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("dynamic", 1, 1)])["dynamic"].result(30)
    assert produce_error(broker.bootstrap, LARGE) is None

    assert "Completed updating default config for brokers in the cluster." in weir_configs(
        broker, "--entity-default", "--alter", "--add-config", "message.max.bytes=1000")
    wait_until(lambda: max_message_bytes(broker.bootstrap) == ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
               "the cluster default to reach the topic")
    assert produce_error(broker.bootstrap, LARGE) == "MSG_SIZE_TOO_LARGE"
    assert "message.max.bytes=1000" in weir_configs(broker, "--entity-default", "--describe")

    set_on_broker_0(admin, "message.max.bytes", "100000")  # this broker's own value wins
    wait_until(lambda: max_message_bytes(broker.bootstrap) == ("100000", "DYNAMIC_BROKER_CONFIG"),
               "the broker's value to win")
    resource = ConfigResource(ResourceType.BROKER, "0")
    entry = admin.describe_configs([resource])[resource].result(30)["message.max.bytes"]
    assert ConfigSource(entry.source) == ConfigSource.DYNAMIC_BROKER_CONFIG and not entry.is_read_only
    assert produce_error(broker.bootstrap, LARGE) is None

    set_on_broker_0(admin, "message.max.bytes", None)
    weir_configs(broker, "--entity-default", "--alter", "--delete-config", "message.max.bytes")
    wait_until(lambda: max_message_bytes(broker.bootstrap) == ("1048588", "DEFAULT_CONFIG"), "the default back")


@pytest.mark.parametrize("name, value, error", [
    ("log.dirs", "/elsewhere", "INVALID_REQUEST"), ("zookeeper.connect", "elsewhere:2181", "INVALID_REQUEST"),
    ("log.retention.ms", "-2", "INVALID_REQUEST"), ("leader.replication.throttled.rate", "fast", "INVALID_REQUEST")])
def test_what_cannot_change_at_run_time_is_refused(broker, name, value, error):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as refused:
        set_on_broker_0(admin, name, value)
    assert refused.value.args[0].name() == error

"""(Incremental)AlterConfigs requests that are well-formed but wrong, answered as Kafka's
ConfigAdminManager.preprocess and ZkAdminManager answer them (INVALID_REQUEST, Kafka's messages;
core/src/main/scala/kafka/server/ConfigAdminManager.scala), with nothing changed. Sent by hand:
librdkafka refuses a config named twice before sending it."""

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kio.schema.alter_configs.v2 import request as legacy
from kio.schema.incremental_alter_configs.v1 import request as incremental
from raw_protocol import RawClient, assert_healthy
from waiting import wait_until

INCREMENTAL_ALTER_CONFIGS, ALTER_CONFIGS = 44, 33
TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
INVALID_REQUEST = 42


def topic_overrides(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(30)
    return {name: e.value for name, e in described.items() if e.source == 1}  # DYNAMIC_TOPIC_CONFIG


def alter(client: RawClient, *resources: tuple[int, str, list[tuple[str, str | None, int]]]):
    """IncrementalAlterConfigs v1: (error code, message) of each resource, in order."""
    response = client.call(INCREMENTAL_ALTER_CONFIGS, 1, incremental.IncrementalAlterConfigsRequest(
        validate_only=False, resources=tuple(incremental.AlterConfigsResource(
            resource_type=kind, resource_name=name, configs=tuple(
                incremental.AlterableConfig(name=n, value=v, config_operation=op) for n, v, op in configs))
            for kind, name, configs in resources)))
    return [(r.error_code, r.error_message) for r in response.responses]


def test_what_kafka_refuses_before_looking_at_a_resource_is_an_invalid_request(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name in ("twice", "once", "nulls", "dup"):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    ratio = "min.cleanable.dirty.ratio"
    with RawClient(broker.port) as client:
        answers = alter(
            client,
            (TOPIC, "twice", [(ratio, "0.75", SET), (ratio, "0.65", SET), ("compression.type", "gzip", SET)]),
            (TOPIC, "once", [(ratio, "0.9", SET), ("retention.ms", None, DELETE)]),
            (TOPIC, "nulls", [("retention.ms", None, SET), ("compression.type", "gzip", SET)]),
            (TOPIC, "dup", [(ratio, "0.8", SET)]),
            (TOPIC, "dup", [("compression.type", "gzip", SET)]),
            (TOPIC, "", [(ratio, "0.8", SET)]),
            (BROKER, "7", [("log.retention.ms", "1000", SET)]),
            (BROKER, "zero", [("log.retention.ms", "1000", SET)]))
        assert answers == [
            (INVALID_REQUEST, "Error due to duplicate config keys"), (0, None),
            (INVALID_REQUEST, "Null value not supported for : retention.ms"),
            (INVALID_REQUEST, "Each resource must appear at most once."),
            (INVALID_REQUEST, "Each resource must appear at most once."),
            (INVALID_REQUEST, "Default topic resources are not allowed."),
            (INVALID_REQUEST, "Unexpected broker id, expected 0, but received 7"),
            (INVALID_REQUEST, "Node id must be an integer, but it is: zero")]

        legacy_response = client.call(ALTER_CONFIGS, 2, legacy.AlterConfigsRequest(validate_only=False, resources=(
            legacy.AlterConfigsResource(resource_type=TOPIC, resource_name="once", configs=(
                legacy.AlterableConfig(name=ratio, value="0.5"), legacy.AlterableConfig(name="retention.ms", value=None))),
            legacy.AlterConfigsResource(resource_type=TOPIC, resource_name="twice", configs=(
                legacy.AlterableConfig(name=ratio, value="0.5"), legacy.AlterableConfig(name=ratio, value="0.6"))))))
        assert [(r.error_code, r.error_message) for r in legacy_response.responses] == [
            (INVALID_REQUEST, "Null value not supported for : retention.ms"),
            (INVALID_REQUEST, "Error due to duplicate config keys")]

    wait_until(lambda: topic_overrides(admin, "once") == {ratio: "0.9"}, "the valid change to be seen")
    for name in ("twice", "nulls", "dup"):
        assert topic_overrides(admin, name) == {}, name
    assert_healthy(broker)

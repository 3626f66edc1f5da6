"""The group request handlers (weir.broker.group_apis) against a stand-in coordinator: what each API
answers in the coordinator's transient states, as Kafka's GroupCoordinator.scala does."""

import asyncio
from types import SimpleNamespace

from weir.broker.group_apis import GroupApis
from weir.protocol.codec import build, request_schema
from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey


def ask(apis: GroupApis, api_key: ApiKey, version: int, body: dict) -> dict:
    header = RequestHeader(int(api_key), version, 1, "test", 0, "/127.0.0.1", "PLAINTEXT", "User:ANONYMOUS")
    answer = apis.handlers[api_key](header, build(request_schema(api_key, version), body))
    return asyncio.run(answer) if asyncio.iscoroutine(answer) else answer


def loading_coordinator() -> SimpleNamespace:
    """A coordinator still loading the group's __consumer_offsets partition."""
    def no_group(group_id, create):
        raise AssertionError("a loading coordinator has no groups to look at")
    return SimpleNamespace(group=no_group, loading=True, owned=set(), groups={}, consumer_groups={},
                           coordinator_error=lambda group_id, empty_allowed=False: ErrorCode.coordinator_load_in_progress)


def test_while_the_coordinator_loads_sync_group_is_a_rebalance_and_heartbeat_is_fine():
    """Kafka's handleSyncGroup answers REBALANCE_IN_PROGRESS (the rebalance was lost with the old
    coordinator: the member rejoins; older clients - the Java consumer among them - fail on
    COORDINATOR_LOAD_IN_PROGRESS there) and handleHeartbeat answers NONE ("respond just blindly")."""
    apis = GroupApis(loading_coordinator())
    for version in (0, 3, 5):
        synced = ask(apis, ApiKey.SYNC_GROUP, version, {"group_id": "g", "generation_id": 1, "member_id": "m",
                                                        "group_instance_id": None, "protocol_type": "consumer",
                                                        "protocol_name": "range", "assignments": []})
        assert synced["error_code"] == ErrorCode.rebalance_in_progress
    for version in (0, 4):
        beat = ask(apis, ApiKey.HEARTBEAT, version, {"group_id": "g", "generation_id": 1, "member_id": "m",
                                                     "group_instance_id": None})
        assert beat["error_code"] == ErrorCode.none
    joined = ask(apis, ApiKey.JOIN_GROUP, 5, {"group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000,
                                             "member_id": "", "group_instance_id": None,
                                             "protocol_type": "consumer", "protocols": []})
    assert joined["error_code"] == ErrorCode.coordinator_load_in_progress  # the others say so


def test_the_consumer_protocol_is_refused_when_not_enabled():
    """group.coordinator.rebalance.protocols=classic: ConsumerGroupHeartbeat is UNSUPPORTED_VERSION."""
    from weir.groups.consumer_group import ConsumerGroupConfig
    coordinator = SimpleNamespace(consumer_config=ConsumerGroupConfig(enabled=False), groups={}, consumer_groups={})
    beat = ask(GroupApis(coordinator), ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": "g", "member_id": "m", "member_epoch": 0, "rebalance_timeout": 1000,
        "subscribed_topic_names": ["t"], "topic_partitions": []})
    assert beat["error_code"] == ErrorCode.unsupported_version

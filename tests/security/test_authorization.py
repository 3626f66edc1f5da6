"""The API → operation table, the handlers' helper and its cache, the ACL APIs' semantics and
`weir acls`' bindings, without a broker."""

import asyncio
from types import SimpleNamespace

import pytest

from weir.broker.acl_apis import AclApis
from weir.cli.acls import bindings_to_add, confirmed, filters, list_filters
from weir.cli.common import UsageError
from weir.protocol.codec import build, request_schema
from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.versions import SUPPORTED_VERSIONS, ApiKey
from weir.security.acls import AclEntry, Authorizer, Operation, PatternType, Permission, ResourcePattern, ResourceType
from weir.security.authorization import (REQUIRED, UNCHECKED, RequestAuthorizer, allowed, authorized_operations,
                                         cluster_error, denied, denied_creation)

TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
ALICE = "User:alice"


def header(api_key: ApiKey, principal: str = ALICE, host: str = "/10.0.0.1", version: int = 3) -> RequestHeader:
    return RequestHeader(int(api_key), version, 1, "test", 0, host, "SASL_SSL", principal)


def authz(*acls, **kwargs) -> RequestAuthorizer:
    """acls: (resource type, name, pattern type, operation[, principal, host, permission])."""
    authorizer = Authorizer(**kwargs)
    by_pattern: dict = {}
    for resource_type, name, pattern_type, operation, *rest in acls:
        principal, host, permission = (rest + [ALICE, "*", Permission.ALLOW][len(rest):])[:3]
        by_pattern.setdefault(ResourcePattern(resource_type, name, pattern_type), []).append(
            AclEntry(principal, host, operation, permission))
    authorizer.replace_all(by_pattern)
    return RequestAuthorizer(authorizer)


def test_every_api_served_is_checked_or_knowingly_open():
    assert set(REQUIRED) | UNCHECKED == set(SUPPORTED_VERSIONS)
    assert not set(REQUIRED) & UNCHECKED


def test_without_an_authorizer_everything_is_allowed():
    assert denied(None, header(ApiKey.PRODUCE), TOPIC, ["t"]) == set()
    assert allowed(None, header(ApiKey.CREATE_ACLS))
    assert cluster_error(None, header(ApiKey.WRITE_TXN_MARKERS)) == ErrorCode.none
    assert denied_creation(None, header(ApiKey.CREATE_TOPICS), ["t"]) == set()


def test_the_api_decides_the_operation_and_the_host_is_the_peer_address():
    a = authz((TOPIC, "pre", PatternType.PREFIXED, Operation.WRITE, ALICE, "10.0.0.1"))
    assert denied(a, header(ApiKey.PRODUCE), TOPIC, ["pre-x", "other"]) == {"other"}
    assert denied(a, header(ApiKey.PRODUCE, host="/10.0.0.2"), TOPIC, ["pre-x"]) == {"pre-x"}
    assert denied(a, header(ApiKey.FETCH), TOPIC, ["pre-x"]) == {"pre-x"}  # READ is not granted
    assert denied(a, header(ApiKey.METADATA), TOPIC, ["pre-x"]) == set()  # WRITE implies DESCRIBE
    assert cluster_error(a, header(ApiKey.CREATE_ACLS)) == ErrorCode.cluster_authorization_failed
    assert allowed(authz(super_users=[ALICE]), header(ApiKey.CREATE_ACLS))


def test_topics_are_creatable_by_cluster_create_or_their_own_create():
    by_topic = authz((TOPIC, "app-", PatternType.PREFIXED, Operation.CREATE))
    assert denied_creation(by_topic, header(ApiKey.METADATA), ["app-1", "x"]) == {"x"}
    by_cluster = authz((CLUSTER, "kafka-cluster", PatternType.LITERAL, Operation.CREATE))
    assert denied_creation(by_cluster, header(ApiKey.CREATE_TOPICS), ["app-1", "x"]) == set()


def test_idempotent_producers_need_idempotent_write_or_write_on_some_topic():
    a = authz((TOPIC, "t", PatternType.LITERAL, Operation.WRITE))
    assert a.allows_any(header(ApiKey.INIT_PRODUCER_ID), TOPIC)
    assert not a.allows_any(header(ApiKey.INIT_PRODUCER_ID, "User:bob"), TOPIC)


def test_decisions_are_cached_until_the_acls_change():
    a = authz((TOPIC, "t", PatternType.LITERAL, Operation.READ))
    calls = []
    decide = a.authorizer.authorize
    a.authorizer.authorize = lambda *args: calls.append(args) or decide(*args)
    for _ in range(3):
        assert denied(a, header(ApiKey.FETCH), TOPIC, ["t"]) == set()
    assert len(calls) == 1
    a.authorizer.replace_pattern(ResourcePattern(TOPIC, "t"), [])
    a.acls_changed()
    assert denied(a, header(ApiKey.FETCH), TOPIC, ["t"]) == {"t"}
    assert len(calls) == 2


class FakeStore:
    """AclStore's update() on the authorizer alone (ZooKeeper's side: test_acl_store.py)."""

    def __init__(self, a: RequestAuthorizer) -> None:
        self.authz = a

    async def update(self, pattern, change):
        old = frozenset(e for b in self.authz.authorizer.bindings() if b.pattern == pattern for e in [b.entry])
        self.authz.authorizer.replace_pattern(pattern, change(old))
        self.authz.acls_changed()
        return old


def call(apis: AclApis, api_key: ApiKey, body: dict, principal: str = "User:admin"):
    request = build(request_schema(api_key, 3), body)
    answer = apis.handlers[api_key](header(api_key, principal), request)
    return asyncio.run(answer) if asyncio.iscoroutine(answer) else answer


def creation(name, operation=Operation.WRITE, pattern_type=PatternType.PREFIXED, resource_type=TOPIC, principal=ALICE):
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern_type,
            "principal": principal, "host": "*", "operation": operation, "permission_type": Permission.ALLOW}


def acl_filter(name=None, pattern_type=PatternType.ANY, operation=Operation.ANY) -> dict:
    return {"resource_type_filter": ResourceType.ANY if name is None else TOPIC, "resource_name_filter": name,
            "pattern_type_filter": pattern_type, "principal_filter": None, "host_filter": None,
            "operation": operation, "permission_type": Permission.ANY}


def test_create_describe_and_delete_acls_as_kafka_answers_them():
    a = authz(super_users=["User:admin"])
    apis = AclApis(a, FakeStore(a))
    created = call(apis, ApiKey.CREATE_ACLS, {"creations": [
        creation("pre"), creation("pre", Operation.DESCRIBE), creation("c", resource_type=CLUSTER)]})
    assert [r["error_code"] for r in created["results"]] == [0, 0, ErrorCode.invalid_request]
    described = call(apis, ApiKey.DESCRIBE_ACLS, acl_filter("pre-x", PatternType.MATCH))
    assert [(r["resource_name"], r["pattern_type"], len(r["acls"])) for r in described["resources"]] == \
        [("pre", PatternType.PREFIXED, 2)]
    assert not denied(a, header(ApiKey.PRODUCE), TOPIC, ["pre-x"])
    deleted = call(apis, ApiKey.DELETE_ACLS, {"filters": [acl_filter("pre", operation=Operation.WRITE),
                                                          acl_filter(operation=Operation.UNKNOWN)]})
    first, second = deleted["filter_results"]
    assert [(m["resource_name"], m["operation"]) for m in first["matching_acls"]] == [("pre", Operation.WRITE)]
    assert second["error_code"] == ErrorCode.invalid_request
    assert denied(a, header(ApiKey.PRODUCE), TOPIC, ["pre-x"]) == {"pre-x"}
    # alice may not change ACLs; without an authorizer nobody may
    refused = call(apis, ApiKey.CREATE_ACLS, {"creations": [creation("x")]}, principal=ALICE)
    assert refused["results"][0]["error_code"] == ErrorCode.cluster_authorization_failed
    assert call(AclApis(None, None), ApiKey.DESCRIBE_ACLS, acl_filter())["error_code"] == ErrorCode.security_disabled


class FailingStore(FakeStore):
    async def update(self, pattern, change):
        if pattern.name == "broken":
            raise ValueError("the store failed")
        return await super().update(pattern, change)


def test_create_acls_answers_per_binding_what_cannot_be_stored():
    a = authz(super_users=["User:admin"])
    created = call(AclApis(a, FailingStore(a)), ApiKey.CREATE_ACLS, {"creations": [
        creation("team/x", resource_type=ResourceType.GROUP, operation=Operation.READ),
        creation("..", resource_type=ResourceType.TRANSACTIONAL_ID), creation("broken"), creation("fine")]})
    errors = [(r["error_code"], r["error_message"]) for r in created["results"]]
    assert [code for code, _ in errors] == [ErrorCode.invalid_request, ErrorCode.invalid_request,
                                            ErrorCode.unknown_server_error, ErrorCode.none]
    assert "'/'" in errors[0][1]
    assert [b.pattern.name for b in a.authorizer.bindings()] == ["fine"]


def cli_args(**given):
    defaults = dict(topic=[], group=[], transactional_id=[], cluster=False, producer=False, consumer=False,
                    idempotent=False, operation=[], allow_principal=[], deny_principal=[], allow_host=[], deny_host=[],
                    resource_pattern_type="literal", principal=None)
    return SimpleNamespace(**{**defaults, **given})


def test_weir_acls_bindings_as_kafka_acls_makes_them():
    producer = bindings_to_add(cli_args(producer=True, idempotent=True, topic=["t"], transactional_id=["tx"],
                                        allow_principal=[ALICE]))
    assert {(b.pattern.resource_type, b.entry.operation) for b in producer} == {
        (TOPIC, Operation.WRITE), (TOPIC, Operation.DESCRIBE), (TOPIC, Operation.CREATE),
        (ResourceType.TRANSACTIONAL_ID, Operation.WRITE), (ResourceType.TRANSACTIONAL_ID, Operation.DESCRIBE),
        (CLUSTER, Operation.IDEMPOTENT_WRITE)}
    consumer = bindings_to_add(cli_args(consumer=True, topic=["t"], group=["g"], deny_principal=["User:bob"],
                                        deny_host=["10.0.0.9"], resource_pattern_type="prefixed"))
    assert {(b.pattern.resource_type, b.entry.operation, b.entry.permission, b.entry.host, b.pattern.pattern_type)
            for b in consumer} == {(TOPIC, Operation.READ, Permission.DENY, "10.0.0.9", PatternType.PREFIXED),
                                   (TOPIC, Operation.DESCRIBE, Permission.DENY, "10.0.0.9", PatternType.PREFIXED),
                                   (ResourceType.GROUP, Operation.READ, Permission.DENY, "10.0.0.9", PatternType.PREFIXED)}
    [everything] = bindings_to_add(cli_args(topic=["t"], allow_principal=[ALICE]))
    assert everything.entry.operation == Operation.ALL
    [remove_all] = filters(cli_args(topic=["t"]))
    assert (remove_all.name, remove_all.principal, remove_all.host, remove_all.operation) == ("t", None, None,
                                                                                              Operation.ANY)
    [alices] = filters(cli_args(topic=["t"], allow_principal=[ALICE], operation=["write"]))
    assert (alices.principal, alices.host, alices.permission, alices.operation) == (ALICE, "*", Permission.ALLOW,
                                                                                    Operation.WRITE)
    [list_all] = list_filters(cli_args(resource_pattern_type="literal"))
    assert (list_all.resource_type, list_all.pattern_type) == (ResourceType.ANY, PatternType.ANY)
    with pytest.raises(UsageError, match="literal or prefixed"):
        bindings_to_add(cli_args(topic=["t"], allow_principal=[ALICE], resource_pattern_type="match"))


def test_weir_acls_remove_as_kafka_acls():
    with pytest.raises(UsageError, match="at least one resource"):
        filters(cli_args(allow_principal=[ALICE]))
    # a principal without --operation: its All entries only (kafka-acls' default), not every operation
    [alices] = filters(cli_args(topic=["t"], allow_principal=[ALICE]))
    assert (alices.principal, alices.operation, alices.permission) == (ALICE, Operation.ALL, Permission.ALLOW)
    producer = filters(cli_args(producer=True, topic=["t"], group=["g"], allow_principal=[ALICE]))
    assert {(f.resource_type, f.operation) for f in producer} == {
        (TOPIC, Operation.WRITE), (TOPIC, Operation.DESCRIBE), (TOPIC, Operation.CREATE)}
    consumer = filters(cli_args(consumer=True, topic=["t"], group=["g"], allow_principal=[ALICE], operation=["alter"]))
    assert {(f.resource_type, f.operation) for f in consumer} == {
        (TOPIC, Operation.READ), (TOPIC, Operation.DESCRIBE), (ResourceType.GROUP, Operation.READ)}


def test_weir_acls_remove_without_a_terminal_needs_force(monkeypatch):
    wanted = filters(cli_args(topic=["t"]))
    monkeypatch.setattr("sys.stdin", SimpleNamespace(isatty=lambda: False))
    with pytest.raises(UsageError, match="--force"):
        confirmed(SimpleNamespace(force=False), wanted)
    assert confirmed(SimpleNamespace(force=True), wanted)
    monkeypatch.setattr("sys.stdin", SimpleNamespace(isatty=lambda: True))
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert not confirmed(SimpleNamespace(force=False), wanted)


def test_group_and_transaction_handlers_refuse_with_kafkas_errors():
    from weir.broker.group_apis import GroupApis
    from weir.broker.txn_apis import TransactionApis
    from weir.broker.txn_markers import TxnMarkerApis
    from weir.groups.group import GroupState

    a = authz((ResourceType.GROUP, "g", PatternType.LITERAL, Operation.READ),
              (TOPIC, "t", PatternType.LITERAL, Operation.READ))
    committed = SimpleNamespace(offset=5, leader_epoch=0, metadata="")
    group = SimpleNamespace(group_id="g", protocol_type="consumer", state=GroupState.STABLE, partition=0,
                            is_=lambda state: False, offsets={("t", 0): committed, ("u", 0): committed},
                            has_pending_offsets=lambda key: False)

    async def find_coordinator(key):
        return ErrorCode.none, SimpleNamespace(broker_id=1, address=lambda listener: ("127.0.0.1", 9092))

    coordinator = SimpleNamespace(consumer_groups={}, coordinator_error=lambda group_id, empty_allowed=False: None, loading=False, owned={0},
                                  groups={"g": group, "h": SimpleNamespace(**{**vars(group), "group_id": "h"})},
                                  group=lambda group_id, create: group, find_coordinator=find_coordinator)
    groups = GroupApis(coordinator, authz=a)

    def ask(apis, api_key, version, body):
        answer = apis.handlers[api_key](header(api_key, version=version), build(request_schema(api_key, version), body))
        return asyncio.run(answer) if asyncio.iscoroutine(answer) else answer

    joined = ask(groups, ApiKey.JOIN_GROUP, 5, {"group_id": "other", "session_timeout": 10000, "member_id": "",
                                                 "protocol_type": "consumer", "protocols": []})
    assert joined["error_code"] == ErrorCode.group_authorization_failed
    fetched = ask(groups, ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "g", "topics": None}]})
    assert [t["name"] for t in fetched["groups"][0]["topics"]] == ["t"]  # "u" is hidden: no DESCRIBE on it
    listed = ask(groups, ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    assert [g["group_id"] for g in listed["groups"]] == ["g"]
    found = ask(groups, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g", "other"]})
    assert [c["error_code"] for c in found["coordinators"]] == [ErrorCode.none, ErrorCode.group_authorization_failed]

    txns = TransactionApis(SimpleNamespace(), lambda: 50, a)
    assert ask(txns, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 1000})[
        "error_code"] == ErrorCode.cluster_authorization_failed  # idempotent: no IDEMPOTENT_WRITE, no topic WRITE
    assert ask(txns, ApiKey.END_TXN, 3, {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                                         "committed": True})["error_code"] == ErrorCode.transactional_id_authorization_failed
    markers = TxnMarkerApis(SimpleNamespace(config={"request.timeout.ms": 1000}, on_offsets_marker=None), a)
    written = ask(markers, ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [
        {"producer_id": 1, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
         "topics": [{"name": "t", "partition_indexes": [0]}]}]})
    assert written["markers"][0]["topics"][0]["partitions"][0]["error_code"] == ErrorCode.cluster_authorization_failed


def test_authorized_operations_bit_fields():
    """Kafka's: 1 << operation for each the principal may do; every one without an authorizer; the
    cluster's none unless DESCRIBE is among them."""
    h = header(ApiKey.METADATA)
    assert authorized_operations(None, h, TOPIC, "t") == 0b1101_1111_1000  # READ (3) .. ALTER_CONFIGS (11) but 9
    assert authorized_operations(None, h, ResourceType.GROUP, "g") == (1 << 3) | (1 << 6) | (1 << 8)
    writer = authz((TOPIC, "t", PatternType.PREFIXED, Operation.WRITE))
    assert authorized_operations(writer, h, TOPIC, "tx") == (1 << Operation.WRITE) | (1 << Operation.DESCRIBE)
    assert authorized_operations(writer, h, TOPIC, "other") == 0
    creator = authz((CLUSTER, "kafka-cluster", PatternType.LITERAL, Operation.CREATE))
    assert authorized_operations(creator, h, CLUSTER) == 0  # no DESCRIBE on the cluster
    operator = authz((CLUSTER, "kafka-cluster", PatternType.LITERAL, Operation.CREATE),
                     (CLUSTER, "kafka-cluster", PatternType.LITERAL, Operation.DESCRIBE))
    assert authorized_operations(operator, h, CLUSTER) == (1 << Operation.CREATE) | (1 << Operation.DESCRIBE)


def test_admin_handlers_refuse_as_kafka():
    """DeleteTopics by id, CreateTopics' configs, ElectLeaders v0 (KafkaApis)."""
    import uuid

    from weir.broker.admin_apis import ZERO_UUID, AdminApis
    from weir.config.broker_config import BrokerConfig
    from weir.zk.model import ClusterView, TopicAssignment

    hidden_id, seen_id, unknown_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    topics = {"hidden": TopicAssignment("hidden", hidden_id, {0: (1,)}),
              "seen": TopicAssignment("seen", seen_id, {0: (1,)})}
    view = ClusterView(topics=topics)
    a = authz((TOPIC, "seen", PatternType.LITERAL, Operation.DESCRIBE),
              (TOPIC, "new", PatternType.LITERAL, Operation.CREATE))
    apis = AdminApis(SimpleNamespace(config=BrokerConfig(), view=view), None, None, a)

    async def create_topic(name, partitions, factor, manual, configs, validate_only=False):
        return TopicAssignment(name, uuid.uuid4(), {0: (1,)})

    apis.create_topic = create_topic

    def ask(api_key, version, body):
        answer = apis.handlers[api_key](header(api_key, version=version), build(request_schema(api_key, version), body))
        return asyncio.run(answer) if asyncio.iscoroutine(answer) else answer

    deleted = ask(ApiKey.DELETE_TOPICS, 6, {"timeout": 1000, "topics": [
        {"name": None, "topic_id": i} for i in (hidden_id, seen_id, unknown_id)]})
    assert [(r["name"], r["error_code"]) for r in deleted["responses"]] == [
        (None, ErrorCode.topic_authorization_failed), ("seen", ErrorCode.topic_authorization_failed),
        (None, ErrorCode.unknown_topic_id)]
    assert deleted["responses"][0]["topic_id"] == hidden_id != ZERO_UUID
    created = ask(ApiKey.CREATE_TOPICS, 5, {"topics": [
        {"name": "new", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 1000, "validate_only": True})["topics"][0]
    assert (created["error_code"], created["topic_config_error_code"], created["configs"]) == (
        0, ErrorCode.topic_authorization_failed, [])
    elected = ask(ApiKey.ELECT_LEADERS, 0, {"topic_partitions": [{"topic": "seen", "partitions": [0, 1]}],
                                            "timeout_ms": 1000})
    assert [(r["topic"], [(p["partition_id"], p["error_code"]) for p in r["partition_result"]])
            for r in elected["replica_election_results"]] == [
        ("seen", [(0, ErrorCode.cluster_authorization_failed), (1, ErrorCode.cluster_authorization_failed)])]


def test_transaction_handlers_check_as_kafka():
    """AddPartitionsToTxn: v4+ (from brokers) CLUSTER_ACTION alone; refused and unknown topics each
    with their error. DescribeTransactions: only the topics the principal may describe."""
    from weir.broker.txn_apis import TransactionApis

    a = authz((ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL, Operation.ALL),
              (TOPIC, "t", PatternType.LITERAL, Operation.WRITE), (TOPIC, "gone", PatternType.LITERAL, Operation.WRITE),
              (CLUSTER, "kafka-cluster", PatternType.LITERAL, Operation.CLUSTER_ACTION, "User:broker"))
    meta = SimpleNamespace(partitions={("t", 0), ("secret", 0)}, state=SimpleNamespace(kafka_name="Ongoing"),
                           txn_timeout_ms=1000, txn_start_timestamp=1, producer_id=7, producer_epoch=0)

    async def add_partitions(transactional_id, producer_id, producer_epoch, wanted):
        return SimpleNamespace(error=ErrorCode.none)

    view = SimpleNamespace(topics={n: SimpleNamespace(replicas={0: (1,)}) for n in ("t", "secret")})
    coordinator = SimpleNamespace(replicas=SimpleNamespace(view=view), add_partitions=add_partitions,
                                  core=SimpleNamespace(describe_transaction=lambda transactional_id: meta))
    txns = TransactionApis(coordinator, lambda: 50, a)

    def ask(api_key, version, body, principal=ALICE):
        answer = txns.handlers[api_key](header(api_key, principal, version=version),
                                        build(request_schema(api_key, version), body))
        return asyncio.run(answer) if asyncio.iscoroutine(answer) else answer

    def errors(topic_results):
        return {(t["name"], p["partition_index"]): p["partition_error_code"]
                for t in topic_results for p in t["results_by_partition"]}

    topics = [{"name": n, "partitions": [0]} for n in ("t", "gone", "secret")]
    added = ask(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 7,
                                                  "v3_and_below_producer_epoch": 0, "v3_and_below_topics": topics})
    assert errors(added["results_by_topic_v3_and_below"]) == {
        ("t", 0): ErrorCode.operation_not_attempted, ("gone", 0): ErrorCode.unknown_topic_or_partition,
        ("secret", 0): ErrorCode.topic_authorization_failed}
    by_broker = ask(ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [
        {"transactional_id": "other", "producer_id": 7, "producer_epoch": 0, "verify_only": False,
         "topics": [{"name": "secret", "partitions": [0]}]}]}, principal="User:broker")
    assert errors(by_broker["results_by_transaction"][0]["topic_results"]) == {("secret", 0): ErrorCode.none}
    described = ask(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx"]})
    assert [t["topic"] for t in described["transaction_states"][0]["topics"]] == ["t"]


def test_offset_for_leader_epoch_allows_cluster_action_or_topic_describe():
    """Kafka: whatever the replica id, CLUSTER_ACTION allows every topic, else each needs DESCRIBE;
    a refusal is TOPIC_AUTHORIZATION_FAILED."""
    from weir.broker.apis import DataApis

    a = authz((TOPIC, "t", PatternType.LITERAL, Operation.DESCRIBE),
              (CLUSTER, "kafka-cluster", PatternType.LITERAL, Operation.CLUSTER_ACTION, "User:broker"))
    apis = DataApis(SimpleNamespace(partitions={}), authz=a)

    def errors(principal, replica_id):
        body = {"replica_id": replica_id, "topics": [{"topic": n, "partitions": [
            {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}]} for n in ("t", "u")]}
        api_key = ApiKey.OFFSET_FOR_LEADER_EPOCH
        answer = apis.handlers[api_key](header(api_key, principal), build(request_schema(api_key, 3), body))
        return [t["partitions"][0]["error_code"] for t in answer["topics"]]

    for replica_id in (-1, 2):
        assert errors(ALICE, replica_id) == [ErrorCode.unknown_topic_or_partition, ErrorCode.topic_authorization_failed]
        assert errors("User:broker", replica_id) == [ErrorCode.unknown_topic_or_partition] * 2

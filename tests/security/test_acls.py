"""Kafka's authorization rules on ACL bindings (no broker): precedence, patterns, implied operations,
filters, and the ZooKeeper format."""

import pytest

from weir.security.acls import (AclBinding, AclEntry, AclFilter, Authorizer, InvalidAcl, Operation, PatternType,
                                Permission, ResourcePattern, ResourceType, check_creatable, decode_entries,
                                encode_entries, pattern_of_path, znode_path)

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
ALLOW, DENY = Permission.ALLOW, Permission.DENY
ALICE, BOB = "User:alice", "User:bob"


def entry(principal=ALICE, operation=Operation.READ, permission=ALLOW, host="*"):
    return AclEntry(principal, host, operation, permission)


def authorizer(*bindings, **kwargs) -> Authorizer:
    auth = Authorizer(**kwargs)
    patterns: dict = {}
    for pattern, e in bindings:
        patterns.setdefault(pattern, []).append(e)
    for pattern, entries in patterns.items():
        auth.replace_pattern(pattern, entries)
    return auth


def literal(name, type_=TOPIC):
    return ResourcePattern(type_, name, PatternType.LITERAL)


def prefixed(name, type_=TOPIC):
    return ResourcePattern(type_, name, PatternType.PREFIXED)


def test_no_acl_on_a_resource_is_decided_by_allow_everyone_if_no_acl_found():
    assert not authorizer().authorize(ALICE, "10.0.0.1", Operation.WRITE, TOPIC, "orders")
    assert authorizer(allow_everyone_if_no_acl_found=True).authorize(ALICE, "h", Operation.WRITE, TOPIC, "orders")
    # an ACL for someone else on the resource: the resource has ACLs, so alice is denied
    auth = authorizer((literal("orders"), entry(BOB)), allow_everyone_if_no_acl_found=True)
    assert not auth.authorize(ALICE, "h", Operation.READ, TOPIC, "orders")


def test_super_users_are_allowed_everything_even_when_denied():
    auth = authorizer((literal("orders"), entry(ALICE, Operation.ALL, DENY)), super_users=[ALICE])
    assert auth.authorize(ALICE, "h", Operation.DELETE, TOPIC, "orders")


def test_prefixed_and_wildcard_patterns_apply_and_deny_wins():
    auth = authorizer((prefixed("payments-"), entry(ALICE, Operation.WRITE)),
                      (literal("*"), entry("User:*", Operation.READ)),
                      (literal("payments-secret"), entry(ALICE, Operation.ALL, DENY)))
    assert auth.authorize(ALICE, "h", Operation.WRITE, TOPIC, "payments-eu")
    assert not auth.authorize(ALICE, "h", Operation.WRITE, TOPIC, "paymentsX")
    assert auth.authorize(BOB, "h", Operation.READ, TOPIC, "anything")
    assert not auth.authorize(BOB, "h", Operation.WRITE, TOPIC, "anything")
    assert not auth.authorize(ALICE, "h", Operation.WRITE, TOPIC, "payments-secret")
    assert not auth.authorize(ALICE, "h", Operation.READ, TOPIC, "payments-secret")
    assert not auth.authorize(ALICE, "h", Operation.READ, GROUP, "payments-eu")  # another resource type


def test_implied_operations_and_hosts():
    auth = authorizer((literal("t"), entry(ALICE, Operation.WRITE, host="10.0.0.1")),
                      (literal("t"), entry(BOB, Operation.ALTER_CONFIGS)))
    assert auth.authorize(ALICE, "10.0.0.1", Operation.DESCRIBE, TOPIC, "t")  # WRITE implies DESCRIBE
    assert not auth.authorize(ALICE, "10.0.0.2", Operation.WRITE, TOPIC, "t")
    assert not auth.authorize(ALICE, "10.0.0.1", Operation.READ, TOPIC, "t")
    assert auth.authorize(BOB, "h", Operation.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not auth.authorize(BOB, "h", Operation.DESCRIBE, TOPIC, "t")
    denied = authorizer((literal("t"), entry(ALICE, Operation.ALL)), (literal("t"), entry(ALICE, Operation.READ, DENY)))
    assert not denied.authorize(ALICE, "h", Operation.READ, TOPIC, "t")
    assert denied.authorize(ALICE, "h", Operation.WRITE, TOPIC, "t")
    # a DENY of READ does not deny DESCRIBE that READ would have implied (Kafka's rule)
    assert denied.authorize(ALICE, "h", Operation.DESCRIBE, TOPIC, "t")


def test_write_on_some_topic_stands_in_for_idempotent_write():
    auth = authorizer((prefixed("app-"), entry(ALICE, Operation.WRITE)))
    assert auth.authorize_by_resource_type(ALICE, "h", TOPIC, Operation.WRITE)
    assert not auth.authorize_by_resource_type(BOB, "h", TOPIC, Operation.WRITE)


def by_type(*bindings, principal=ALICE, **kwargs) -> bool:
    return authorizer(*bindings, **kwargs).authorize_by_resource_type(principal, "h", TOPIC, Operation.WRITE)


def test_authorize_by_resource_type_is_kafkas():
    write, deny = entry(ALICE, Operation.WRITE), entry(ALICE, Operation.WRITE, DENY)
    # ZooKeeper-mode Kafka (AclAuthorizer): allow.everyone.if.no.acl.found allows, whatever ACLs others
    # have (Weir asked about a topic named "hardcode", as the interface's default does, and so refused
    # when others' ACLs applied to that name), unless a DENY on the wildcard resource
    assert by_type((literal("other"), entry(BOB)), allow_everyone_if_no_acl_found=True)
    assert by_type((literal("*"), entry(BOB)), allow_everyone_if_no_acl_found=True)
    assert by_type((prefixed("h"), entry(BOB, Operation.WRITE)), allow_everyone_if_no_acl_found=True)
    assert not by_type((literal("*"), deny), allow_everyone_if_no_acl_found=True)
    assert by_type((literal("*"), deny), super_users=[ALICE])
    # a wildcard ALLOW is enough, unless a wildcard DENY
    assert by_type((literal("*"), write), (prefixed("weir-"), deny))
    assert not by_type((literal("*"), write), (literal("*"), deny))
    # an ALLOW counts unless a DENY covers it: the same literal, or a prefix of its name
    assert not by_type((literal("t"), write), (literal("t"), deny))
    assert not by_type((prefixed("app-x"), write), (prefixed("app-"), deny))
    assert by_type((prefixed("app-"), write), (prefixed("app-x"), deny))
    assert by_type((literal("app"), write), (literal("app-"), deny))
    # only the operation itself or ALL, for the principal or User:*, from its host or *
    assert not by_type((literal("t"), entry(ALICE, Operation.READ)))
    assert by_type((literal("t"), entry("User:*", Operation.ALL)))
    assert not by_type((literal("t"), entry(ALICE, Operation.WRITE, host="10.0.0.9")))


def test_filters_select_as_describe_and_delete_acls_do():
    bindings = [(literal("orders"), entry(ALICE)), (prefixed("ord"), entry(BOB, Operation.WRITE)),
                (literal("*"), entry("User:*", Operation.DESCRIBE)), (literal("other"), entry(ALICE))]
    auth = authorizer(*bindings)
    assert len(auth.bindings()) == 4
    match = auth.bindings(AclFilter(TOPIC, "orders", PatternType.MATCH))
    assert {b.pattern for b in match} == {literal("orders"), prefixed("ord"), literal("*")}
    assert [b.pattern for b in auth.bindings(AclFilter(ResourceType.ANY, "orders", PatternType.ANY))] == \
        [literal("orders")]
    assert {b.pattern for b in auth.bindings(AclFilter(principal=ALICE))} == {literal("orders"), literal("other")}
    assert [b.entry.principal for b in auth.bindings(AclFilter(operation=Operation.WRITE))] == [BOB]
    assert auth.bindings(AclFilter(pattern_type=PatternType.PREFIXED, name="or")) == []


@pytest.mark.parametrize("binding, message", [
    (AclBinding(ResourcePattern(ResourceType.ANY, "t"), entry()), "not a resource"),
    (AclBinding(ResourcePattern(TOPIC, "t", PatternType.MATCH), entry()), "only LITERAL and PREFIXED"),
    (AclBinding(ResourcePattern(ResourceType.CLUSTER, "c"), entry()), "named 'kafka-cluster'"),
    (AclBinding(literal("t"), entry(operation=Operation.ANY)), "cannot be granted"),
    (AclBinding(literal("t"), entry(permission=Permission.ANY)), "ALLOW or DENY"),
    (AclBinding(literal("t"), entry(principal="alice")), "not Type:name"),
    (AclBinding(literal("team/x", GROUP), entry()), "'/'"),
    (AclBinding(prefixed(".", ResourceType.TRANSACTIONAL_ID), entry()), "'.' or '..'"),
    (AclBinding(literal("..", GROUP), entry()), "'.' or '..'"),
])
def test_bindings_that_cannot_be_created(binding, message):
    with pytest.raises(InvalidAcl, match=message):
        check_creatable(binding)


def test_zookeeper_layout_is_kafkas():
    assert znode_path(literal("orders")) == "/kafka-acl/Topic/orders"
    assert znode_path(prefixed("app-", ResourceType.TRANSACTIONAL_ID)) == \
        "/kafka-acl-extended/prefixed/TransactionalId/app-"
    assert pattern_of_path("/kafka-acl-extended/prefixed/Group/g-") == prefixed("g-", GROUP)
    entries = {entry(ALICE, Operation.IDEMPOTENT_WRITE), entry(BOB, Operation.ALL, DENY, "10.0.0.1")}
    raw = encode_entries(entries)
    assert b'"operation": "IdempotentWrite"' in raw and b'"permissionType": "Deny"' in raw
    assert decode_entries(raw) == entries


def test_change_notices_are_kafkas():
    from weir.security.acls import change_notice, pattern_of_notice
    assert change_notice(literal("orders")) == ("/kafka-acl-changes/acl_changes_", b"TOPIC:orders")
    root, data = change_notice(prefixed("app-", GROUP))
    assert root == "/kafka-acl-extended-changes/acl_changes_"
    assert b'"patternType": "PREFIXED"' in data and b'"resourceType": "GROUP"' in data
    # read whatever spelling Kafka or older Weirs wrote
    for written in (b"TOPIC:orders", b"Topic:orders", b"topic:orders"):
        assert pattern_of_notice("/kafka-acl-changes", written) == literal("orders")
    for type_name in ("TRANSACTIONAL_ID", "TransactionalId"):
        data = b'{"version":1,"resourceType":"%s","name":"t-","patternType":"PREFIXED"}' % type_name.encode()
        assert pattern_of_notice("/kafka-acl-extended-changes", data) == prefixed("t-", ResourceType.TRANSACTIONAL_ID)
    for pattern in (literal("a:b"), prefixed("app-", GROUP)):
        path, data = change_notice(pattern)
        assert pattern_of_notice(path.rsplit("/", 1)[0], data) == pattern

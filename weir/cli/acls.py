"""`weir acls`: ACLs, in the manner of Kafka's kafka-acls.sh.

    weir acls --bootstrap-server 127.0.0.1:9092 --command-config admin.properties \\
        --add --allow-principal User:alice --operation Write --operation Describe \\
        --topic pre --resource-pattern-type prefixed
    weir acls ... --add --allow-principal User:bob --consumer --topic orders --group billing
    weir acls ... --remove --allow-principal User:alice --operation Write --topic pre --resource-pattern-type prefixed
    weir acls ... --list [--topic orders] [--principal User:alice]

With CreateAcls, DeleteAcls and DescribeAcls. --producer grants WRITE, DESCRIBE and CREATE on the
topics (WRITE and DESCRIBE on --transactional-id, IDEMPOTENT_WRITE on the cluster with
--idempotent); --consumer READ and DESCRIBE on the topics and READ on the groups; either replaces
--operation, whose default is All. --remove needs a resource and asks first: without a terminal to
ask on it needs --force.
"""

from __future__ import annotations

import sys
from collections import defaultdict

from weir.cli.common import UsageError, common_options, run_command
from weir.client import ClusterClient, KafkaError
from weir.protocol.errors import ErrorCode
from weir.protocol.versions import ApiKey
from weir.security.acls import (CLUSTER_NAME, ZK_OPERATION_NAMES, AclBinding, AclEntry, AclFilter, Operation,
                                PatternType, Permission, ResourcePattern, ResourceType, binding_fields, binding_of,
                                filter_fields)

Op = Operation
PRODUCER = {ResourceType.TOPIC: (Op.WRITE, Op.DESCRIBE, Op.CREATE), ResourceType.TRANSACTIONAL_ID: (Op.WRITE, Op.DESCRIBE),
            ResourceType.CLUSTER: (Op.IDEMPOTENT_WRITE,)}
CONSUMER = {ResourceType.TOPIC: (Op.READ, Op.DESCRIBE), ResourceType.GROUP: (Op.READ,)}


def parse_operation(text: str) -> Operation:
    by_name = {name.lower(): op for name, op in ZK_OPERATION_NAMES.items()}
    op = by_name.get(text.replace("_", "").replace("-", "").lower())
    if op is None:
        raise UsageError(f"--operation {text}: one of {', '.join(ZK_OPERATION_NAMES)}")
    return op


def resources(args) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic] + [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster or (args.producer and args.idempotent):
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def operations_for(args, resource_type: ResourceType) -> list[Operation]:
    """--producer and --consumer's operation sets for the resource type (none: it is left alone),
    else --operation, by default All (kafka-acls)."""
    if not (args.producer or args.consumer):
        return list(dict.fromkeys(parse_operation(o) for o in args.operation)) or [Op.ALL]
    return list(dict.fromkeys(PRODUCER.get(resource_type, ()) * args.producer
                              + CONSUMER.get(resource_type, ()) * args.consumer))


def principals(args) -> list[tuple[Permission, str, str]]:
    """(ALLOW or DENY, principal, host) for each principal given and its hosts (default *)."""
    return ([(Permission.ALLOW, p, h) for p in args.allow_principal for h in args.allow_host or ["*"]]
            + [(Permission.DENY, p, h) for p in args.deny_principal for h in args.deny_host or ["*"]])


def named_resources(args, action: str) -> list[tuple[ResourceType, str]]:
    named = resources(args)
    if not named:
        raise UsageError(f"{action} needs at least one resource: --topic, --group, --transactional-id or --cluster")
    return named


def bindings_to_add(args) -> list[AclBinding]:
    pattern_type = PatternType[args.resource_pattern_type.upper()]
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError("--add takes --resource-pattern-type literal or prefixed")
    if not args.allow_principal and not args.deny_principal:
        raise UsageError("--add needs --allow-principal or --deny-principal")
    return [AclBinding(ResourcePattern(resource_type, name, pattern_type), AclEntry(p, h, op, permission))
            for resource_type, name in named_resources(args, "--add")
            for permission, p, h in principals(args) for op in operations_for(args, resource_type)]


def filters(args) -> list[AclFilter]:
    """--remove, as kafka-acls: per resource named (one at least), the principals' entries with the
    operations (operations_for), or without a principal every ACL of the resource."""
    pattern_type = PatternType[args.resource_pattern_type.upper()]
    out = []
    for resource_type, name in named_resources(args, "--remove"):
        operations = operations_for(args, resource_type)
        if operations and not principals(args):
            out.append(AclFilter(resource_type, name, pattern_type))
        out += [AclFilter(resource_type, name, pattern_type, p, h, op, permission)
                for permission, p, h in principals(args) for op in operations]
    return out


def list_filters(args) -> list[AclFilter]:
    """--list: per resource named (every one when none is), of --principal or anyone."""
    pattern_type = PatternType[args.resource_pattern_type.upper()]
    return [AclFilter(resource_type, name, pattern_type if name else PatternType.ANY, args.principal)
            for resource_type, name in resources(args) or [(ResourceType.ANY, None)]]


def confirmed(args, wanted: list[AclFilter]) -> bool:
    """Kafka's confirmAction: --force, else ask; without a terminal to ask on, refuse."""
    if args.force:
        return True
    if not sys.stdin.isatty():
        raise UsageError("--remove asks before it deletes: --force is required without a terminal")
    answer = input(f"Are you sure you want to remove ACLs matching {len(wanted)} filter(s) "
                   f"{', '.join(_filter_text(f) for f in wanted)}? (y/n) ")
    return answer.strip().lower() in ("y", "yes")


def pattern_text(resource_type, name: str, pattern_type) -> str:
    return (f"ResourcePattern(resourceType={ResourceType(resource_type).name}, name={name}, "
            f"patternType={PatternType(pattern_type).name})")


def entry_text(principal: str, host: str, operation, permission) -> str:
    return (f"(principal={principal}, host={host}, operation={Operation(operation).name}, "
            f"permissionType={Permission(permission).name})")


def _print_grouped(title: str, bindings: list[AclBinding]) -> None:
    by_pattern = defaultdict(list)
    for b in bindings:
        by_pattern[b.pattern].append(b.entry)
    for pattern, entries in by_pattern.items():
        print(f"{title} `{pattern_text(pattern.resource_type, pattern.name, pattern.pattern_type)}`:")
        for e in entries:
            print(f" \t{entry_text(e.principal, e.host, e.operation, e.permission)}")
        print()


async def describe(conn, acl_filter: AclFilter) -> list[AclBinding]:
    response = await conn.call(ApiKey.DESCRIBE_ACLS, filter_fields(acl_filter))
    if response.error_code:
        raise KafkaError(ErrorCode(response.error_code), response.error_message)
    return [binding_of(r, a) for r in response.resources for a in r.acls]


async def acls_command(client: ClusterClient, args) -> int:
    conn = await client.any_connection()
    if args.add:
        bindings = bindings_to_add(args)
        _print_grouped("Adding ACLs for resource", bindings)
        response = await conn.call(ApiKey.CREATE_ACLS, {"creations": [
            binding_fields(b, "resource_pattern_type") for b in bindings]})
        for result in response.results:
            if result.error_code:
                raise KafkaError(ErrorCode(result.error_code), result.error_message)
        shown = {b.pattern for b in bindings}
    elif args.remove:
        wanted = filters(args)
        if not confirmed(args, wanted):
            return 0
        response = await conn.call(ApiKey.DELETE_ACLS, {"filters": [filter_fields(f) for f in wanted]})
        removed = []
        for result in response.filter_results:
            if result.error_code:
                raise KafkaError(ErrorCode(result.error_code), result.error_message)
            removed += [binding_of(m, m) for m in result.matching_acls]
        _print_grouped("Removing ACLs for resource", removed)
        shown = {b.pattern for b in removed}
    else:
        found = []
        for acl_filter in list_filters(args):
            found += [b for b in await describe(conn, acl_filter) if b not in found]
        _print_grouped("Current ACLs for resource", sorted(found))
        return 0
    for pattern in sorted(shown):  # as kafka-acls: what the resources have now
        current = await describe(conn, AclFilter(pattern.resource_type, pattern.name, pattern.pattern_type))
        _print_grouped("Current ACLs for resource", current)
    return 0


def _filter_text(f: AclFilter) -> str:
    return (f"[{f.resource_type.name} {f.name or '*'} ({f.pattern_type.name}), principal={f.principal or '*'}, "
            f"operation={f.operation.name}]")


def register(sub) -> None:
    command = sub.add_parser("acls", help="add, remove and list ACLs (kafka-acls)")
    common_options(command, suppress=False)
    action = command.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true")
    action.add_argument("--remove", action="store_true")
    action.add_argument("--list", action="store_true")
    for flag, help_text in (("--allow-principal", "principal allowed, Type:name (User:alice); repeatable"),
                            ("--deny-principal", "principal denied; repeatable"),
                            ("--allow-host", "host the allowed principals may come from (default *); repeatable"),
                            ("--deny-host", "host the denied principals are denied from (default *); repeatable"),
                            ("--operation", "Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                                            "DescribeConfigs, AlterConfigs, IdempotentWrite or All; repeatable"),
                            ("--topic", "a topic (or prefix); repeatable"), ("--group", "a consumer group; repeatable"),
                            ("--transactional-id", "a transactional id; repeatable")):
        command.add_argument(flag, action="append", default=[], help=help_text)
    command.add_argument("--cluster", action="store_true", help="the cluster resource")
    command.add_argument("--resource-pattern-type", default="literal",
                         choices=["literal", "prefixed", "any", "match"], help="default literal")
    command.add_argument("--principal", default=None, help="--list: only this principal's ACLs")
    command.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    command.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs (with --group)")
    command.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    command.add_argument("--force", action="store_true", help="--remove without asking")
    command.set_defaults(func=lambda args: run_command(acls_command, args))

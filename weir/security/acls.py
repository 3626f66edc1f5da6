"""ACLs and the authorization decision, Kafka's (AclAuthorizer / StandardAuthorizer): pure.

Rules owned here:

- A binding is a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal,
  host, operation, ALLOW or DENY). `User:*` is every principal, host `*` every host, and a
  LITERAL pattern named `*` every resource of its type.
- A request by (principal, host) for (operation, resource) is decided as Kafka decides it:
  1. a super user (`super.users`) is allowed everything;
  2. the ACLs that apply are those of every pattern matching the resource (its literal name, the
     literal `*`, every PREFIXED pattern the name starts with), whoever they are for;
  3. none at all: `allow.everyone.if.no.acl.found` decides;
  4. a DENY entry for the principal (or `User:*`) and host (or `*`) with the operation or ALL
     denies, whatever allows it;
  5. else an ALLOW entry for them with the operation, ALL or an operation implying it allows:
     READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
  6. else denied.
- Filters (DescribeAcls, DeleteAcls) match bindings as Kafka's AclBindingFilter: ANY matches every
  value, a missing name/principal/host every one; pattern type MATCH selects the patterns that
  would apply to the named resource (step 2); ANY the patterns with exactly that name.
- A binding to create must be concrete: no ANY/MATCH/UNKNOWN values, a principal `Type:name`,
  a cluster resource named `kafka-cluster` (Kafka's INVALID_REQUEST otherwise).
- Stored in ZooKeeper as Kafka stores them: one znode per resource pattern,
  `/kafka-acl/<Type>/<name>` for literal and `/kafka-acl-extended/prefixed/<Type>/<name>` for
  prefixed patterns, holding `{"version":1,"acls":[{"principal","permissionType","operation","host"}]}`;
  a change to a pattern is announced by a sequential znode `/kafka-acl-changes/acl_changes_<n>`
  holding `TOPIC:name` (literal) or `/kafka-acl-extended-changes/acl_changes_<n>` holding
  `{"version":1,"resourceType":"TOPIC","name":"pre-","patternType":"PREFIXED"}` (read in any case).
  A name that is no znode name (a `/`, `.`, `..`) cannot be stored (INVALID_REQUEST).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Iterable


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
IMPLIED_BY = {  # an ALLOW on any of these allows the key
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE,
                                   Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


class InvalidAcl(ValueError):
    """A binding that cannot be created (Kafka answers INVALID_REQUEST)."""


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, order=True)
class AclEntry:
    principal: str
    host: str
    operation: Operation
    permission: Permission


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AclEntry


@dataclass(frozen=True)
class AclFilter:
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, binding: AclBinding) -> bool:
        pattern, entry = binding.pattern, binding.entry
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not pattern_applies(pattern, self.name):
                return False
        else:
            if self.pattern_type not in (PatternType.ANY, pattern.pattern_type):
                return False
            if self.name is not None and self.name != pattern.name:
                return False
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (Operation.ANY, entry.operation)
                and self.permission in (Permission.ANY, entry.permission))


# -- bindings and filters as the protocol carries them (CreateAcls, DescribeAcls, DeleteAcls) -------

def pattern_fields(p: ResourcePattern, pattern_type_field: str = "pattern_type") -> dict:
    """CreateAcls names the pattern type `resource_pattern_type`, the others `pattern_type`."""
    return {"resource_type": p.resource_type, "resource_name": p.name, pattern_type_field: p.pattern_type}


def entry_fields(e: AclEntry) -> dict:
    return {"principal": e.principal, "host": e.host, "operation": e.operation, "permission_type": e.permission}


def binding_fields(b: AclBinding, pattern_type_field: str = "pattern_type") -> dict:
    return {**pattern_fields(b.pattern, pattern_type_field), **entry_fields(b.entry)}


def binding_of(resource, acl, pattern_type_field: str = "pattern_type") -> AclBinding:
    """From a message's resource and ACL fields (the same struct but in DescribeAcls' answer);
    ValueError on an unknown code. No pattern type (v0, before KIP-290): LITERAL, as Kafka."""
    return AclBinding(ResourcePattern(ResourceType(resource.resource_type), resource.resource_name,
                                      PatternType(getattr(resource, pattern_type_field, PatternType.LITERAL))),
                      AclEntry(acl.principal, acl.host, Operation(acl.operation), Permission(acl.permission_type)))


def filter_fields(f: AclFilter) -> dict:
    return {"resource_type_filter": f.resource_type, "resource_name_filter": f.name,
            "pattern_type_filter": f.pattern_type, "principal_filter": f.principal, "host_filter": f.host,
            "operation": f.operation, "permission_type": f.permission}


def filter_of(f) -> AclFilter:
    """A DescribeAcls request or a DeleteAcls filter; ValueError on an unknown or UNKNOWN value.
    No pattern type (v0): LITERAL, as Kafka."""
    acl_filter = AclFilter(ResourceType(f.resource_type_filter), f.resource_name_filter,
                           PatternType(getattr(f, "pattern_type_filter", PatternType.LITERAL)), f.principal_filter,
                           f.host_filter,
                           Operation(f.operation), Permission(f.permission_type))
    values = (acl_filter.resource_type, acl_filter.pattern_type, acl_filter.operation, acl_filter.permission)
    if any(v.name == "UNKNOWN" for v in values):
        raise ValueError("a filter value is UNKNOWN")
    return acl_filter


def pattern_applies(pattern: ResourcePattern, name: str) -> bool:
    if pattern.pattern_type == PatternType.LITERAL:
        return pattern.name in (name, WILDCARD)
    return pattern.pattern_type == PatternType.PREFIXED and name.startswith(pattern.name)


def check_creatable(binding: AclBinding) -> None:
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise InvalidAcl(f"resource type {pattern.resource_type.name} is not a resource")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"pattern type {pattern.pattern_type.name}: only LITERAL and PREFIXED can be stored")
    if not pattern.name:
        raise InvalidAcl("the resource name is empty")
    if "/" in pattern.name or pattern.name in (".", ".."):
        raise InvalidAcl(f"the resource name {pattern.name!r} cannot be stored: a znode name has no '/' "
                         "and is not '.' or '..'")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidAcl(f"the cluster resource is named {CLUSTER_NAME!r}, not {pattern.name!r}")
    if entry.operation in (Operation.ANY, Operation.UNKNOWN):
        raise InvalidAcl(f"operation {entry.operation.name} cannot be granted or denied")
    if entry.permission not in (Permission.ALLOW, Permission.DENY):
        raise InvalidAcl(f"permission type {entry.permission.name}: ALLOW or DENY")
    kind, sep, who = entry.principal.partition(":")
    if not sep or not kind or not who:
        raise InvalidAcl(f"principal {entry.principal!r} is not Type:name (User:alice)")
    if not entry.host:
        raise InvalidAcl("the host is empty (* for every host)")


class Authorizer:
    """The bindings in force and the decision. Feed it what ZooKeeper holds (`replace_pattern`)."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._by_pattern: dict[ResourcePattern, frozenset[AclEntry]] = {}

    def replace_pattern(self, pattern: ResourcePattern, entries: Iterable[AclEntry]) -> None:
        entries = frozenset(entries)
        if entries:
            self._by_pattern[pattern] = entries
        else:
            self._by_pattern.pop(pattern, None)

    def replace_all(self, by_pattern: dict[ResourcePattern, Iterable[AclEntry]]) -> None:
        self._by_pattern = {p: frozenset(es) for p, es in by_pattern.items() if es}

    def bindings(self, acl_filter: AclFilter = AclFilter()) -> list[AclBinding]:
        return sorted(b for pattern, entries in self._by_pattern.items() for entry in entries
                      if acl_filter.matches(b := AclBinding(pattern, entry)))

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        entries = [e for pattern, es in self._by_pattern.items()
                   if pattern.resource_type == resource_type and pattern_applies(pattern, name) for e in es]
        if not entries:
            return self.allow_everyone_if_no_acl_found
        mine = [e for e in entries if e.principal in (principal, WILDCARD_PRINCIPAL) and e.host in (host, WILDCARD)]
        if any(e.permission == Permission.DENY and e.operation in (operation, Operation.ALL) for e in mine):
            return False
        allowing = IMPLIED_BY.get(operation, frozenset({operation})) | {Operation.ALL}
        return any(e.permission == Permission.ALLOW and e.operation in allowing for e in mine)

    def authorize_by_resource_type(self, principal: str, host: str, resource_type: ResourceType,
                                   operation: Operation) -> bool:
        """ZooKeeper-mode Kafka's AclAuthorizer.authorizeByResourceType: could some resource of this
        type allow the operation? (An idempotent producer without IDEMPOTENT_WRITE on the cluster needs
        WRITE on some topic.) A super user, yes; a DENY on the wildcard resource, no; else
        allow.everyone.if.no.acl.found, yes, whatever ACLs others have; else an ALLOW of the operation
        or ALL not overridden by a DENY: wildcard, same literal, or a prefix."""
        if principal in self.super_users:
            return True
        allows: set[ResourcePattern] = set()
        denies: set[ResourcePattern] = set()
        for pattern, entries in self._by_pattern.items():
            if pattern.resource_type != resource_type:
                continue
            for e in entries:
                if (e.principal in (principal, WILDCARD_PRINCIPAL) and e.host in (host, WILDCARD)
                        and e.operation in (operation, Operation.ALL)):
                    (denies if e.permission == Permission.DENY else allows).add(pattern)
        wildcard = ResourcePattern(resource_type, WILDCARD)
        if wildcard in denies:
            return False
        if self.allow_everyone_if_no_acl_found or wildcard in allows:
            return True
        denied_prefixes = [p.name for p in denies if p.pattern_type == PatternType.PREFIXED]
        return any(p not in denies and not any(p.name.startswith(d) for d in denied_prefixes) for p in allows)


# -- ZooKeeper storage, Kafka's layout ------------------------------------------------------------

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
ZK_TYPE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
                 ResourceType.TRANSACTIONAL_ID: "TransactionalId", ResourceType.DELEGATION_TOKEN: "DelegationToken",
                 ResourceType.USER: "User"}
ZK_TYPES = {v: k for k, v in ZK_TYPE_NAMES.items()}


def type_of_notice(name: str) -> ResourceType:
    """A resource type as notices spell it: Kafka's `TOPIC`, `TRANSACTIONAL_ID` (any case), or `Topic`."""
    for resource_type in ZK_TYPE_NAMES:
        if name.replace("_", "").lower() == resource_type.name.replace("_", "").lower():
            return resource_type
    raise ValueError(f"{name!r} is not a resource type")


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


ZK_OPERATIONS = {op: _camel(op.name) for op in Operation if op > Operation.ANY}
ZK_OPERATION_NAMES = {v: k for k, v in ZK_OPERATIONS.items()}


def znode_path(pattern: ResourcePattern) -> str:
    root = LITERAL_ROOT if pattern.pattern_type == PatternType.LITERAL else PREFIXED_ROOT
    return f"{root}/{ZK_TYPE_NAMES[pattern.resource_type]}/{pattern.name}"


def pattern_of_path(path: str) -> ResourcePattern:
    for root, pattern_type in ((PREFIXED_ROOT, PatternType.PREFIXED), (LITERAL_ROOT, PatternType.LITERAL)):
        if path.startswith(root + "/"):
            type_name, _, name = path[len(root) + 1:].partition("/")
            return ResourcePattern(ZK_TYPES[type_name], name, pattern_type)
    raise ValueError(f"{path} is not an ACL znode")


def encode_entries(entries: Iterable[AclEntry]) -> bytes:
    return json.dumps({"version": 1, "acls": [
        {"principal": e.principal, "permissionType": e.permission.name.capitalize(),
         "operation": ZK_OPERATIONS[e.operation], "host": e.host} for e in sorted(entries)]}).encode()


def decode_entries(data: bytes) -> frozenset[AclEntry]:
    if not data:
        return frozenset()
    return frozenset(AclEntry(a["principal"], a["host"], ZK_OPERATION_NAMES[a["operation"]],
                              Permission[a["permissionType"].upper()]) for a in json.loads(data)["acls"])


LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"


def change_notice(pattern: ResourcePattern) -> tuple[str, bytes]:
    """Where and what to write (sequentially) to tell every broker that `pattern`'s ACLs changed."""
    type_name = pattern.resource_type.name  # Kafka's ResourceType.toString / name
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", f"{type_name}:{pattern.name}".encode()
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", json.dumps(
        {"version": 1, "resourceType": type_name, "name": pattern.name,
         "patternType": pattern.pattern_type.name}).encode()


def pattern_of_notice(root: str, data: bytes) -> ResourcePattern:
    if root == LITERAL_CHANGES:
        type_name, _, name = data.decode().partition(":")
        return ResourcePattern(type_of_notice(type_name), name, PatternType.LITERAL)
    notice = json.loads(data)
    return ResourcePattern(type_of_notice(notice["resourceType"]), notice["name"],
                           PatternType[notice["patternType"].upper()])

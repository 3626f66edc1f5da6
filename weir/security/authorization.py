"""Which operation each API needs on which resource, and the one helper handlers ask.

`REQUIRED` is Kafka's KafkaApis checks in one table: per api key, per resource type the request
names, the operation the principal must be allowed. A handler asks `denied(authz, header,
resource_type, names)` for the names it may not touch (and answers those with
`DENIED_ERROR[resource_type]`), or `allowed(...)` for one resource (the cluster by default).
`authz` is None when `authorizer.class.name` is empty: both helpers then allow everything, and the
hot paths (Produce, Fetch) test for None themselves before calling anything.

With an authorizer, decisions are cached per (principal, host, operation, resource) until the
ACLs change (`RequestAuthorizer.acls_changed`).

`authorized_operations` answers the `*_authorized_operations` fields (Metadata, DescribeCluster,
DescribeGroups) a client asks for: Kafka's bit field of the operations the principal may do.
"""

from __future__ import annotations

from collections.abc import Iterable

from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey
from weir.security.acls import CLUSTER_NAME, Authorizer, Operation, ResourceType

TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
Op = Operation
REQUIRED: dict[ApiKey, dict[ResourceType, Operation]] = {
    ApiKey.PRODUCE: {TOPIC: Op.WRITE, TXN: Op.WRITE},
    ApiKey.FETCH: {TOPIC: Op.READ, CLUSTER: Op.CLUSTER_ACTION},  # CLUSTER: a follower's fetch
    ApiKey.LIST_OFFSETS: {TOPIC: Op.DESCRIBE},
    ApiKey.METADATA: {TOPIC: Op.DESCRIBE},  # auto-creation is checked as CREATE_TOPICS
    ApiKey.OFFSET_FOR_LEADER_EPOCH: {TOPIC: Op.DESCRIBE, CLUSTER: Op.CLUSTER_ACTION},
    ApiKey.DELETE_RECORDS: {TOPIC: Op.DELETE},
    ApiKey.DESCRIBE_PRODUCERS: {TOPIC: Op.READ},
    ApiKey.DESCRIBE_LOG_DIRS: {CLUSTER: Op.DESCRIBE},
    ApiKey.ALTER_REPLICA_LOG_DIRS: {CLUSTER: Op.ALTER},
    ApiKey.CREATE_TOPICS: {CLUSTER: Op.CREATE, TOPIC: Op.CREATE},  # either will do
    ApiKey.DELETE_TOPICS: {TOPIC: Op.DELETE},
    ApiKey.CREATE_PARTITIONS: {TOPIC: Op.ALTER},
    ApiKey.DESCRIBE_CONFIGS: {TOPIC: Op.DESCRIBE_CONFIGS, CLUSTER: Op.DESCRIBE_CONFIGS},  # CLUSTER: broker configs
    ApiKey.ALTER_CONFIGS: {TOPIC: Op.ALTER_CONFIGS, CLUSTER: Op.ALTER_CONFIGS},
    ApiKey.INCREMENTAL_ALTER_CONFIGS: {TOPIC: Op.ALTER_CONFIGS, CLUSTER: Op.ALTER_CONFIGS},
    ApiKey.ELECT_LEADERS: {CLUSTER: Op.ALTER},
    ApiKey.ALTER_PARTITION: {CLUSTER: Op.CLUSTER_ACTION},
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: {CLUSTER: Op.ALTER},
    ApiKey.LIST_PARTITION_REASSIGNMENTS: {CLUSTER: Op.DESCRIBE},
    ApiKey.FIND_COORDINATOR: {GROUP: Op.DESCRIBE, TXN: Op.DESCRIBE, CLUSTER: Op.CLUSTER_ACTION},  # CLUSTER: share (v6)
    ApiKey.JOIN_GROUP: {GROUP: Op.READ},
    ApiKey.SYNC_GROUP: {GROUP: Op.READ},
    ApiKey.HEARTBEAT: {GROUP: Op.READ},
    ApiKey.LEAVE_GROUP: {GROUP: Op.READ},
    ApiKey.OFFSET_COMMIT: {GROUP: Op.READ, TOPIC: Op.READ},
    ApiKey.OFFSET_FETCH: {GROUP: Op.DESCRIBE, TOPIC: Op.DESCRIBE},
    ApiKey.LIST_GROUPS: {CLUSTER: Op.DESCRIBE, GROUP: Op.DESCRIBE},  # CLUSTER: all groups, else those described
    ApiKey.DESCRIBE_GROUPS: {GROUP: Op.DESCRIBE},
    ApiKey.DELETE_GROUPS: {GROUP: Op.DELETE},
    ApiKey.OFFSET_DELETE: {GROUP: Op.DELETE, TOPIC: Op.READ},
    ApiKey.CONSUMER_GROUP_HEARTBEAT: {GROUP: Op.READ, TOPIC: Op.DESCRIBE},
    ApiKey.CONSUMER_GROUP_DESCRIBE: {GROUP: Op.DESCRIBE, TOPIC: Op.DESCRIBE},
    ApiKey.INIT_PRODUCER_ID: {TXN: Op.WRITE, CLUSTER: Op.IDEMPOTENT_WRITE, TOPIC: Op.WRITE},  # see init_producer_id
    ApiKey.ADD_PARTITIONS_TO_TXN: {TXN: Op.WRITE, TOPIC: Op.WRITE, CLUSTER: Op.CLUSTER_ACTION},  # CLUSTER: v4+, alone
    ApiKey.ADD_OFFSETS_TO_TXN: {TXN: Op.WRITE, GROUP: Op.READ},
    ApiKey.END_TXN: {TXN: Op.WRITE},
    ApiKey.TXN_OFFSET_COMMIT: {TXN: Op.WRITE, GROUP: Op.READ, TOPIC: Op.READ},
    ApiKey.DESCRIBE_TRANSACTIONS: {TXN: Op.DESCRIBE, TOPIC: Op.DESCRIBE},  # TOPIC: the partitions shown
    ApiKey.LIST_TRANSACTIONS: {TXN: Op.DESCRIBE},
    ApiKey.WRITE_TXN_MARKERS: {CLUSTER: Op.CLUSTER_ACTION},
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: {CLUSTER: Op.DESCRIBE},
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: {CLUSTER: Op.ALTER},
    ApiKey.DESCRIBE_ACLS: {CLUSTER: Op.DESCRIBE},
    ApiKey.CREATE_ACLS: {CLUSTER: Op.ALTER},
    ApiKey.DELETE_ACLS: {CLUSTER: Op.ALTER},
    ApiKey.DESCRIBE_CLIENT_QUOTAS: {CLUSTER: Op.DESCRIBE_CONFIGS},
    ApiKey.ALTER_CLIENT_QUOTAS: {CLUSTER: Op.ALTER_CONFIGS},
}
DENIED_ERROR = {TOPIC: ErrorCode.topic_authorization_failed, GROUP: ErrorCode.group_authorization_failed,
                CLUSTER: ErrorCode.cluster_authorization_failed, TXN: ErrorCode.transactional_id_authorization_failed}
# the APIs every client may call (before it knows anything) and those that check nothing more
UNCHECKED = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.DESCRIBE_CLUSTER})
CACHE_MAX = 100_000
NO_OPERATIONS = -2147483648  # the schemas' default: not asked for
# the operations each resource type has (Kafka's AclEntry.supportedOperations), in authorized_operations
SUPPORTED_OPERATIONS = {
    TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE),
    CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.ALTER,
              Op.DESCRIBE),
    TXN: (Op.DESCRIBE, Op.WRITE),
}


def client_host(header: RequestHeader) -> str:
    """The address ACL hosts are compared with ("127.0.0.1"; the header shows "/127.0.0.1")."""
    return header.client_host.lstrip("/")


class RequestAuthorizer:
    """An `Authorizer` (weir.security.acls) asked about requests, with a cache of its answers."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer
        self._cache: dict[tuple, bool] = {}

    def acls_changed(self) -> None:
        self._cache.clear()

    def allows(self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        key = (principal, host, operation, resource_type, name)
        decision = self._cache.get(key)
        if decision is None:
            if len(self._cache) >= CACHE_MAX:
                self._cache.clear()
            decision = self._cache[key] = self.authorizer.authorize(principal, host, operation, resource_type, name)
        return decision

    def denied(self, header: RequestHeader, resource_type: ResourceType, names: Iterable[str],
               api_key: ApiKey | None = None) -> set[str]:
        operation = REQUIRED[ApiKey(header.api_key if api_key is None else api_key)][resource_type]
        principal, host = header.principal, client_host(header)
        return {n for n in set(names) if not self.allows(principal, host, operation, resource_type, n)}

    def allows_any(self, header: RequestHeader, resource_type: ResourceType) -> bool:
        """Whether some resource of the type allows the API's operation (Kafka's authorizeByResourceType)."""
        operation = REQUIRED[ApiKey(header.api_key)][resource_type]
        return self.authorizer.authorize_by_resource_type(header.principal, client_host(header), resource_type, operation)


def denied(authz: RequestAuthorizer | None, header: RequestHeader, resource_type: ResourceType,
           names: Iterable[str], api_key: ApiKey | None = None) -> set[str]:
    """The names the request may not touch (none without an authorizer)."""
    return set() if authz is None else authz.denied(header, resource_type, names, api_key)


def allowed(authz: RequestAuthorizer | None, header: RequestHeader, resource_type: ResourceType = CLUSTER,
            name: str = CLUSTER_NAME, api_key: ApiKey | None = None) -> bool:
    return authz is None or not authz.denied(header, resource_type, (name,), api_key)


def cluster_error(authz: RequestAuthorizer | None, header: RequestHeader) -> ErrorCode:
    """CLUSTER_AUTHORIZATION_FAILED unless the request may do its API's operation on the cluster; else NONE."""
    return ErrorCode.none if allowed(authz, header) else ErrorCode.cluster_authorization_failed


def refusal(error: ErrorCode, **empty) -> dict:
    """The answer to a request refused whole: its error and the answer's other fields, empty."""
    return {"throttle_time": 0, "error_code": error, **empty}


def denied_creation(authz: RequestAuthorizer | None, header: RequestHeader, names: Iterable[str]) -> set[str]:
    """The topics the request may not create (CreateTopics, or Metadata's auto-creation): CREATE on
    the cluster allows every topic, else each needs CREATE on itself."""
    if allowed(authz, header, CLUSTER, api_key=ApiKey.CREATE_TOPICS):
        return set()
    return authz.denied(header, TOPIC, names, ApiKey.CREATE_TOPICS)


def authorized_operations(authz: RequestAuthorizer | None, header: RequestHeader, resource_type: ResourceType,
                          name: str = CLUSTER_NAME) -> int:
    """Bit `1 << operation` set for each operation of the resource's type the principal may do on it
    (every one without an authorizer). The cluster's are all withheld (0) unless the principal may
    DESCRIBE it, as Kafka's Metadata and DescribeCluster do."""
    operations = SUPPORTED_OPERATIONS[resource_type]
    if authz is not None:
        principal, host = header.principal, client_host(header)
        operations = [op for op in operations if authz.allows(principal, host, op, resource_type, name)]
    bits = sum(1 << op for op in operations)
    return 0 if resource_type == CLUSTER and not bits & 1 << Op.DESCRIBE else bits

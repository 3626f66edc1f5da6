"""The API versions Weir implements, and nothing more (clients pick from this).

From each API's first version Kafka 3.9 serves (the versions kio lacks, which Kafka 4 removed in
KIP-896, are in weir.protocol.legacy_schemas; Produce v0-2 and Fetch v0-3 carry message formats 0
and 1, converted by weir.protocol.legacy_records), except AlterPartition v0-1, which only brokers
send.
"""

from enum import IntEnum


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    DESCRIBE_CONFIGS = 32
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    CREATE_PARTITIONS = 37
    DESCRIBE_CLUSTER = 60
    OFFSET_FOR_LEADER_EPOCH = 23
    DELETE_RECORDS = 21
    DESCRIBE_LOG_DIRS = 35
    ALTER_REPLICA_LOG_DIRS = 34
    ALTER_CONFIGS = 33
    ELECT_LEADERS = 43
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION = 56
    DESCRIBE_PRODUCERS = 61
    # consumer groups, classic protocol (weir.groups)
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    # consumer groups, consumer protocol (KIP-848; weir.groups.consumer_group)
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    INIT_PRODUCER_ID = 22
    # transactions (weir.broker.txn_apis; TxnOffsetCommit in weir.groups)
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    # transactions, the partition leader's side (KIP-98)
    WRITE_TXN_MARKERS = 27
    # authentication (weir.security)
    SASL_HANDSHAKE = 17
    SASL_AUTHENTICATE = 36
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    # ACLs (weir.broker.acl_apis)
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    # client quotas (weir.broker.quota_apis)
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49


SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 13),
    ApiKey.FETCH: (0, 17),
    ApiKey.LIST_OFFSETS: (0, 10),
    ApiKey.METADATA: (0, 13),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION: (2, 3),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    # consumer groups (weir.groups): OffsetCommit/OffsetFetch v9, ListGroups v5, DescribeGroups v6
    # and the two APIs after them are KIP-848's; v0-v1 of OffsetCommit and v0 of OffsetFetch are
    # Kafka 3.9's floor
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    # transactions, classic protocol (KIP-98; KIP-890 part 1's verify_only in AddPartitionsToTxn v4)
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),  # v0: weir.protocol.legacy_schemas (kio follows Kafka 4, which removed it)
    # authentication (weir.security)
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # ACLs (v0: literal patterns only, before KIP-290)
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
}


def is_supported(api_key: int, version: int) -> bool:
    span = SUPPORTED_VERSIONS.get(api_key)  # type: ignore[call-overload]
    return span is not None and span[0] <= version <= span[1]

"""Every broker setting Weir honours, with Kafka's name, type, default and meaning (SETTINGS),
and the config sources DescribeConfigs numbers. A leaf: it imports no other config module."""

from dataclasses import dataclass

from weir.log.segment_files import DEFAULT_LIMIT as CLOSED_SEGMENT_FILES
from weir.security.listeners import DEFAULT_PROTOCOL_MAP, PROTOCOLS

MAX_LONG = 2**63 - 1
# Config sources, DescribeConfigs' numbering
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5
DEFAULT_ENTITY = "<default>"  # ZooKeeper's name of the cluster-wide dynamic configs (/config/brokers/<default>)


@dataclass(frozen=True)
class Setting:
    name: str
    type: type
    default: object
    doc: str
    choices: tuple = ()  # the legal values of a str setting, if it has a fixed set
    sensitive: bool = False  # a secret (Kafka's PASSWORD type): DescribeConfigs gives no value


SETTINGS = {s.name: s for s in [
    Setting("broker.id", int, 0, "Unique id of this broker in the cluster."),
    Setting("listeners", str, "PLAINTEXT://127.0.0.1:9092", "Address the broker binds."),
    Setting("advertised.listeners", str, "", "Address published to clients (default: listeners)."),
    Setting("log.dirs", str, "/tmp/weir-logs", "Directory holding the partition logs (one; default: log.dir)."),
    Setting("log.dir", str, "/tmp/weir-logs", "log.dirs, when that is not set."),
    Setting("num.partitions", int, 1, "Partitions of an auto-created topic."),
    Setting("default.replication.factor", int, 1, "Replication factor of an auto-created topic."),
    Setting("auto.create.topics.enable", bool, True, "Create a topic on first metadata request or produce."),
    Setting("delete.topic.enable", bool, True, "Allow DeleteTopics."),
    Setting("log.segment.bytes", int, 1073741824, "Roll a segment at this size."),
    Setting("log.roll.ms", int, 604800000, "Roll a segment at this age (default: log.roll.hours)."),
    Setting("log.roll.hours", int, 168, "log.roll.ms in hours, when that is not set."),
    Setting("log.retention.ms", int, 604800000,
            "Delete segments older than this (-1: never; default: log.retention.minutes, else log.retention.hours)."),
    Setting("log.retention.minutes", int, None, "log.retention.ms in minutes, when that is not set."),
    Setting("log.retention.hours", int, 168, "log.retention.ms in hours, when neither it nor log.retention.minutes is set."),
    Setting("log.retention.bytes", int, -1, "Delete old segments beyond this size per partition (-1: never)."),
    Setting("log.retention.check.interval.ms", int, 300000, "How often retention runs."),
    Setting("log.cleanup.policy", str, "delete", "delete, compact, or compact,delete: what happens to old records."),
    Setting("log.cleaner.enable", bool, True, "Run the log cleaner, which compacts topics whose policy has compact."),
    Setting("log.cleaner.backoff.ms", int, 15000, "The cleaner's pause when it finds nothing to clean."),
    Setting("log.cleaner.dedupe.buffer.size", int, 134217728,
            "Memory for the cleaner's offset map: at 24 bytes a key (Kafka's), it bounds the keys one "
            "cleaning maps; a log with more keys in its dirty part is cleaned over several passes."),
    Setting("log.cleaner.io.buffer.load.factor", float, 0.9, "How full the cleaner's offset map may get."),
    Setting("leader.replication.throttled.rate", int, MAX_LONG,
            "Bytes/s a leader sends to followers out of the ISR of the partitions in a topic's "
            "leader.replication.throttled.replicas (dynamic; set by reassign-partitions --throttle)."),
    Setting("follower.replication.throttled.rate", int, MAX_LONG,
            "Bytes/s a follower fetches for the partitions in a topic's follower.replication.throttled.replicas "
            "(dynamic; set by reassign-partitions --throttle)."),
    Setting("log.cleaner.min.cleanable.ratio", float, 0.5,
            "Clean a compacted log once this share of its closed segments' bytes is new since its last cleaning."),
    Setting("log.cleaner.delete.retention.ms", int, 86400000,
            "How long a tombstone stays after its segment closed, so that readers see the delete."),
    Setting("log.cleaner.min.compaction.lag.ms", int, 0, "A record stays uncompacted at least this long."),
    Setting("log.cleaner.max.compaction.lag.ms", int, MAX_LONG,
            "A compacted log whose oldest uncleaned record is older than this is cleaned whatever its dirty ratio."),
    Setting("log.roll.jitter.ms", int, 0, "Up to this much, drawn per segment, is taken off log.roll.ms."),
    Setting("log.roll.jitter.hours", int, 0, "log.roll.jitter.ms in hours, when that is not set."),
    Setting("log.segment.delete.delay.ms", int, 60000,
            "How long a segment removed by retention or DeleteRecords stays on disk as *.deleted."),
    Setting("log.preallocate", bool, False, "Create segment files at full size (accepted, no effect in Weir)."),
    Setting("compression.type", str, "producer",
            "Codec batches are stored in: producer (the producer's), uncompressed, gzip, snappy, lz4 or zstd."),
    Setting("compression.gzip.level", int, -1, "gzip level when the broker compresses (-1: gzip's default)."),
    Setting("compression.lz4.level", int, 9, "lz4 level when the broker compresses."),
    Setting("compression.zstd.level", int, 3, "zstd level when the broker compresses."),
    Setting("log.message.format.version", str, "3.0-IV1", "Deprecated, ignored (accepted, no effect in Weir)."),
    Setting("log.message.timestamp.difference.max.ms", int, MAX_LONG,
            "Deprecated: the bound log.message.timestamp.before/after.max.ms take when they are not set."),
    Setting("log.message.downconversion.enable", bool, True,
            "Down-convert batches for old consumers (Fetch v0-v3); false: they get UNSUPPORTED_VERSION."),
    Setting("log.local.retention.ms", int, -2, "Tiered storage (accepted, no effect in Weir)."),
    Setting("log.local.retention.bytes", int, -2, "Tiered storage (accepted, no effect in Weir)."),
    Setting("log.index.interval.bytes", int, 4096, "Bytes between offset-index entries."),
    Setting("log.index.size.max.bytes", int, 10485760, "Largest offset index of a segment."),
    Setting("log.flush.interval.messages", int, MAX_LONG, "fsync after this many records."),
    Setting("log.flush.interval.ms", int, MAX_LONG, "fsync after this long."),
    Setting("log.flush.scheduler.interval.ms", int, MAX_LONG, "How often the flush timer is checked."),
    Setting("log.flush.offset.checkpoint.interval.ms", int, 60000, "How often recovery points are saved."),
    Setting("weir.log.closed.segment.files.max", int, CLOSED_SEGMENT_FILES,
            "Weir's (Kafka keeps every segment file open): most .log files of closed segments held open at once "
            "across the broker's logs, for reads; beyond it the least recently read is closed, and opened again "
            "when read. A log's active segment holds its own, outside this count. At most a quarter of the "
            "soft RLIMIT_NOFILE is used."),
    Setting("message.max.bytes", int, 1048588, "Largest record batch a producer may send."),
    Setting("log.message.timestamp.type", str, "CreateTime",
            "CreateTime: records keep the producer's timestamps; LogAppendTime: the broker's append time.",
            ("CreateTime", "LogAppendTime")),
    Setting("log.message.timestamp.before.max.ms", int, MAX_LONG,
            "CreateTime: refuse records whose timestamp is further than this in the past."),
    Setting("log.message.timestamp.after.max.ms", int, 3600000,
            "CreateTime: refuse records whose timestamp is further than this in the future."),
    Setting("metrics.port", int, -1, "Port of the Prometheus endpoint (GET /metrics); -1: none, 0: any free port."),
    Setting("socket.request.max.bytes", int, 104857600, "Largest request frame; larger ones close the connection."),
    Setting("replica.fetch.wait.max.ms", int, 500, "Longest wait of a follower's fetch."),
    Setting("fetch.max.bytes", int, 57671680, "Largest fetch response."),
    Setting("request.timeout.ms", int, 30000, "Default wait for delayed operations."),
    Setting("cluster.id", str, "weir-cluster", "Cluster id reported in metadata."),
    Setting("broker.rack", str, "", "Rack of this broker, for rack-aware replica assignment."),
    Setting("zookeeper.connect", str, "127.0.0.1:2181", "ZooKeeper ensemble, host:port[,host:port][/chroot]."),
    Setting("zookeeper.session.timeout.ms", int, 18000, "ZooKeeper session timeout."),
    Setting("zookeeper.connection.timeout.ms", int, 18000, "Longest wait for the first ZooKeeper connection."),
    Setting("zookeeper.set.acl", bool, False,
            "Create every znode with ZooKeeper ACLs: writable by the brokers' identity only, readable by all "
            "except /config/users and /config/brokers (needs zookeeper.digest.jaas.config; use a chroot)."),
    Setting("zookeeper.digest.jaas.config", str, "",
            'Weir\'s: the ZooKeeper digest login of the brokers, '
            'org.apache.zookeeper.server.auth.DigestLoginModule required username="..." password="...";',
            sensitive=True),
    Setting("min.insync.replicas", int, 1, "Replicas that must be in sync for acks=all."),
    Setting("unclean.leader.election.enable", bool, False, "Elect an out-of-sync replica rather than go offline."),
    Setting("transaction.partition.verification.enable", bool, True,
            "KIP-890: a partition leader asks the transaction coordinator before a producer's first "
            "transactional batch on it."),
    Setting("producer.id.expiration.ms", int, 86400000,
            "A partition forgets the transaction state of a producer idle this long (none ongoing)."),
    Setting("replica.lag.time.max.ms", int, 30000, "A follower not caught up for this long leaves the ISR."),
    Setting("replica.fetch.min.bytes", int, 1, "Least data a follower's fetch waits for."),
    Setting("replica.fetch.max.bytes", int, 1048576, "Per-partition bytes of a follower's fetch."),
    Setting("replica.fetch.response.max.bytes", int, 10485760, "Bytes of a follower's whole fetch response."),
    Setting("replica.fetch.backoff.ms", int, 1000, "Wait after a follower's fetch failed."),
    Setting("max.incremental.fetch.session.cache.slots", int, 1000,
            "KIP-227: fetch sessions this broker keeps (0: none; fetchers send every partition each time)."),
    Setting("auto.leader.rebalance.enable", bool, True, "Move leadership back to preferred replicas."),
    Setting("leader.imbalance.per.broker.percentage", int, 10, "Imbalance that triggers a rebalance."),
    Setting("leader.imbalance.check.interval.seconds", int, 300, "How often leader balance is checked."),
    Setting("controlled.shutdown.enable", bool, True, "Move leadership away before shutting down."),
    Setting("controlled.shutdown.max.retries", int, 3,
            "Failed controlled-shutdown requests before the broker stops without one "
            "(Kafka makes this many attempts)."),
    Setting("controlled.shutdown.retry.backoff.ms", int, 5000,
            "Wait before asking again for a controlled shutdown whose request failed."),
    # consumer groups (weir.groups)
    Setting("offsets.topic.num.partitions", int, 50, "Partitions of the internal __consumer_offsets topic."),
    Setting("offsets.topic.replication.factor", int, 3,
            "Replication factor of __consumer_offsets (lowered to the live brokers at creation, with a warning)."),
    Setting("offsets.topic.segment.bytes", int, 104857600, "Segment size of __consumer_offsets."),
    Setting("offsets.retention.minutes", int, 10080, "Committed offsets of an empty group expire after this."),
    Setting("offsets.retention.check.interval.ms", int, 600000, "How often expired offsets are removed."),
    Setting("offsets.commit.timeout.ms", int, 5000, "Longest wait for a commit to reach the ISR of __consumer_offsets."),
    Setting("offset.metadata.max.bytes", int, 4096, "Largest metadata string of a committed offset."),
    Setting("group.initial.rebalance.delay.ms", int, 3000, "Wait for more members before an empty group's first rebalance."),
    Setting("group.min.session.timeout.ms", int, 6000, "Smallest session timeout a member may ask for."),
    Setting("group.max.session.timeout.ms", int, 1800000, "Largest session timeout a member may ask for."),
    Setting("group.max.size", int, 2147483647, "Most members of one consumer group."),
    # consumer groups of the consumer protocol (KIP-848; weir.groups.consumer_group)
    Setting("group.coordinator.rebalance.protocols", str, "classic,consumer",
            "The group protocols served: classic, and consumer (KIP-848)."),
    Setting("group.consumer.heartbeat.interval.ms", int, 5000, "How often consumer-protocol members heartbeat."),
    Setting("group.consumer.min.heartbeat.interval.ms", int, 5000, "Smallest group.consumer.heartbeat.interval.ms."),
    Setting("group.consumer.max.heartbeat.interval.ms", int, 15000, "Largest group.consumer.heartbeat.interval.ms."),
    Setting("group.consumer.session.timeout.ms", int, 45000,
            "A consumer-protocol member is fenced after this long without a heartbeat."),
    Setting("group.consumer.min.session.timeout.ms", int, 45000, "Smallest group.consumer.session.timeout.ms."),
    Setting("group.consumer.max.session.timeout.ms", int, 60000, "Largest group.consumer.session.timeout.ms."),
    Setting("group.consumer.assignors", str, "uniform,range",
            "Server-side assignors (uniform, range or Kafka's class names); the first is the default."),
    Setting("group.consumer.max.size", int, 2147483647, "Most members of one consumer-protocol group."),
    # transactions (weir.transactions, weir.broker.txn_coordinator)
    Setting("transaction.state.log.num.partitions", int, 50, "Partitions of the internal __transaction_state topic."),
    Setting("transaction.state.log.replication.factor", int, 3,
            "Replication factor of __transaction_state (lowered to the live brokers at creation, with a warning)."),
    Setting("transaction.state.log.min.isr", int, 2,
            "min.insync.replicas of __transaction_state (at most its replication factor, with a warning)."),
    Setting("transaction.state.log.segment.bytes", int, 104857600, "Segment size of __transaction_state."),
    Setting("transaction.state.log.load.buffer.size", int, 5242880,
            "Bytes read at a time when a coordinator loads a __transaction_state partition."),
    Setting("transaction.max.timeout.ms", int, 900000, "Largest transaction.timeout.ms a producer may ask for."),
    Setting("transactional.id.expiration.ms", int, 604800000,
            "A transactional id idle (no transaction) for this long is forgotten."),
    Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", int, 10000,
            "How often transactions past their timeout are aborted."),
    Setting("transaction.remove.expired.transaction.cleanup.interval.ms", int, 3600000,
            "How often expired transactional ids are removed."),
    # listeners, TLS and SASL (weir/security); any of the ssl.* and sasl.* ones may be given for one
    # listener as listener.name.<listener>.<name>, as Kafka's
    Setting("listener.security.protocol.map", str, DEFAULT_PROTOCOL_MAP,
            "Security protocol of each listener name: NAME:PROTOCOL,... (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)."),
    Setting("inter.broker.listener.name", str, "", "The listener brokers use to reach each other."),
    Setting("security.inter.broker.protocol", str, "PLAINTEXT",
            "The inter-broker listener, by protocol name, when inter.broker.listener.name is not set.", PROTOCOLS),
    Setting("ssl.keystore.type", str, "PEM", "Format of the key store: PEM (PKCS12 if cryptography is installed).",
            ("PEM", "PKCS12")),
    Setting("ssl.keystore.location", str, "", "File with the broker's private key and certificate chain."),
    Setting("ssl.keystore.password", str, "", "Password of a PKCS12 key store.", sensitive=True),
    Setting("ssl.key.password", str, "", "Password of an encrypted private key.", sensitive=True),
    Setting("ssl.keystore.certificate.chain", str, "", "The certificate chain in PEM, given in the config."),
    Setting("ssl.keystore.key", str, "", "The private key in PEM, given in the config.", sensitive=True),
    Setting("ssl.truststore.type", str, "PEM", "Format of the trust store.", ("PEM", "PKCS12")),
    Setting("ssl.truststore.location", str, "", "File with the trusted CA certificates."),
    Setting("ssl.truststore.password", str, "", "Password of a PKCS12 trust store.", sensitive=True),
    Setting("ssl.truststore.certificates", str, "", "Trusted CA certificates in PEM, given in the config."),
    Setting("ssl.client.auth", str, "none", "Ask TLS clients for a certificate: none, requested or required.",
            ("none", "requested", "required")),
    Setting("ssl.enabled.protocols", str, "TLSv1.2,TLSv1.3", "TLS versions served (TLSv1.2, TLSv1.3)."),
    Setting("ssl.protocol", str, "TLSv1.3", "Accepted for Kafka's configs; ssl.enabled.protocols decides."),
    Setting("ssl.cipher.suites", str, "", "OpenSSL cipher list for TLS 1.2 (default: Python's)."),
    Setting("ssl.principal.mapping.rules", str, "DEFAULT",
            "How an SSL client's certificate subject becomes its user name: RULE:pattern/replacement/[LU],...,DEFAULT."),
    Setting("ssl.endpoint.identification.algorithm", str, "https",
            "https: a broker checks the host name in a peer's certificate; empty: it does not."),
    Setting("sasl.enabled.mechanisms", str, "GSSAPI",
            "SASL mechanisms served on SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512."),
    Setting("sasl.mechanism.inter.broker.protocol", str, "GSSAPI", "The SASL mechanism brokers use with each other."),
    Setting("connections.max.idle.ms", int, 600000,
            "A connection with no request read or answer written for this long is closed, as is one that has "
            "not finished authenticating within it (negative: idle connections stay)."),
    Setting("quota.window.num", int, 11,
            "Client quotas (KIP-13): the samples a client's rate is measured over."),
    Setting("quota.window.size.seconds", int, 1, "Client quotas: the time span of each sample."),
    Setting("controller.quota.window.num", int, 11,
            "controller_mutation_rate (KIP-599): a client may burst this many windows' worth of mutations."),
    Setting("controller.quota.window.size.seconds", int, 1, "controller_mutation_rate: the time span of a window."),
    Setting("connections.max.reauth.ms", int, 0,
            "KIP-368: a SASL session lasts this long; the client must re-authenticate (0: for ever)."),
    Setting("connection.failed.authentication.delay.ms", int, 100,
            "Wait before closing a connection whose authentication failed."),
    Setting("sasl.server.max.receive.size", int, 524288,
            "Largest request a client may send on a SASL listener before it has authenticated."),
    # ACLs (weir/security/acls.py, authorization.py)
    Setting("authorizer.class.name", str, "",
            "Any class name (kafka.security.authorizer.AclAuthorizer, ...StandardAuthorizer) turns ACLs on; "
            "empty: every request is allowed."),
    Setting("super.users", str, "", "Principals allowed everything, separated by semicolons: User:admin;User:broker."),
    Setting("allow.everyone.if.no.acl.found", bool, False, "With ACLs on, allow a resource no ACL names to everyone."),
]}


class ConfigError(ValueError):
    pass

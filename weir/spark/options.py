"""The data source's options, named like Spark's Kafka source, checked before any query starts.

Spark hands a Python data source its options as strings under lower-cased keys, so every name
here is matched lower-cased. `parse_read_options` and `parse_write_options` turn them into a frozen
settings object (picklable: it travels to the executors inside the reader and the partitions) or
raise `OptionError` with a sentence a user can act on: an unknown option (with the closest known
name), a missing or contradictory one, a value that does not parse.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from dataclasses import dataclass, field

log = logging.getLogger("weir.spark")

EARLIEST, LATEST = -2, -1
DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
DEFAULT_POLL_TIMEOUT_MS = 120_000

# canonical (camelCase) name -> description; matched lower-cased
READ_OPTIONS = {
    "kafka.bootstrap.servers": "host:port[,host:port]",
    "subscribe": "comma-separated topic list",
    "subscribePattern": "regular expression of topic names",
    "assign": 'JSON {"topic":[0,1]}',
    "startingOffsets": 'earliest, latest or JSON {"topic":{"0":23,"1":-2}}',
    "endingOffsets": 'latest or JSON {"topic":{"0":50,"1":-1}} (batch only)',
    "startingTimestamp": "milliseconds since the epoch, for every partition",
    "startingOffsetsByTimestamp": 'JSON {"topic":{"0":1700000000000}}',
    "startingOffsetsByTimestampStrategy": "error (the default) or latest: when no record is at or after a starting "
                                          "timestamp",
    "endingTimestamp": "milliseconds since the epoch, for every partition (batch only): read up to the first "
                       "record at or after it",
    "endingOffsetsByTimestamp": 'JSON {"topic":{"0":1700000000000}} (batch only)',
    "maxOffsetsPerTrigger": "upper bound on the offsets one micro-batch reads",
    "minOffsetsPerTrigger": "a micro-batch waits for this many new offsets, or for maxTriggerDelay",
    "maxTriggerDelay": "the longest a micro-batch waits for minOffsetsPerTrigger (default 15m)",
    "minPartitions": "the least number of Spark partitions a read is split into",
    "maxRecordsPerPartition": "the most offsets one Spark partition reads",
    "failOnDataLoss": "true: fail when offsets are gone; false: skip them and warn",
    "includeHeaders": "add the headers column",
    "kafkaConsumer.pollTimeoutMs": "how long a task retries a partition that cannot be read",
    "fetchMaxBytes": "bytes asked for in one Fetch per partition",
    "kafka.isolation.level": "read_uncommitted (the default) or read_committed: only committed transactions, "
                             "up to the last stable offset",
}
WRITE_OPTIONS = {
    "kafka.bootstrap.servers": "host:port[,host:port]",
    "topic": "the topic to write to (overrides a topic column)",
    "includeHeaders": "accepted for symmetry with the source; a headers column is always written",
    "deliveryGuarantee": "at-least-once (the default) or exactly-once (streaming writes: transactions)",
    "transactionalIdPrefix": "exactly-once: this sink's name, the same on every restart of the query",
    "batchId": "exactly-once batch writes (inside foreachBatch): the micro-batch's id",
}
# Options Spark itself adds, or that Kafka users commonly pass and that mean nothing here.
IGNORED = {"path", "checkpointlocation", "groupidprefix", "kafka.group.id",
           # Spark's retries of its offset queries: Weir's retry until kafkaConsumer.pollTimeoutMs passes
           "fetchoffset.numretries", "fetchoffset.retryintervalms"}
# Kafka's client security settings, passed through as Spark's Kafka connector does (weir.security.client_config)
SECURITY_PREFIXES = ("kafka.security.protocol", "kafka.sasl.", "kafka.ssl.")
# Kafka consumer settings Spark's Kafka source refuses, with its reasons (KafkaSourceProvider.validateGeneralOptions).
# Any other kafka.* option of a read is the Java consumer's tuning (timeouts, buffer and fetch sizes, client.id...),
# which Spark hands to its consumer: Weir's reader is not that consumer, so they are accepted and have no effect.
REFUSED_CONSUMER_OPTIONS = {
    "kafka.auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
                               "'startingOffsets' to 'earliest' or 'latest' to specify where to start. Structured "
                               "Streaming manages which offsets are consumed internally, rather than relying on the "
                               "kafkaConsumer to do it",
    "kafka.key.deserializer": "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
                              "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
                              "the keys",
    "kafka.value.deserializer": "Kafka option 'value.deserializer' is not supported as values are deserialized as "
                                "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
                                "deserialize the values",
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}


class OptionError(ValueError):
    """A bad option: raised on the driver before a query starts."""


def _lower(options) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def _check_known(opts: dict[str, str], known: dict[str, str], what: str, passthrough: bool) -> None:
    names = {k.lower(): k for k in known}
    for key in opts:
        if key in names or key in IGNORED or key.startswith(SECURITY_PREFIXES) or (
                passthrough and key.startswith("kafka.")):
            continue
        close = difflib.get_close_matches(key, list(names), n=1, cutoff=0.6)
        hint = f"; did you mean {names[close[0]]!r}?" if close else ""
        raise OptionError(f"unknown {what} option {key!r}{hint} (known: {', '.join(sorted(known))})")


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise OptionError(f"option {name} must be true or false, not {raw!r}")


def _positive_int(opts: dict[str, str], name: str, default: int | None) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {name} must be a whole number, not {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option {name} must be positive, not {value}")
    return value


_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(opts: dict[str, str], name: str, default: str) -> int:
    """A time as Spark writes one (JavaUtils.timeStringAs): 500, 500ms, 30s, 15m, 1h, 2d (no unit: ms)."""
    raw = opts.get(name.lower(), default)
    m = re.fullmatch(r"(-?[0-9]+)([a-z]+)?", raw.strip().lower())
    if not m or (m.group(2) and m.group(2) not in _TIME_UNITS_MS):
        raise OptionError(f"option {name} must be a time like 500ms, 30s, 15m or 1h, not {raw!r}")
    return int(int(m.group(1)) * _TIME_UNITS_MS[m.group(2) or "ms"])


def _json(name: str, raw: str):
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name} is not valid JSON ({e.msg} at column {e.colno}): {raw!r}") from None


def parse_partition_map(name: str, raw: str) -> dict[tuple[str, int], int]:
    """'{"topic":{"0":23,"1":-2}}' -> {("topic", 0): 23, ("topic", 1): -2}."""
    value = _json(name, raw)
    if not isinstance(value, dict):
        raise OptionError(f'option {name} must be a JSON object like {{"topic":{{"0":23}}}}, not {raw!r}')
    out = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map partition numbers to offsets")
        for p, offset in partitions.items():
            try:
                index = int(p)
            except ValueError:
                raise OptionError(f"option {name}: {p!r} is not a partition number") from None
            if not isinstance(offset, int) or isinstance(offset, bool):
                raise OptionError(f"option {name}: {topic}-{index} must be a whole number, not {offset!r}")
            out[(topic, index)] = offset
    return out


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: everywhere earliest/latest, per partition, or by timestamp."""

    default: int  # EARLIEST or LATEST: for partitions not named in `offsets`
    offsets: dict = field(default_factory=dict)  # (topic, partition) -> offset, EARLIEST or LATEST
    timestamp: int | None = None  # every partition: the first offset with a timestamp >= this
    timestamps: dict = field(default_factory=dict)  # (topic, partition) -> timestamp

    def is_explicit(self, tp) -> bool:
        """Whether this partition's offset is given (an offset or a timestamp), not earliest or latest."""
        return self.timestamp is not None or tp in self.timestamps or self.offsets.get(tp, self.default) >= 0


def _timestamp_spec(opts: dict[str, str], global_name: str, by_partition_name: str,
                    default: int) -> OffsetSpec | None:
    if global_name.lower() in opts:
        raw = opts[global_name.lower()].strip()
        try:
            ts = int(raw)
        except ValueError:
            raise OptionError(f"option {global_name} must be milliseconds since the epoch, not {raw!r}") from None
        if ts < 0:
            raise OptionError(f"option {global_name} must not be negative ({ts})")
        return OffsetSpec(default, timestamp=ts)
    if by_partition_name.lower() in opts:
        return OffsetSpec(default, timestamps=parse_partition_map(by_partition_name, opts[by_partition_name.lower()]))
    return None


def _offset_spec(opts: dict[str, str], name: str, default: int, *, forbid: int | None) -> OffsetSpec:
    raw = opts.get(name.lower())
    if raw is None:
        return OffsetSpec(default)
    word = raw.strip().lower()
    if word in ("earliest", "latest"):
        spec = EARLIEST if word == "earliest" else LATEST
        if spec == forbid:
            raise OptionError(f"option {name}={word} makes no sense here")
        return OffsetSpec(spec)
    offsets = parse_partition_map(name, raw)
    for (topic, p), offset in offsets.items():
        if offset == forbid:
            raise OptionError(f"option {name}: {topic}-{p} is {offset} ({'earliest' if forbid == EARLIEST else 'latest'}),"
                              " which makes no sense here")
        if offset < EARLIEST:
            raise OptionError(f"option {name}: {topic}-{p} has offset {offset}; use -2 (earliest), -1 (latest)"
                              " or an offset >= 0")
    return OffsetSpec(default, offsets)


@dataclass(frozen=True)
class ReadOptions:
    bootstrap: str
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()
    starting: OffsetSpec = OffsetSpec(EARLIEST)
    ending: OffsetSpec = OffsetSpec(LATEST)
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_max_bytes: int = 4 * 1024 * 1024
    read_committed: bool = False
    no_match_latest: bool = False  # startingOffsetsByTimestampStrategy=latest: a starting timestamp no record has
    security: tuple[tuple[str, str], ...] = ()  # kafka.security.protocol, kafka.sasl.*, kafka.ssl.*, prefix removed

    def matches(self, topic: str) -> bool:
        """Whether a subscription (list or pattern) takes this topic."""
        if self.subscribe:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        return any(t == topic for t, _ in self.assign)


def parse_read_options(options, *, streaming: bool | None) -> ReadOptions:
    """Options of a batch (streaming=False) or streaming (True) read; None: either (the checks
    that do not depend on the kind of query, done when a DataFrame is defined)."""
    opts = _lower(options)
    for key, reason in REFUSED_CONSUMER_OPTIONS.items():
        if key in opts:
            raise OptionError(reason)
    _check_known(opts, READ_OPTIONS, "read", passthrough=True)
    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers is required (host:port[,host:port])")
    _check_bootstrap(bootstrap)

    strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(strategies) != 1:
        which = ", ".join(strategies) if strategies else "none was given"
        raise OptionError(f"exactly one of subscribe, subscribePattern or assign must be set ({which})")
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: tuple[tuple[str, int], ...] = ()
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("option subscribe names no topic")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise OptionError("option subscribePattern is empty")
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option subscribePattern {pattern!r} is not a valid regular expression: {e}") from None
    else:
        value = _json("assign", opts["assign"])
        if not isinstance(value, dict) or not value or not all(
                isinstance(ps, list) and all(isinstance(p, int) and p >= 0 for p in ps) for ps in value.values()):
            raise OptionError(f'option assign must be JSON like {{"topic":[0,1]}}, not {opts["assign"]!r}')
        assign = tuple(sorted({(t, p) for t, ps in value.items() for p in ps}))

    for name in ("endingOffsets", "endingOffsetsByTimestamp"):
        if streaming and name.lower() in opts:
            raise OptionError(f"option {name} is for batch queries only; a stream has no end")
    if streaming is False:
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if name.lower() in opts:  # Spark's Kafka source warns too (KafkaSourceProvider.validateBatchOptions)
                log.warning("option %s is ignored in batch queries", name)
    # the first of the global timestamp, the timestamps per partition and the offsets wins, as in Spark's
    # Kafka source (KafkaSourceProvider.getKafkaOffsetRangeLimit)
    default_start = LATEST if streaming else EARLIEST
    starting = _timestamp_spec(opts, "startingTimestamp", "startingOffsetsByTimestamp", default_start) or _offset_spec(
        opts, "startingOffsets", default_start, forbid=LATEST if streaming is False else None)
    ending = _timestamp_spec(opts, "endingTimestamp", "endingOffsetsByTimestamp", LATEST) or _offset_spec(
        opts, "endingOffsets", LATEST, forbid=EARLIEST)
    no_match = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if no_match not in ("error", "latest"):
        raise OptionError(f"option startingOffsetsByTimestampStrategy must be error or latest, not {no_match!r}")
    if assign:
        named = set(starting.offsets) | set(starting.timestamps) | set(ending.offsets) | set(ending.timestamps)
        stray = sorted(named - set(assign))
        if stray:
            raise OptionError(f"offsets are given for partitions that assign does not name: "
                              f"{', '.join(f'{t}-{p}' for t, p in stray)}")
    if subscribe:
        for spec_name, keys in (("startingOffsets", starting.offsets), ("endingOffsets", ending.offsets),
                                ("startingOffsetsByTimestamp", starting.timestamps),
                                ("endingOffsetsByTimestamp", ending.timestamps)):
            stray = sorted({t for t, _ in keys} - set(subscribe))
            if stray:
                raise OptionError(f"option {spec_name} names topics that subscribe does not: {', '.join(stray)}")

    max_offsets = _positive_int(opts, "maxOffsetsPerTrigger", None)
    min_offsets = _positive_int(opts, "minOffsetsPerTrigger", None)
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise OptionError(f"The value of minOffsetPerTrigger({min_offsets}) is higher than the "
                          f"maxOffsetsPerTrigger({max_offsets}).")
    return ReadOptions(
        bootstrap=bootstrap, subscribe=subscribe, subscribe_pattern=pattern, assign=assign,
        starting=starting, ending=ending,
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", "15m"),
        min_partitions=_positive_int(opts, "minPartitions", None),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition", DEFAULT_MAX_RECORDS_PER_PARTITION),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        poll_timeout_ms=_positive_int(opts, "kafkaConsumer.pollTimeoutMs", DEFAULT_POLL_TIMEOUT_MS),
        fetch_max_bytes=_positive_int(opts, "fetchMaxBytes", 4 * 1024 * 1024),
        read_committed=_isolation_level(opts) == "read_committed",
        no_match_latest=no_match == "latest",
        security=_security(opts),
    )


def _isolation_level(opts: dict[str, str]) -> str:
    level = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"option kafka.isolation.level must be read_uncommitted or read_committed, not {level!r}")
    return level


def _check_bootstrap(bootstrap: str) -> None:
    for item in bootstrap.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise OptionError(f"option kafka.bootstrap.servers: {item.strip()!r} is not host:port")


@dataclass(frozen=True)
class WriteOptions:
    bootstrap: str
    topic: str | None
    producer_config: dict  # the kafka.* options, prefix removed, for the producer
    transactional_id_prefix: str | None = None  # set: exactly once
    batch_id: int | None = None  # a batch write's micro-batch (foreachBatch), for exactly once

    @property
    def exactly_once(self) -> bool:
        return self.transactional_id_prefix is not None


def parse_write_options(options) -> WriteOptions:
    opts = _lower(options)
    for k in READ_OPTIONS:
        if k.lower() in opts and k.lower() not in {w.lower() for w in WRITE_OPTIONS}:
            raise OptionError(f"option {k} is for reading; a write does not take it")
    _check_known(opts, WRITE_OPTIONS, "write", passthrough=True)
    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers is required (host:port[,host:port])")
    _check_bootstrap(bootstrap)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option topic is empty")
    producer_config = {k[len("kafka."):]: v for k, v in opts.items()
                       if k.startswith("kafka.") and k != "kafka.bootstrap.servers"}
    if "transactional.id" in producer_config:
        raise OptionError("a sink has many producers: name it with transactionalIdPrefix (and "
                          "deliveryGuarantee=exactly-once), not kafka.transactional.id")
    guarantee = opts.get("deliveryguarantee", "at-least-once").strip().lower()
    if guarantee not in ("at-least-once", "exactly-once"):
        raise OptionError(f"option deliveryGuarantee must be at-least-once or exactly-once, not {guarantee!r}")
    prefix = opts.get("transactionalidprefix", "").strip() or None
    if guarantee == "exactly-once":
        if prefix is None:
            raise OptionError("deliveryGuarantee=exactly-once needs transactionalIdPrefix: a name for this sink, "
                              "the same each time the query restarts from its checkpoint")
        if topic is None:
            raise OptionError("deliveryGuarantee=exactly-once needs the topic option")
    elif prefix is not None:
        raise OptionError("transactionalIdPrefix is for deliveryGuarantee=exactly-once")
    batch_id = None
    if "batchid" in opts:
        if guarantee != "exactly-once":
            raise OptionError("batchId is for deliveryGuarantee=exactly-once")
        raw = opts["batchid"].strip()
        if not raw.isdigit():
            raise OptionError(f"option batchId must be a micro-batch id (an integer >= 0), not {raw!r}")
        batch_id = int(raw)
    from weir.security.client_config import librdkafka_config
    try:
        producer_config = librdkafka_config(producer_config)  # Java's JAAS and trust store names too
    except ValueError as e:
        raise OptionError(f"kafka.* security options: {e}") from None
    producer_config = _librdkafka_producer(producer_config)
    return WriteOptions(bootstrap, topic.strip() if topic else None, producer_config, prefix, batch_id)


# Spark's Kafka sink refuses these (KafkaSourceProvider.kafkaParamsForProducer)
REFUSED_PRODUCER_OPTIONS = {
    "key.serializer": "Kafka option 'key.serializer' is not supported as keys are serialized with "
                      "ByteArraySerializer",
    "value.serializer": "Kafka option 'value.serializer' is not supported as value are serialized with "
                        "ByteArraySerializer",
}
# The Java producer's names that librdkafka (the sink's producer) spells otherwise: name -> (name, value)
JAVA_PRODUCER_NAMES = {
    "max.request.size": lambda v: ("message.max.bytes", str(int(v))),
    "buffer.memory": lambda v: ("queue.buffering.max.kbytes", str(max(1, -(-int(v) // 1024)))),
    "send.buffer.bytes": lambda v: ("socket.send.buffer.bytes", str(max(0, int(v)))),  # -1: the OS's default
    "receive.buffer.bytes": lambda v: ("socket.receive.buffer.bytes", str(max(0, int(v)))),
    "max.block.ms": lambda v: None,  # the Java producer's wait for room and metadata: the sink waits anyway
}


def _librdkafka_producer(config: dict[str, str]) -> dict[str, str]:
    """The kafka.* options of a write as the sink's producer (librdkafka) takes them, checked here on the
    driver: a name it does not know, or a value it refuses, fails before any task runs."""
    out = {}
    for key, value in config.items():
        if key in REFUSED_PRODUCER_OPTIONS:
            raise OptionError(REFUSED_PRODUCER_OPTIONS[key])
        if key not in JAVA_PRODUCER_NAMES:
            out[key] = value
            continue
        try:
            renamed = JAVA_PRODUCER_NAMES[key](value.strip())
        except ValueError:
            raise OptionError(f"option kafka.{key} must be a whole number, not {value!r}") from None
        if renamed is not None:
            out[renamed[0]] = renamed[1]
    from confluent_kafka import KafkaException, Producer
    try:
        # no bootstrap.servers: builds the configuration, connects nowhere (security settings are left to the
        # executors: their key and trust store files need not exist on the driver)
        Producer({"log_level": 0, **{k: v for k, v in out.items() if not k.startswith(("security.", "sasl.", "ssl."))}})
    except KafkaException as e:
        raise OptionError(f"kafka.* producer options: {e.args[0].str()}") from None
    return out


def _security(opts: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The Kafka client security settings among the options, checked (prefix removed)."""
    props = tuple(sorted((k[len("kafka."):], v) for k, v in opts.items() if k.startswith(SECURITY_PREFIXES)))
    if props:
        from weir.security.client_config import client_security
        try:
            client_security(dict(props))
        except (ValueError, OSError) as e:
            raise OptionError(f"kafka.* security options: {e}") from None
    return props

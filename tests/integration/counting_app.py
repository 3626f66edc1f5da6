"""A stateful consume-process-produce application, written as a Kafka Streams count is: per-key
counts kept in memory and in a compacted changelog topic that the application creates itself.

    BOOTSTRAP=host:port python counting_app.py STACK        (STACK: confluent-kafka or kafka-python)

At start it creates its changelog through the admin API with the configs Kafka Streams sets on an
un-windowed store's changelog (cleanup.policy=compact, message.timestamp.type=CreateTime) plus the
application's own topic overrides, co-partitioned with its input; if the changelog exists it checks
its cleanup.policy, as Streams' InternalTopicManager does. It then restores its counts by reading
the changelog from the beginning to its end, prints them as one JSON line {"restored": {...}},
and consumes its input in a consumer group: for each record it updates the key's count (the value
`reset` deletes it), writes key -> count to the changelog (the input record's partition and
timestamp) and to the output topic, and commits the input offsets once both writes are flushed.
SIGTERM stops it gracefully: the batch in hand finishes, is flushed and committed, the consumer
leaves its group.

The logic is written once; each client stack is an adapter (create the changelog, read it, poll,
send, flush, commit)."""

import json
import os
import signal
import sys
import threading

APP_ID = "counter"
INPUT, OUTPUT = "words", "word-counts"
CHANGELOG = f"{APP_ID}-counts-changelog"  # Streams' and faust's naming: <application>-<store>-changelog
RESET = b"reset"
# The application's changelog overrides (Streams' topic.* settings): small segments and an eager
# cleaner, so that a restart restores from a compacted changelog. A segment holds at least one
# whole batch (a larger one is refused, as by Kafka): the producers' batches are kept below it.
OVERRIDES = {"segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}
BATCH_BYTES = 1024
# what Kafka Streams sets on an un-windowed store's changelog, and the overrides
CHANGELOG_CONFIGS = {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime", **OVERRIDES}


def count(state: dict[bytes, int], key: bytes, value: bytes) -> bytes | None:
    """Apply one input record; the key's new changelog and output value (None: deleted)."""
    if value == RESET:
        state.pop(key, None)
        return None
    state[key] = state.get(key, 0) + 1
    return b"%d" % state[key]


class ConfluentKafka:
    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer, Producer
        from confluent_kafka.admin import AdminClient
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                                  "batch.size": BATCH_BYTES})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": APP_ID, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
        self.errors = []

    def partitions(self, topic: str) -> int:
        return len(self.admin.list_topics(topic, timeout=30).topics[topic].partitions)

    def create_changelog(self, partitions: int) -> bool:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic
        topic = NewTopic(CHANGELOG, partitions, -1, config=CHANGELOG_CONFIGS)  # -1: the broker's default factor
        try:
            self.admin.create_topics([topic])[CHANGELOG].result(30)
            return True
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            return False

    def changelog_configs(self) -> dict[str, str]:
        from confluent_kafka.admin import ConfigResource, ResourceType
        resource = ConfigResource(ResourceType.TOPIC, CHANGELOG)
        return {name: entry.value for name, entry in self.admin.describe_configs([resource])[resource].result(30).items()}

    def read_changelog(self, partitions: int) -> list[tuple[bytes, bytes | None]]:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
        reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{APP_ID}-restore",
                           "enable.auto.commit": False, "enable.partition.eof": True})
        reader.assign([TopicPartition(CHANGELOG, p, OFFSET_BEGINNING) for p in range(partitions)])
        unfinished, records = set(range(partitions)), []
        try:
            while unfinished:
                msg = reader.poll(30)
                assert msg is not None, "no end of the changelog"
                if msg.error() is None:
                    records.append((msg.key(), msg.value()))
                elif msg.error().code() == KafkaError._PARTITION_EOF:
                    unfinished.discard(msg.partition())
                else:
                    raise RuntimeError(msg.error())
        finally:
            reader.close()
        return records

    def subscribe(self) -> None:
        self.consumer.subscribe([INPUT])

    def poll(self, timeout_s: float) -> list[tuple[int, int, bytes, bytes, int]]:
        out = []
        for msg in self.consumer.consume(500, timeout_s):
            if msg.error() is not None:
                raise RuntimeError(msg.error())
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))
        return out

    def send(self, topic: str, partition: int | None, key: bytes, value: bytes | None, timestamp: int) -> None:
        extra = {} if partition is None else {"partition": partition}
        self.producer.produce(topic, value, key, timestamp=timestamp, **extra,
                              on_delivery=lambda err, msg: err and self.errors.append(err))

    def flush(self) -> None:
        if self.producer.flush(30) or self.errors:
            raise RuntimeError(f"writes not acknowledged: {self.errors[:3]}")

    def commit(self, offsets: dict[int, int]) -> None:
        from confluent_kafka import TopicPartition
        self.consumer.commit(offsets=[TopicPartition(INPUT, p, o) for p, o in offsets.items()], asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


class KafkaPython:
    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
        self.bootstrap = bootstrap
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=BATCH_BYTES)  # idempotent
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=APP_ID, enable_auto_commit=False,
                                      auto_offset_reset="earliest")
        self.sent = []

    def partitions(self, topic: str) -> int:
        return len(self.consumer.partitions_for_topic(topic))

    def create_changelog(self, partitions: int) -> bool:
        from kafka.errors import TopicAlreadyExistsError
        try:
            self.admin.create_topics({CHANGELOG: {"num_partitions": partitions, "replication_factor": -1,
                                                  "configs": CHANGELOG_CONFIGS}})
            return True
        except TopicAlreadyExistsError:
            return False

    def changelog_configs(self) -> dict[str, str]:
        from kafka.admin import ConfigResource, ConfigResourceType
        described = self.admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, CHANGELOG)],
                                                config_filter="all")
        return {name: entry["value"] for name, entry in described["topic"][CHANGELOG].items()}

    def read_changelog(self, partitions: int) -> list[tuple[bytes, bytes | None]]:
        from kafka import KafkaConsumer, TopicPartition
        reader = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        tps = [TopicPartition(CHANGELOG, p) for p in range(partitions)]
        reader.assign(tps)
        reader.seek_to_beginning(*tps)
        end, records = reader.end_offsets(tps), []
        try:
            while any(reader.position(tp) < end[tp] for tp in tps):
                for batch in reader.poll(timeout_ms=1000).values():
                    records.extend((msg.key, msg.value) for msg in batch)
        finally:
            reader.close()
        return records

    def subscribe(self) -> None:
        self.consumer.subscribe([INPUT])

    def poll(self, timeout_s: float) -> list[tuple[int, int, bytes, bytes, int]]:
        return [(msg.partition, msg.offset, msg.key, msg.value, msg.timestamp)
                for batch in self.consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=500).values()
                for msg in batch]

    def send(self, topic: str, partition: int | None, key: bytes, value: bytes | None, timestamp: int) -> None:
        self.sent.append(self.producer.send(topic, key=key, value=value, partition=partition, timestamp_ms=timestamp))

    def flush(self) -> None:
        self.producer.flush(30)
        for future in self.sent:
            future.get(timeout=0)  # raises the write's error
        self.sent.clear()

    def commit(self, offsets: dict[int, int]) -> None:
        from kafka import OffsetAndMetadata, TopicPartition
        self.consumer.commit({TopicPartition(INPUT, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})

    def close(self) -> None:
        self.consumer.close()
        self.producer.close()
        self.admin.close()


STACKS = {"confluent-kafka": ConfluentKafka, "kafka-python": KafkaPython}


def main(stack: str) -> None:
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    client = STACKS[stack](os.environ["BOOTSTRAP"])
    partitions = client.partitions(INPUT)
    if not client.create_changelog(partitions):
        policy = client.changelog_configs()["cleanup.policy"]
        if "compact" not in policy.split(","):
            sys.exit(f"changelog {CHANGELOG} exists with cleanup.policy={policy}, not compact")
    state: dict[bytes, int] = {}
    for key, value in client.read_changelog(partitions):
        if value is None:
            state.pop(key, None)
        else:
            state[key] = int(value)
    print(json.dumps({"restored": {k.decode(): v for k, v in state.items()}}), flush=True)

    client.subscribe()
    while not stopping.is_set():
        records = client.poll(0.2)
        if not records:
            continue
        offsets = {}
        for partition, offset, key, value, timestamp in records:
            new = count(state, key, value)
            client.send(CHANGELOG, partition, key, new, timestamp)
            client.send(OUTPUT, None, key, new, timestamp)
            offsets[partition] = offset + 1
        client.flush()
        client.commit(offsets)
    client.close()


if __name__ == "__main__":
    main(*sys.argv[1:])

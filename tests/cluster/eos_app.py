"""A consume-transform-produce application in exactly-once mode, as Kafka Streams runs one with
processing.guarantee=exactly_once_v2: one transaction per poll holds the outputs, the state's
changelog updates and the input offsets (send_offsets_to_transaction).

    BOOTSTRAP=host:port python eos_app.py STACK        (STACK: confluent-kafka or kafka-python)

Per input record (key, value) it counts the key, writes key -> count to the changelog (the input's
partition) and key -> "value:count" to the output. At start it calls InitProducerId (fencing a
previous instance and ending its open transaction), then restores its counts from the changelog
read_committed up to its end, and consumes read_committed. Any error ends the process with status
3, as a Streams thread dies: the next instance starts over from what was committed."""

import os
import sys

INPUT, OUTPUT, CHANGELOG = "eos-in", "eos-out", "eos-counts"
MAX_POLL = 100
SESSION_TIMEOUT_MS = 6000  # the broker's least: a killed instance leaves the group soon


class ConfluentKafka:
    def __init__(self, bootstrap: str, name: str) -> None:
        from confluent_kafka import Consumer, Producer
        self.bootstrap = bootstrap
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": name, "linger.ms": 5,
                                  "transaction.timeout.ms": 30000, "message.timeout.ms": 30000})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": name, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                  "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 1000})

    def init(self) -> None:
        self.producer.init_transactions(60)

    def restore(self, partitions: int) -> list[tuple[bytes, bytes]]:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
        reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "eos-restore", "enable.auto.commit": False,
                           "enable.partition.eof": True, "isolation.level": "read_committed"})
        reader.assign([TopicPartition(CHANGELOG, p, OFFSET_BEGINNING) for p in range(partitions)])
        unfinished, records = set(range(partitions)), []
        try:
            while unfinished:
                msg = reader.poll(30)
                if msg is None:
                    raise RuntimeError("no end of the changelog in 30 s")
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

    def poll(self) -> list[tuple[int, int, bytes, bytes]]:
        out = []
        for msg in self.consumer.consume(MAX_POLL, 0.2):
            if msg.error() is not None:
                raise RuntimeError(msg.error())
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
        return out

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, partition: int | None, key: bytes, value: bytes) -> None:
        self.producer.produce(topic, value, key, **({} if partition is None else {"partition": partition}))

    def commit(self, offsets: dict[int, int]) -> None:
        from confluent_kafka import TopicPartition
        self.producer.send_offsets_to_transaction([TopicPartition(INPUT, p, o) for p, o in offsets.items()],
                                                  self.consumer.consumer_group_metadata(), 30)
        self.producer.commit_transaction(30)


class KafkaPython:
    def __init__(self, bootstrap: str, name: str) -> None:
        from kafka import KafkaConsumer, KafkaProducer
        self.bootstrap = bootstrap
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=name, linger_ms=5,
                                      transaction_timeout_ms=30000)
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=name, enable_auto_commit=False,
                                      auto_offset_reset="earliest", isolation_level="read_committed",
                                      session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=1000)

    def init(self) -> None:
        self.producer.init_transactions()

    def restore(self, partitions: int) -> list[tuple[bytes, bytes]]:
        from kafka import KafkaConsumer, TopicPartition
        reader = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                               isolation_level="read_committed")
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

    def poll(self) -> list[tuple[int, int, bytes, bytes]]:
        return [(msg.partition, msg.offset, msg.key, msg.value)
                for batch in self.consumer.poll(timeout_ms=200, max_records=MAX_POLL).values() for msg in batch]

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, partition: int | None, key: bytes, value: bytes) -> None:
        self.producer.send(topic, key=key, value=value, partition=partition)

    def commit(self, offsets: dict[int, int]) -> None:
        from kafka import OffsetAndMetadata, TopicPartition
        self.producer.send_offsets_to_transaction(
            {TopicPartition(INPUT, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()},
            self.consumer.group_metadata())
        self.producer.commit_transaction()


STACKS = {"confluent-kafka": ConfluentKafka, "kafka-python": KafkaPython}


def main(stack: str) -> None:
    client = STACKS[stack](os.environ["BOOTSTRAP"], f"eos-{stack}")
    partitions = int(os.environ.get("PARTITIONS", "3"))
    client.init()
    counts: dict[bytes, int] = {}
    for key, value in client.restore(partitions):
        counts[key] = int(value)
    print(f"restored {sum(counts.values())}", flush=True)
    client.subscribe()
    while True:
        records = client.poll()
        if not records:
            continue
        client.begin()
        offsets = {}
        for partition, offset, key, value in records:
            counts[key] = counts.get(key, 0) + 1
            client.send(CHANGELOG, partition, key, b"%d" % counts[key])
            client.send(OUTPUT, None, key, b"%s:%d" % (value, counts[key]))
            offsets[partition] = offset + 1
        client.commit(offsets)


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except Exception as e:  # a Streams thread that dies: the next instance takes over
        print(f"eos_app: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        sys.exit(3)

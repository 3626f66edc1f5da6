"""Transactions end to end with real clients against real brokers: confluent-kafka's
transactional Producer (commit, abort, consume-transform-produce with send_offsets_to_transaction)
and kafka-python's KafkaProducer(transactional_id=...), read back by read_committed consumers."""

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from .client_helpers import create_topics, read_committed
from .txn_wire import TXN_SETTINGS

SETTINGS = {k.replace(".", "_"): v for k, v in TXN_SETTINGS.items()}  # KIP-890 verification on, Kafka's default


def test_confluent_transactions_commit_abort_and_offsets(start_broker):
    broker = start_broker(0, **SETTINGS)
    create_topics(broker.bootstrap, "in", "out")
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        plain.produce("in", f"in-{i}".encode(), partition=i % 2)
    assert plain.flush(30) == 0

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "app-1",
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce("out", f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)

    producer.begin_transaction()
    for i in range(3):
        producer.produce("out", f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)

    # consume-transform-produce: the input offsets commit with the output
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "transformer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.subscribe(["in"])
    producer.begin_transaction()
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 10 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        producer.produce("out", msg.value().upper(), partition=msg.partition())
        seen += 1
    assert seen == 10
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    committed = consumer.committed([TopicPartition("in", 0), TopicPartition("in", 1)], timeout=30)
    assert sorted(tp.offset for tp in committed) == [5, 5]
    consumer.close()

    values = read_committed(broker.bootstrap, "out", 15)
    assert sorted(values) == sorted([f"committed-{i}".encode() for i in range(5)]
                                    + [f"IN-{i}".encode() for i in range(10)])

    # a second producer with the same transactional id fences the first
    zombie_killer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "app-1"})
    zombie_killer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("out", b"zombie", partition=0)
    try:
        producer.commit_transaction(10)
        raise AssertionError("the fenced producer committed")
    except Exception as e:  # KafkaException: _FENCED
        assert "fenced" in str(e).lower(), e


def test_kafka_python_transactional_producer(start_broker):
    from kafka import KafkaProducer
    broker = start_broker(0, **SETTINGS)
    create_topics(broker.bootstrap, "kp")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-1")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(4):
        producer.send("kp", f"yes-{i}".encode(), partition=i % 2)
    producer.commit_transaction()
    producer.begin_transaction()
    for i in range(4):
        producer.send("kp", f"no-{i}".encode(), partition=i % 2)
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send("kp", b"yes-last", partition=0)
    producer.commit_transaction()
    producer.close()
    values = read_committed(broker.bootstrap, "kp", 5)
    assert sorted(values) == sorted([f"yes-{i}".encode() for i in range(4)] + [b"yes-last"])


def test_confluent_transactions_on_three_brokers(start_cluster):
    """Coordinators spread over the brokers (the group's offsets partition verified with a
    transaction coordinator on another broker, KIP-890), RF 3 everywhere; several producers."""
    cluster = start_cluster(**SETTINGS)
    create_topics(cluster.bootstrap, "in3", "out3", partitions=3, replication=3)
    plain = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(30):
        plain.produce("in3", f"in-{i}".encode(), partition=i % 3)
    assert plain.flush(30) == 0
    expected = []
    for n in range(3):  # three ids, so three __transaction_state partitions and groups
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"multi-{n}"})
        producer.init_transactions(30)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"group-{n}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "isolation.level": "read_committed"})
        consumer.subscribe(["in3"])
        producer.begin_transaction()
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 30 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            producer.produce("out3", f"{n}:{msg.value().decode()}".encode(), partition=msg.partition())
            seen += 1
        assert seen == 30
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        if n == 1:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            expected += [f"{n}:in-{i}".encode() for i in range(30)]
        committed = consumer.committed([TopicPartition("in3", p) for p in range(3)], timeout=30)
        assert sorted(tp.offset for tp in committed) == ([-1001] * 3 if n == 1 else [10, 10, 10])
        consumer.close()
    assert sorted(read_committed(cluster.bootstrap, "out3", len(expected))) == sorted(expected)


def test_kafka_python_consume_transform_produce(start_broker):
    """kafka-python's send_offsets_to_transaction with its consumer's group metadata (KIP-447:
    TxnOffsetCommit with the member and generation), then a read_committed KafkaConsumer."""
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
    from kafka import TopicPartition as KafkaTopicPartition
    broker = start_broker(0, **SETTINGS)
    create_topics(broker.bootstrap, "src", "dst", partitions=1)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(6):
        plain.produce("src", f"s-{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    consumer = KafkaConsumer("src", bootstrap_servers=broker.bootstrap, group_id="kp-group",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             isolation_level="read_committed")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-ctp")
    producer.init_transactions()
    producer.begin_transaction()
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 6 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            for record in records:
                got.append(record)
                producer.send("dst", record.value.upper(), partition=0)
    assert len(got) == 6
    tp = KafkaTopicPartition("src", 0)
    producer.send_offsets_to_transaction({tp: OffsetAndMetadata(got[-1].offset + 1, "", -1)},
                                         consumer.group_metadata())
    producer.commit_transaction()
    producer.close()
    assert consumer.committed(tp) == 6
    consumer.close()
    reader = KafkaConsumer("dst", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                           isolation_level="read_committed", consumer_timeout_ms=5000)
    assert sorted(r.value for r in reader) == sorted(f"S-{i}".encode() for i in range(6))
    reader.close()

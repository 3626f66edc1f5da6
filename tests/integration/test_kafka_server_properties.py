"""Kafka's own broker config starts Weir: the config/server.properties that Kafka 3.9 ships
(ZooKeeper mode; kafka-3.9-server.properties here, as in Kafka's source), with only its ZooKeeper,
log directory and listener pointed at the test's, serves a confluent-kafka producer and a consumer
group; the Kafka settings Weir has no behaviour for are named once at start-up and described as set."""

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from weir.lab.local_cluster import BrokerProcess

KAFKA_SERVER_PROPERTIES = Path(__file__).with_name("kafka-3.9-server.properties")


def consume_in_a_group(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-config",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values, deadline = [], time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and not message.error():
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_kafkas_shipped_server_properties_start_a_broker_that_clients_use(tmp_path, zookeeper_connect):
    broker = BrokerProcess(0, tmp_path / "logs", zookeeper_connect, properties=KAFKA_SERVER_PROPERTIES)
    try:
        broker.start()
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(10):
            producer.produce("kafka-config", f"record {i}".encode())
        assert producer.flush(30) == 0
        assert consume_in_a_group(broker.bootstrap, "kafka-config", 10) == [f"record {i}".encode() for i in range(10)]

        no_effect = [line for line in broker.output().splitlines() if "accepted, no effect in Weir" in line]
        assert len(no_effect) == 1
        assert no_effect[0].endswith("accepted, no effect in Weir: num.io.threads, "
                                     "num.network.threads, num.recovery.threads.per.data.dir, "
                                     "socket.receive.buffer.bytes, socket.send.buffer.bytes")
        resource = ConfigResource(ResourceType.BROKER, "0")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # alive until the answer is in
        described = admin.describe_configs([resource])[resource].result(30)
        retention = described["log.retention.ms"]  # from log.retention.hours=168
        assert (retention.value, ConfigSource(retention.source)) == ("604800000", ConfigSource.STATIC_BROKER_CONFIG)
        io_threads = described["num.io.threads"]
        assert (io_threads.value, ConfigSource(io_threads.source), io_threads.is_read_only) == (
            "8", ConfigSource.STATIC_BROKER_CONFIG, True)
    finally:
        broker.kill()
        print(broker.output())

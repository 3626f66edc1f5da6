"""connections.max.idle.ms on every listener, as Kafka's socket server closes idle connections: one
with no request read and no answer written for that long is closed (a client that vanished
without closing would otherwise hold it for ever), one in use stays, and clients reconnect."""

import time

from confluent_kafka import Producer
from raw_protocol import RawClient, create_topic, wait_for_log

IDLE_MS = 1000


def test_an_idle_connection_is_closed_and_one_in_use_stays_open(start_broker):
    broker = start_broker(0, connections_max_idle_ms=str(IDLE_MS))
    with RawClient(broker.port) as idle, RawClient(broker.port) as used:
        assert idle.api_versions_ok()
        until = time.monotonic() + 2.5 * IDLE_MS / 1000
        while time.monotonic() < until:  # a request every 200 ms, well within the idle time
            assert used.api_versions_ok()
            time.sleep(0.2)
        idle.assert_closed_by_broker()
        assert used.api_versions_ok()
    wait_for_log(broker, "idle for more than connections.max.idle.ms (1000 ms)")


def test_a_producer_idle_past_the_limit_reconnects_and_delivers(start_broker):
    broker = start_broker(0, connections_max_idle_ms=str(IDLE_MS))
    with RawClient(broker.port) as client:
        create_topic(client, "idle")
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})

    def write(value: bytes) -> None:
        producer.produce("idle", value, partition=0, on_delivery=lambda err, _: err and errors.append(err))
        assert producer.flush(30) == 0

    write(b"before")
    time.sleep(3 * IDLE_MS / 1000)  # the broker closes the producer's connections meanwhile
    write(b"after")
    assert errors == []
    wait_for_log(broker, "idle for more than connections.max.idle.ms")

"""`weir consumer-groups` as an operator runs it against a broker with a live confluent-kafka group:
list, describe (offsets and lag, members, state), reset (refused while the group is active,
shown without --execute, done with it), delete offsets, delete the group."""

import time

from confluent_kafka import Consumer, Producer
from scraping import broker_metrics
from test_admin_cli import failed, ok, weir

GROUP_SETTINGS = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}


def rows(output: str) -> list[list[str]]:
    """The table's data rows, split on runs of spaces."""
    lines = [line for line in output.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP") or line.startswith("TOPIC"))
    return [line.split() for line in lines[start + 1:]]


def offsets(broker) -> dict[int, tuple[str, str]]:
    """partition -> (CURRENT-OFFSET, LAG) from --describe."""
    return {int(r[2]): (r[3], r[5]) for r in rows(ok(weir(broker, "consumer-groups", "--describe", "--group", "app")))}


def test_consumer_groups(start_broker):
    broker = start_broker(0, **GROUP_SETTINGS)
    ok(weir(broker, "topics", "create", "--topic", "events", "--partitions", "2", "--replication-factor", "1"))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("events", b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "app", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "client.id": "app-client"})
    consumer.subscribe(["events"])
    read = 0
    deadline = time.monotonic() + 60
    while read < 10 and time.monotonic() < deadline:
        msg = consumer.poll(1)
        read += msg is not None and msg.error() is None
    assert read == 10
    consumer.commit(asynchronous=False)

    assert "app" in ok(weir(broker, "consumer-groups", "--list")).split()
    described = rows(ok(weir(broker, "consumer-groups", "--describe", "--group", "app")))
    assert [(r[1], r[2], r[3], r[4], r[5], r[7], r[8]) for r in described] == [
        ("events", "0", "5", "5", "0", "/127.0.0.1", "app-client"),
        ("events", "1", "5", "5", "0", "/127.0.0.1", "app-client")]
    (state,) = rows(ok(weir(broker, "consumer-groups", "--describe", "--group", "app", "--state")))
    assert state[-2:] == ["Stable", "1"] and state[2] == "(0)", state
    (member,) = rows(ok(weir(broker, "consumer-groups", "--describe", "--group", "app", "--members")))
    assert member[-3:] == ["/127.0.0.1", "app-client", "2"], member

    reset = ("consumer-groups", "--reset-offsets", "--group", "app", "--topic", "events", "--to-earliest")
    assert "can only be reset if the group 'app' is inactive" in failed(weir(broker, *reset, "--execute"))
    consumer.close()
    shown = weir(broker, *reset)
    assert [r[3] for r in rows(ok(shown))] == ["0", "0"] and "--execute option is missing" in shown.stderr
    assert offsets(broker) == {0: ("5", "0"), 1: ("5", "0")}, "a dry run changes nothing"
    ok(weir(broker, *reset, "--execute"))
    assert offsets(broker) == {0: ("0", "5"), 1: ("0", "5")}
    ok(weir(broker, "consumer-groups", "--reset-offsets", "--group", "app", "--all-topics", "--shift-by", "2",
            "--execute"))
    assert offsets(broker) == {0: ("2", "3"), 1: ("2", "3")}
    ok(weir(broker, "consumer-groups", "--reset-offsets", "--group", "app", "--topic", "events:1", "--to-offset",
            "100", "--execute"))
    assert offsets(broker) == {0: ("2", "3"), 1: ("5", "0")}, "clamped to the log end"

    deleted = ok(weir(broker, "consumer-groups", "--delete-offsets", "--group", "app", "--topic", "events:0"))
    assert deleted.startswith("Request succeed") and rows(deleted) == [["events", "0", "Successful"]]
    assert offsets(broker) == {1: ("5", "0")}
    assert ok(weir(broker, "consumer-groups", "--delete", "--group", "app")) == \
        "Deletion of requested consumer groups ('app') was successful.\n"
    assert "app" not in ok(weir(broker, "consumer-groups", "--list")).split()
    assert "GROUP_ID_NOT_FOUND" in failed(weir(broker, "consumer-groups", "--delete", "--group", "app"))


def test_consumer_protocol_group_is_described_with_its_epochs(start_broker):
    """A KIP-848 group (librdkafka, group.protocol=consumer): offsets and lag, members with
    their epochs and target assignments (--verbose), state with the group and assignment epochs."""
    broker = start_broker(0, **GROUP_SETTINGS, **{"group.consumer.heartbeat.interval.ms": "500",
                                                  "group.consumer.min.heartbeat.interval.ms": "500",
                                                  "metrics.port": "0"})
    ok(weir(broker, "topics", "create", "--topic", "kip848", "--partitions", "2", "--replication-factor", "1"))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("kip848", b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "app848", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": "app-client"})
    consumer.subscribe(["kip848"])
    read = 0
    deadline = time.monotonic() + 60
    while read < 8 and time.monotonic() < deadline:
        msg = consumer.poll(1)
        read += msg is not None and msg.error() is None
    consumer.commit(asynchronous=False)
    try:
        described = rows(ok(weir(broker, "consumer-groups", "--describe", "--group", "app848")))
        assert [(r[1], r[2], r[7], r[8]) for r in described] == [("kip848", "0", "/127.0.0.1", "app-client"),
                                                                 ("kip848", "1", "/127.0.0.1", "app-client")]
        assert sum(int(r[3]) for r in described) == 8 and sum(int(r[5]) for r in described) == 2  # committed, lag
        (member,) = rows(ok(weir(broker, "consumer-groups", "--describe", "--group", "app848", "--members",
                                 "--verbose")))
        assert member[-6:] == ["app-client", "2", "1", "kip848:0,1", "1", "kip848:0,1"], member
        (state,) = rows(ok(weir(broker, "consumer-groups", "--describe", "--group", "app848", "--state", "--verbose")))
        assert state[-5:] == ["uniform", "Stable", "1", "1", "1"], state  # assignor, state, epochs, #members
        lag = [v for labels, v in broker_metrics(broker)["kafka_consumergroup_lag"]
               if labels["consumergroup"] == "app848"]
        assert sum(lag) == 2, lag  # the console's lag, from the same gauge
    finally:
        consumer.close()
    (state,) = rows(ok(weir(broker, "consumer-groups", "--describe", "--group", "app848", "--state")))
    assert state[-2:] == ["Empty", "0"], state

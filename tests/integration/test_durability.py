"""Restarts and retention, seen through real clients."""

import threading
import time

from clients import confluent_consume, confluent_produce, make_messages
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import watermarks


def create_topic(bootstrap, name, partitions=1, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)


def test_clean_restart_keeps_every_record_and_offsets_continue(broker):
    create_topic(broker.bootstrap, "durable", 2)
    first = make_messages(20_000, 2)
    confluent_produce(broker.bootstrap, "durable", first)
    broker.stop()
    assert "shut down cleanly" in broker.output()
    broker.start()
    second = make_messages(40_000, 2)[20_000:]
    confluent_produce(broker.bootstrap, "durable", second)
    got = confluent_consume(broker.bootstrap, "durable", 2, 40_000)
    assert len(got) == 40_000
    for p in (0, 1):
        mine = [m for m in got if m.partition == p]
        assert [m.offset for m in mine] == list(range(20_000))
        assert [m.value for m in mine] == [v for q, _, v, _, _ in first + second if q == p]


def test_kill_9_mid_produce_loses_no_acknowledged_record(broker):
    """Acknowledged records survive kill -9; the torn tail is cut; offsets continue."""
    create_topic(broker.bootstrap, "crashy")
    acked: dict[bytes, int] = {}
    enough = threading.Event()

    def delivered(err, msg):
        if err is None:
            acked[msg.value()] = msg.offset()
            if len(acked) >= 30_000:
                enough.set()

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
                         "message.timeout.ms": 5000, "retries": 0})
    i = 0
    while not enough.is_set():
        try:
            producer.produce("crashy", f"record-{i}".encode(), partition=0, on_delivery=delivered)
            i += 1
        except BufferError:
            pass
        producer.poll(0)
    broker.kill()  # producer still has batches in flight
    producer.flush(10)  # the rest fail: the broker is gone

    broker.start()
    low, high = watermarks(broker.bootstrap, "crashy")
    assert high >= len(acked)
    got = confluent_consume(broker.bootstrap, "crashy", 1, high)
    assert [m.offset for m in got] == list(range(high)), "no gap, no torn batch served"
    by_value = {m.value: m.offset for m in got}
    missing = [v for v in acked if by_value.get(v) != acked[v]]
    assert not missing, f"{len(missing)} acknowledged records lost or moved"

    confluent_produce(broker.bootstrap, "crashy", [(0, b"k", b"after-restart", (), 1)])
    assert watermarks(broker.bootstrap, "crashy") == (0, high + 1)


def test_segments_roll_and_retention_deletes_old_ones(broker):
    """Small segments and retention.bytes: old segments go, ListOffsets earliest moves."""
    now = int(time.time() * 1000)  # recent, so time-based retention (7 days) keeps them
    create_topic(broker.bootstrap, "rolling", config={"segment.bytes": "20000", "retention.bytes": "60000"})
    confluent_produce(broker.bootstrap, "rolling", [(0, b"k", b"x" * 1000, (), now) for _ in range(300)],
                      **{"batch.size": 10_000})
    segments = sorted((broker.data_dir / "rolling-0").glob("*.log"))
    assert len(segments) > 10, "300 KB in 20 KB segments rolls many times"
    assert watermarks(broker.bootstrap, "rolling") == (0, 300)

    broker.stop()
    broker.overrides["log.retention.check.interval.ms"] = "100"
    broker.start()
    low = high = 0
    for _ in range(200):  # retention runs every 100 ms; each check is a round trip
        low, high = watermarks(broker.bootstrap, "rolling")
        if low:
            break
    assert 0 < low < 300 and high == 300
    remaining = sorted((broker.data_dir / "rolling-0").glob("*.log"))
    assert len(remaining) < len(segments)
    assert int(remaining[0].stem) == low, "log start offset is the first remaining segment's base"
    got = confluent_consume(broker.bootstrap, "rolling", 1, 300 - low)
    assert got[0].offset == low and got[-1].offset == 299

"""The sink's exactly-once mode with real Spark, a real broker and kill -9 of the query's process:
every input record is in the output topic exactly once (read_committed), however often the query
is killed mid-batch and restarted from its checkpoint."""

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from helpers import create_topic, produce, values, wait_until

APP = Path(__file__).with_name("exactly_once_app.py")
KILLS = int(os.environ.get("WEIR_EOS_KILLS", "1"))  # kill -9 rounds of the query before it drains
ONE_BROKER_TRANSACTIONS = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
                           "transaction.state.log.num.partitions": "3"}


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eo-probe", "isolation.level": isolation})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    finally:
        consumer.close()


def read_committed(bootstrap: str, topic: str, expected: int) -> Counter:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eo-check", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: Counter = Counter()
    idle = 0
    while idle < 10 or sum(seen.values()) < expected and idle < 60:
        messages = consumer.consume(1000, 0.5)
        idle = 0 if messages else idle + 1
        seen.update(m.value() for m in messages if not m.error())
    consumer.close()
    return seen


def test_a_streaming_copy_killed_mid_batch_and_restarted_writes_each_record_once(start_broker, tmp_path, request):
    broker = start_broker(0, **ONE_BROKER_TRANSACTIONS)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "eo-in", 3)
    create_topic(bootstrap, "eo-out", 3)
    sent = values(3000, "r")
    produce(bootstrap, "eo-in", sent, partitions=3)
    checkpoint = str(tmp_path / "checkpoint")
    log = (tmp_path / "app.log").open("a")

    def app(mode: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, str(APP), bootstrap, checkpoint, mode],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        request.addfinalizer(proc.kill)  # a query left running would run for ever
        return proc

    written = 0
    request.addfinalizer(lambda: print((tmp_path / "app.log").read_text()[-6000:]))
    for _ in range(KILLS):  # killed while it writes: some of its transactions are open, or committed before
        query = app("run")  # Spark's commit log recorded their micro-batch
        before = written
        def writing():
            assert query.poll() is None, "the query ended"
            return end_offsets(bootstrap, "eo-out", 3, "read_uncommitted") > before + 300
        wait_until(writing, "the query writing", timeout_s=120)
        query.kill()
        query.wait()
        written = end_offsets(bootstrap, "eo-out", 3, "read_uncommitted")
    drain = app("drain")
    assert drain.wait(timeout=300) == 0

    seen = read_committed(bootstrap, "eo-out", len(sent))
    assert set(seen) == set(sent), f"missing {len(set(sent) - set(seen))}, e.g. {sorted(set(sent) - set(seen))[:5]}"
    twice = {v: n for v, n in seen.items() if n > 1}
    assert not twice, f"{len(twice)} records written more than once, e.g. {list(twice.items())[:5]}"

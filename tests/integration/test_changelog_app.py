"""A stateful consume-process-produce application on Weir (issue 12): it counts words per key, keeps
its counts in a compacted changelog topic it creates itself through the admin API with the configs
a stream-processing library sets, is stopped, restarts, restores its counts from the changelog after
the cleaner has compacted it, and goes on with correct counts.

Three client stacks run the same scenario: counting_app.py written once on confluent-kafka and on
kafka-python (Kafka Streams' changelog configs, its restore-to-the-end and commit-after-flush), and
faust_counting_app.py, a faust-streaming Table (aiokafka underneath; faust creates, writes and
restores its changelog its own way)."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from counting_app import CHANGELOG, CHANGELOG_CONFIGS, INPUT, OUTPUT, OVERRIDES, RESET, count
from waiting import wait_until

HERE = Path(__file__).parent
KEYS = [b"w%02d" % k for k in range(12)]
# (key, value) inputs: a word counts one; `reset` deletes its count (a tombstone in the changelog)
FIRST = ([(KEYS[i * 7 % 12], b"1") for i in range(500)] + [(b"w03", RESET), (b"w07", RESET)]
         + [(KEYS[i % 5], b"1") for i in range(100)])
SECOND = [(KEYS[i * 5 % 12], b"1") for i in range(200) if KEYS[i * 5 % 12] != b"w07"]
BASE_TS = int(time.time() * 1000) - 3_600_000  # inputs' CreateTime (recent: no segment rolls for log.roll.ms)


@dataclass(frozen=True)
class Stack:
    name: str
    argv: tuple[str, ...]  # a script beside this file and its arguments; every app also gets BOOTSTRAP and DATADIR
    changelog_configs: dict  # what the application asks for when it creates its changelog
    forwards_timestamps: bool  # its changelog records carry their input record's timestamp, as Kafka Streams'


STACKS = [Stack("confluent-kafka", ("counting_app.py", "confluent-kafka"), CHANGELOG_CONFIGS, True),
          Stack("kafka-python", ("counting_app.py", "kafka-python"), CHANGELOG_CONFIGS, True),
          Stack("faust", ("faust_counting_app.py", "worker", "--loglevel", "warn"),
                {"cleanup.policy": "compact", **OVERRIDES}, False)]
RESTORED = '{"restored"'  # the line each application prints once restored


class App:
    """One instance of the application: a process whose output lines are kept."""

    def __init__(self, stack: Stack, bootstrap: str, workdir: Path) -> None:
        script, *args = stack.argv
        env = {**os.environ, "BOOTSTRAP": bootstrap, "DATADIR": str(workdir / "data")}
        self.proc = subprocess.Popen([sys.executable, str(HERE / script), *args], cwd=workdir, env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()

    def restored(self) -> dict[bytes, int]:
        """The counts it restored from its changelog, as it printed them."""
        def printed():
            assert self.proc.poll() is None, "the application ended:\n" + "".join(self.lines)
            return next((line[line.index(RESTORED):] for line in self.lines if RESTORED in line), None)
        line = wait_until(printed, "the application's restore", timeout_s=30)
        return {key.encode(): n for key, n in json.loads(line)["restored"].items()}

    def stop(self) -> None:
        """SIGTERM, as an operator stops it: it finishes, flushes and commits what it has taken."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(30) == 0, "".join(self.lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        print("".join(self.lines))  # shown by pytest when the test fails


def truth(inputs: list[tuple[bytes, bytes]]) -> dict[bytes, int]:
    state: dict[bytes, int] = {}
    for key, value in inputs:
        count(state, key, value)
    return state


def produce(bootstrap: str, inputs: list[tuple[bytes, bytes]], first_ts: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i, (key, value) in enumerate(inputs):
        producer.produce(INPUT, value, key, timestamp=first_ts + i)
    assert producer.flush(30) == 0


def read(bootstrap: str, topic: str, partitions: int) -> list[tuple[bytes, bytes | None, int]]:
    """(key, value, timestamp) of every record, each partition in offset order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    unfinished, out = set(range(partitions)), []
    try:
        while unfinished:
            msg = consumer.poll(10)
            assert msg is not None, f"no end of {topic}"
            if msg.error() is None:
                out.append((msg.key(), msg.value(), msg.timestamp()[1]))
            else:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                unfinished.discard(msg.partition())
    finally:
        consumer.close()
    return out


def latest(records) -> dict[bytes, int]:
    values = {key: value for key, value, _ in records}
    return {key: int(value) for key, value in values.items() if value is not None}


@pytest.fixture
def apps(tmp_path):
    started = []
    yield lambda stack, bootstrap: started.append(App(stack, bootstrap, tmp_path)) or started[-1]
    for app in started:
        app.kill()


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.name)
def test_a_stateful_app_restores_its_counts_from_its_compacted_changelog(start_broker, apps, stack):
    broker = start_broker(0, log_cleaner_backoff_ms="200", group_initial_rebalance_delay_ms="0",
                          offsets_topic_num_partitions="1")
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(INPUT, 2, 1), NewTopic(OUTPUT, 1, 1)]).values():
        future.result(30)
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})

    def output_reaches(n: int) -> None:
        wait_until(lambda: probe.get_watermark_offsets(TopicPartition(OUTPUT, 0), timeout=10, cached=False)[1] >= n,
                   f"{n} records in {OUTPUT}", timeout_s=30)

    produce(bootstrap, FIRST, BASE_TS)
    first = apps(stack, bootstrap)
    assert first.restored() == {}, "a new application starts empty"
    output_reaches(len(FIRST))
    first.stop()

    resource = ConfigResource(ResourceType.TOPIC, CHANGELOG)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert {name: configs[name].value for name in stack.changelog_configs} == stack.changelog_configs
    produce(bootstrap, SECOND, BASE_TS + len(FIRST))

    def compacted():
        records = read(bootstrap, CHANGELOG, 2)
        return records if len(records) < len(FIRST) else None  # one record was written per input
    cleaned = wait_until(compacted, "the cleaner over the changelog", timeout_s=30)
    assert latest(cleaned) == truth(FIRST), "the cleaned changelog holds every key's latest count"

    second = apps(stack, bootstrap)
    assert second.restored() == truth(FIRST)
    output_reaches(len(FIRST) + len(SECOND))
    second.stop()
    assert probe.get_watermark_offsets(TopicPartition(OUTPUT, 0), timeout=10, cached=False)[1] == \
        len(FIRST) + len(SECOND), "each input counted once"

    final = truth(FIRST + SECOND)
    assert latest(read(bootstrap, OUTPUT, 1)) == final
    changelog = read(bootstrap, CHANGELOG, 2)
    assert latest(changelog) == final
    if stack.forwards_timestamps:  # CreateTime: the broker keeps the timestamps the application wrote
        last_input = {key: BASE_TS + i for i, (key, _) in enumerate(FIRST + SECOND)}
        assert {key: ts for key, _, ts in changelog} == last_input

    third = apps(stack, bootstrap)
    assert third.restored() == final
    third.stop()
    probe.close()

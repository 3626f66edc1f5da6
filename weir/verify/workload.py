"""The workload: real clients (confluent-kafka) writing unique values and reading them back.

- Producers send unique integers (as text) at a fixed total rate, each to partition
  `value % partitions`, with acks=all (or acks=1). Each message is one op: invoked at produce(),
  completed from its delivery report.
- Consumers `assign` every partition from the beginning (no group, no rebalancing) and poll; every
  poll is one op whose value lists what it read, in order. A consumer that breaks is replaced by a
  new one, which is a new process ("consumer-1.2": consumer 1, third incarnation).
- The final read, after the faults are healed: a fresh consumer reads every partition from its
  start to its high watermark.

The fate of a failed send (`send_fate`): only an error that proves the broker did not append the
value is a "fail", and only when the client made exactly one attempt (retries=0): with retries,
an earlier attempt may have been appended before a later one was refused, and librdkafka does not
tell us (its message status is not exposed by confluent-kafka). Anything else is "info".
"""

from __future__ import annotations

import itertools
import logging
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from weir.verify.history import FAIL, INFO, OK, History

log = logging.getLogger(__name__)
# librdkafka's own lines (timeouts, disconnections: expected under faults), kept off the terminal;
# the runner writes them to the run's clients.log.
rdkafka_log = logging.getLogger("weir.verify.rdkafka")
rdkafka_log.propagate = False

# Refused before anything was appended: the value is definitely not in the log (single attempt).
DEFINITE_FAILURES = frozenset({
    "NOT_ENOUGH_REPLICAS", "MSG_SIZE_TOO_LARGE", "INVALID_REQUIRED_ACKS", "TOPIC_AUTHORIZATION_FAILED",
    "CORRUPT_MESSAGE", "INVALID_RECORD", "RECORD_LIST_TOO_LARGE", "INVALID_TIMESTAMP", "POLICY_VIOLATION",
    "_QUEUE_FULL", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART",
})
# Never sent at all (the local client refused it), whatever the retries.
LOCAL_REFUSALS = frozenset({"_QUEUE_FULL", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC"})
POLL_BATCH = 500
POLL_TIMEOUT_S = 0.2
FINAL_READ_TIMEOUT_S = 60
# What a ListOffsets may answer while leadership settles (Kafka's retriable errors: a leader just
# elected answers OFFSET_NOT_AVAILABLE until its HW reaches its epoch's start), which librdkafka's
# watermark query gives back rather than retrying; and its own timeouts and lost connections.
RETRIABLE_OFFSET_ERRORS = frozenset({
    "OFFSET_NOT_AVAILABLE", "LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION", "NOT_LEADER_OR_FOLLOWER",
    "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "REQUEST_TIMED_OUT", "_TIMED_OUT", "_TRANSPORT",
})


def error_name(e: KafkaException) -> str:
    """The Kafka error's name (librdkafka's for its own), else the exception's repr."""
    return e.args[0].name() if e.args and isinstance(e.args[0], KafkaError) else repr(e)


def retriable_offset_error(e: KafkaException) -> bool:
    """Whether a ListOffsets-backed call should be asked again (RETRIABLE_OFFSET_ERRORS)."""
    return error_name(e) in RETRIABLE_OFFSET_ERRORS


def watermark_offsets(consumer: Consumer, partition: TopicPartition, deadline: float) -> tuple[int, int]:
    """The partition's (low, high) watermarks, asked again after a retriable error until `deadline`."""
    while True:
        try:
            return consumer.get_watermark_offsets(partition, timeout=10)
        except KafkaException as e:
            if not retriable_offset_error(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def send_fate(error_name: str, retries: int) -> str:
    """"fail" if the value is definitely not in the log, else "info" (indefinite).

    Timeouts, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND, _MSG_TIMED_OUT, lost
    connections: all indefinite.
    """
    if error_name in LOCAL_REFUSALS:
        return FAIL
    if retries == 0 and error_name in DEFINITE_FAILURES:
        return FAIL
    return INFO


class Workload:
    def __init__(self, connection: dict, history: History, topic: str, partitions: int, *, acks: str = "all",
                 rate: float = 200, producers: int = 2, consumers: int = 2, retries: int = 0,
                 idempotent: bool = False, message_timeout_ms: int = 10000) -> None:
        self.connection = connection  # bootstrap.servers and the security properties
        self.history = history
        self.topic = topic
        self.partitions = partitions
        self.acks = acks
        self.rate = rate
        self.producer_count = producers
        self.consumer_count = consumers
        self.retries = retries
        self.idempotent = idempotent
        self.message_timeout_ms = message_timeout_ms
        self._values = itertools.count()
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- clients -----------------------------------------------------------------------------

    def _producer_config(self) -> dict:
        return {**self.connection, "acks": self.acks, "linger.ms": 2,
                "retries": self.retries, "retry.backoff.ms": 100,
                "enable.idempotence": self.idempotent,
                "message.timeout.ms": self.message_timeout_ms,
                "request.timeout.ms": min(5000, self.message_timeout_ms),
                "socket.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 1000,
                "metadata.max.age.ms": 3000, "reconnect.backoff.max.ms": 1000, "logger": rdkafka_log}

    def _consumer_config(self, name: str) -> dict:
        return {**self.connection, "group.id": f"weir-verify-{name}",
                "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": False,
                "fetch.wait.max.ms": 100, "socket.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 1000,
                "metadata.max.age.ms": 3000, "reconnect.backoff.max.ms": 1000, "logger": rdkafka_log}

    # -- running -----------------------------------------------------------------------------

    def start(self) -> "Workload":
        for i in range(self.producer_count):
            self._spawn(f"producer-{i}", self._produce, f"producer-{i}")
        for i in range(self.consumer_count):
            self._spawn(f"consumer-{i}", self._consume, i)
        return self

    def _spawn(self, name, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def stop_producing(self) -> None:
        """Stop sending; wait until every sent value has its delivery report (or timed out)."""
        self._stop_producing.set()
        for thread in self._threads:
            if thread.name.startswith("producer"):
                thread.join(self.message_timeout_ms / 1000 + 30)

    def signal_stop(self) -> None:
        """Ask every client to stop, without waiting for them."""
        self._stop_producing.set()
        self._stop_consuming.set()

    def stop(self) -> None:
        self._stop_producing.set()
        self._stop_consuming.set()
        for thread in self._threads:
            thread.join(self.message_timeout_ms / 1000 + 30)

    def _produce(self, process: str) -> None:
        history, interval = self.history, self.producer_count / self.rate
        producer = Producer(self._producer_config())

        def delivered(op_id, partition, value):
            def report(err, msg):
                if err is None:
                    history.complete(op_id, process, OK, "send",
                                     {"partition": partition, "value": value, "offset": msg.offset()})
                else:
                    history.complete(op_id, process, send_fate(err.name(), self.retries), "send",
                                     {"partition": partition, "value": value}, error=err.name())
            return report

        next_at = time.monotonic()
        while not self._stop_producing.is_set():
            value = next(self._values)
            partition = value % self.partitions
            op_id = history.invoke(process, "send", {"partition": partition, "value": value})
            try:
                producer.produce(self.topic, str(value).encode(), partition=partition,
                                 on_delivery=delivered(op_id, partition, value))
            except BufferError:
                history.complete(op_id, process, FAIL, "send", {"partition": partition, "value": value},
                                 error="_QUEUE_FULL")
            except KafkaException as e:
                name = error_name(e)
                history.complete(op_id, process, send_fate(name, self.retries), "send",
                                 {"partition": partition, "value": value}, error=name)
            next_at += interval
            producer.poll(0)
            while (remaining := next_at - time.monotonic()) > 0:
                producer.poll(remaining)  # returns early whenever it served a delivery report
            if -remaining > 1:  # far behind (a stall): do not burst to catch up
                next_at = time.monotonic()
        # Every message gets its report within message.timeout.ms; then close.
        deadline = time.monotonic() + self.message_timeout_ms / 1000 + 10
        while len(producer) and time.monotonic() < deadline:
            producer.poll(0.1)

    def _consume(self, index: int) -> None:
        for incarnation in itertools.count():
            if self._stop_consuming.is_set():
                return
            process = f"consumer-{index}.{incarnation}"
            try:
                self._consume_until_broken(process)
                return
            except Exception as e:
                log.info("%s broke: %r; starting another", process, e)
                time.sleep(0.5)

    def _consume_until_broken(self, process: str) -> None:
        consumer = Consumer(self._consumer_config(process))
        try:
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
            while not self._stop_consuming.is_set():
                op_id = self.history.invoke(process, "poll", None)
                try:
                    messages = consumer.consume(POLL_BATCH, timeout=POLL_TIMEOUT_S)
                except Exception as e:
                    self.history.complete(op_id, process, INFO, "poll", None, error=repr(e))
                    raise
                reads, errors = [], []
                for msg in messages:
                    if msg.error() is None:
                        reads.append([msg.partition(), msg.offset(), int(msg.value())])
                    else:
                        errors.append(msg.error().name())
                self.history.complete(op_id, process, OK, "poll",
                                      {"reads": reads, **({"errors": errors} if errors else {})})
        finally:
            consumer.close()

    # -- the final read ----------------------------------------------------------------------

    def final_read(self) -> None:
        """Every partition from its start to its high watermark, by one fresh consumer."""
        process = "final"
        op_id = self.history.invoke(process, "final-read", None)
        consumer = Consumer({**self._consumer_config("final"), "enable.partition.eof": True})
        reads, complete, error, ends = [], False, None, {}
        deadline = time.monotonic() + FINAL_READ_TIMEOUT_S
        try:
            for p in range(self.partitions):
                ends[p] = watermark_offsets(consumer, TopicPartition(self.topic, p), deadline)[1]
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
            positions = {p: 0 for p in range(self.partitions)}
            done = {p for p, high in ends.items() if high == 0}
            while len(done) < self.partitions and time.monotonic() < deadline:
                for msg in consumer.consume(POLL_BATCH, timeout=0.5):
                    p = msg.partition()
                    if msg.error() is None:
                        reads.append([p, msg.offset(), int(msg.value())])
                        positions[p] = msg.offset() + 1
                        if positions[p] >= ends[p]:
                            done.add(p)
                    elif msg.error().code() == KafkaError._PARTITION_EOF and msg.offset() >= ends[p]:
                        done.add(p)
            complete = len(done) == self.partitions
            if not complete:
                error = f"partitions {sorted(set(ends) - done)} not read to their end in {FINAL_READ_TIMEOUT_S}s"
        except Exception as e:
            error = repr(e)
        finally:
            consumer.close()
        self.history.complete(op_id, process, OK if reads or complete else INFO, "final-read",
                              {"reads": reads, "complete": complete, "high_watermarks": ends if complete else None},
                              error=error)

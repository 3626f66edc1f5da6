"""The transactional workload (`weir verify --transactional`): confluent-kafka transactional
producers and read_committed consumers.

Each producer runs transactions of `txn_size` unique values spread over the partitions; it commits
most of them and aborts one in `1 / abort_ratio` on purpose. One "txn" op per transaction:

- ok: commit_transaction returned: every value is committed.
- fail: abort_transaction returned (on purpose, or after an abortable error): none may be read.
- info: anything else (a commit that timed out, a fatal error, a producer that could not
  abort): the outcome is unknown. The producer is replaced by a new one with the same
  transactional id, whose InitProducerId fences the old one and ends its transaction.

Consumers and the final read are the plain workload's with isolation.level=read_committed.
"""

from __future__ import annotations

import random
import time

from confluent_kafka import KafkaException, Producer

from weir.verify.history import FAIL, INFO, OK
from weir.verify.workload import Workload, log, rdkafka_log

TXN_SIZE = 4
ABORT_RATIO = 0.2
TRANSACTION_TIMEOUT_MS = 15000
CALL_TIMEOUT_S = 15


class TransactionalWorkload(Workload):
    def __init__(self, *args, txn_size: int = TXN_SIZE, abort_ratio: float = ABORT_RATIO, seed: int = 0,
                 **kwargs) -> None:
        super().__init__(*args, idempotent=True, **kwargs)
        self.txn_size = txn_size
        self.abort_ratio = abort_ratio
        self.seed = seed

    def _consumer_config(self, name: str) -> dict:
        return {**super()._consumer_config(name), "isolation.level": "read_committed"}

    def _transactional_producer(self, process: str) -> Producer | None:
        """A producer whose InitProducerId succeeded (None once told to stop)."""
        while not self._stop_producing.is_set():
            producer = Producer({**self.connection, "transactional.id": f"weir-verify-{process}",
                                 "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, "linger.ms": 2,
                                 "message.timeout.ms": self.message_timeout_ms,
                                 "socket.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 1000,
                                 "metadata.max.age.ms": 3000, "reconnect.backoff.max.ms": 1000,
                                 "logger": rdkafka_log})
            try:
                producer.init_transactions(CALL_TIMEOUT_S)
                return producer
            except KafkaException as e:
                log.info("%s: init_transactions failed: %s; trying again", process, e.args[0].name())
                time.sleep(0.5)
        return None

    def _produce(self, process: str) -> None:
        history = self.history
        rng = random.Random(f"{self.seed}-{process}")
        interval = self.producer_count * self.txn_size / self.rate
        producer = self._transactional_producer(process)
        next_at = time.monotonic()
        while producer is not None and not self._stop_producing.is_set():
            writes = [[v % self.partitions, v] for v in (next(self._values) for _ in range(self.txn_size))]
            commit = rng.random() >= self.abort_ratio
            op_id = history.invoke(process, "txn", {"writes": writes, "commit": commit})
            offsets: list = []
            outcome, error = self._run_transaction(producer, writes, commit, offsets)
            history.complete(op_id, process, outcome, "txn", {"writes": writes, "commit": commit, "offsets": offsets},
                             error=error)
            if outcome == INFO:
                producer = self._transactional_producer(process)
            next_at += interval
            while (remaining := next_at - time.monotonic()) > 0:
                time.sleep(remaining)
            if -remaining > 1:  # far behind (a stall): do not burst to catch up
                next_at = time.monotonic()

    def _run_transaction(self, producer: Producer, writes, commit: bool, offsets: list) -> tuple[str, str | None]:
        def delivered(err, msg):
            if err is None:
                offsets.append([msg.partition(), msg.offset(), int(msg.value())])
        try:
            producer.begin_transaction()
            for partition, value in writes:
                producer.produce(self.topic, str(value).encode(), partition=partition, on_delivery=delivered)
            if commit:
                producer.commit_transaction(CALL_TIMEOUT_S)
                return OK, None
            producer.abort_transaction(CALL_TIMEOUT_S)
            return FAIL, "aborted on purpose"
        except KafkaException as e:
            error = e.args[0]
            if not error.txn_requires_abort():
                return INFO, error.name()
            try:
                producer.abort_transaction(CALL_TIMEOUT_S)
                return FAIL, error.name()
            except KafkaException as e2:
                return INFO, f"{error.name()}, then abort: {e2.args[0].name()}"
        except BufferError:
            return INFO, "_QUEUE_FULL"

"""A simulated broker's AlterPartition sender (weir/broker/isr_sender.py in production): the
messages and timers around production's outbox (weir/replication/isr_outbox.py). No controller, no
answer in time, or a refusal of the whole request: the outbox sends again after its backoff."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from weir.replication.isr_outbox import IsrOutbox, isr_change_result
from weir.zk.model import NO_LEADER


class SimIsrSender:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.outbox = IsrOutbox()
        self._woken_at: float | None = None  # the pending timer's time

    def submit(self, key, proposal) -> None:
        self.outbox.submit(key, proposal, self.broker.now)
        self._send()

    def withdraw(self, key) -> None:
        self.outbox.withdraw(key)

    def _send(self) -> None:
        broker = self.broker
        batch = self.outbox.take(broker.now)
        if batch is None:
            self._wake()
            return
        if broker.controller_id == NO_LEADER:
            self._answered(ErrorCode.not_controller, {})
            return
        broker.request(broker.controller_id, "alter", (broker.id, broker.zk.registration_zxid, batch),
                       self._answered, broker.settings.alter_partition_timeout_ms,
                       lambda: self._answered(ErrorCode.request_timed_out, {}))

    def _answered(self, error, answers) -> None:
        broker = self.broker
        if error:
            self.outbox.failed(broker.now)
        else:
            batch = self.outbox.answered(answers.keys(), broker.now)
            for key, (code, state) in answers.items():
                partition = broker.partitions.get(key)
                if partition is not None:
                    broker.act(partition, partition.on_isr_change_result(batch[key], isr_change_result(code, state),
                                                                         broker.now))
        self._send()

    def _wake(self) -> None:
        """A timer for the outbox's next due proposal, unless one comes sooner."""
        wake_at = self.outbox.wake_at()
        if self.outbox.in_flight is None and wake_at is not None and (
                self._woken_at is None or wake_at < self._woken_at):
            self._woken_at = wake_at
            self.broker.later(wake_at - self.broker.now, self._timer)

    def _timer(self) -> None:
        self._woken_at = None
        self._send()

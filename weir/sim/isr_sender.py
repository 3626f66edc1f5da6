"""A simulated broker's AlterPartition sender (weir/broker/isr_sender.py in production): each
leader's latest ISR proposal goes to the controller until it is answered; no answer → sent again,
NOT_CONTROLLER or no controller → sent again later to whoever is controller then. The partition
decides what an answer means (and whether to try again).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from weir.coordination.model import NO_LEADER
from weir.replication.leader import IsrChangeAccepted, IsrChangeRejected

RETRY_MS = 100


class SimIsrSender:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.outbox: dict = {}

    def submit(self, key, proposal) -> None:
        self.outbox[key] = proposal
        self._send(key, proposal)

    def withdraw(self, key) -> None:
        self.outbox.pop(key, None)

    def _send(self, key, proposal) -> None:
        broker = self.broker
        timeout_ms = broker.settings.alter_partition_timeout_ms
        if self.outbox.get(key) is not proposal:
            return
        if broker.controller_id == NO_LEADER:
            broker.later(timeout_ms, self._send, key, proposal)
            return
        broker.request(broker.controller_id, "alter", (key, broker.id, broker.zk.registration_zxid, proposal),
                       lambda error, state: self._answered(key, proposal, error, state), timeout_ms,
                       lambda: self._send(key, proposal))

    def _answered(self, key, proposal, error, state) -> None:
        broker = self.broker
        partition = broker.partitions.get(key)
        if error == ErrorCode.not_controller or partition is None:
            broker.later(RETRY_MS, self._send, key, proposal)
            return
        if self.outbox.get(key) is proposal:
            del self.outbox[key]
        result = (IsrChangeRejected(error) if error else
                  IsrChangeAccepted(state.leader_epoch, state.partition_epoch, frozenset(state.isr)))
        effects = partition.on_isr_change_result(proposal, result, broker.now)
        if effects.isr_proposal is not None:  # a retry, after a backoff
            self.outbox[key] = effects.isr_proposal
            broker.later(RETRY_MS, self._send, key, effects.isr_proposal)
            effects.isr_proposal = None
        broker.act(partition, effects)

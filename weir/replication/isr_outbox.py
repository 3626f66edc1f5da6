"""A broker's AlterPartition outbox: what its ISR-change sender decides, loop-free. Production's
isr_sender.py and weir sim's drive it; each only sends, waits and schedules.

- One request is in flight at a time. It carries every proposal that is due, one per partition.
- A newer proposal for a partition replaces an unsent one. A partition that changes role withdraws
  its proposal; the answer to one already in flight still goes to the partition, which knows
  whether the proposal is still its own.
- A request that fails whole (no answer, refused, no controller) sends its proposals again after
  the backoff, unless newer ones replaced them or they were withdrawn. So does an answer that
  leaves a proposal out.
- A proposal its partition hands back to send again (its retry after a retriable error) is the
  same object: it too waits the backoff (Kafka's AlterPartitionManager retries after a backoff).

Times are the outbox's own clock: production's monotonic milliseconds, weir sim's time.
"""

from __future__ import annotations

from weir.protocol.errors import ErrorCode
from weir.replication.leader import AlterPartitionProposal, IsrChangeAccepted, IsrChangeRejected

Key = tuple[str, int]

RETRY_BACKOFF_MS = 100


def isr_change_result(error: int, answer) -> IsrChangeAccepted | IsrChangeRejected:
    """What the controller's answer for one partition means: refused with `error`, or the state it
    wrote (`answer`'s leader_epoch, partition_epoch and isr: a response entry or a state)."""
    if error:
        return IsrChangeRejected(ErrorCode(error))
    return IsrChangeAccepted(answer.leader_epoch, answer.partition_epoch, frozenset(answer.isr))


class IsrOutbox:
    def __init__(self, backoff_ms: int = RETRY_BACKOFF_MS) -> None:
        self.backoff_ms = backoff_ms
        self.in_flight: dict[Key, AlterPartitionProposal] | None = None
        self._queued: dict[Key, AlterPartitionProposal] = {}
        self._due_ms: dict[Key, float] = {}
        self._sent: dict[Key, AlterPartitionProposal] = {}  # each partition's last sent: a retry is the same

    def submit(self, key: Key, proposal: AlterPartitionProposal, now_ms: float) -> None:
        self._queued[key] = proposal
        self._due_ms[key] = now_ms + self.backoff_ms if self._sent.get(key) is proposal else now_ms

    def withdraw(self, key: Key) -> None:
        self._queued.pop(key, None)
        self._due_ms.pop(key, None)
        self._sent.pop(key, None)

    def take(self, now_ms: float) -> dict[Key, AlterPartitionProposal] | None:
        """The proposals to send now, in one request; None while one is in flight or none is due."""
        if self.in_flight is not None:
            return None
        batch = {key: proposal for key, proposal in self._queued.items() if self._due_ms[key] <= now_ms}
        if not batch:
            return None
        for key, proposal in batch.items():
            del self._queued[key], self._due_ms[key]
            self._sent[key] = proposal
        self.in_flight = batch
        return batch

    def wake_at(self) -> float | None:
        """When `take` has something next, once no request is in flight (None: nothing queued)."""
        return min(self._due_ms.values(), default=None)

    def failed(self, now_ms: float) -> None:
        """The request in flight failed whole."""
        batch, self.in_flight = self._landed(), None
        self._send_again(batch, now_ms)

    def answered(self, answered: set[Key], now_ms: float) -> dict[Key, AlterPartitionProposal]:
        """The request in flight was answered for the partitions `answered`. Returns what it
        carried (the answers go to the partitions); the proposals it left out go again later."""
        batch, self.in_flight = self._landed(), None
        self._send_again({key: proposal for key, proposal in batch.items() if key not in answered}, now_ms)
        return batch

    def _landed(self) -> dict[Key, AlterPartitionProposal]:
        assert self.in_flight is not None, "an answer with no request in flight"
        return self.in_flight

    def _send_again(self, batch: dict[Key, AlterPartitionProposal], now_ms: float) -> None:
        for key, proposal in batch.items():
            if key not in self._queued and self._sent.get(key) is proposal:  # neither replaced nor withdrawn
                self._queued[key] = proposal
                self._due_ms[key] = now_ms + self.backoff_ms

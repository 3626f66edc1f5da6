"""A group's committed offsets, whatever its protocol: pure, the part of a group both the
classic `Group` and the consumer-protocol `ConsumerGroup` hold (Kafka's OffsetMetadataManager).

- A commit is visible once the ISR of `__consumer_offsets` has it; a record later in the log wins
  over an earlier one (`log_offset`), so a slow acknowledgement never undoes a newer commit.
- Transactional offsets (TxnOffsetCommit, KIP-98) are pending per producer id until the
  transaction's marker lands in the group's partition: a commit makes those that were written
  visible (unless a later record already holds a newer offset), an abort drops them. While a
  partition has pending offsets they do not expire, and OffsetFetch with require_stable answers
  UNSTABLE_OFFSET_COMMIT for it (KIP-447).
- Which offsets expire is the group's rule (its state and subscriptions); `_expired_among`
  applies it with a commit's own expire timestamp (OffsetCommit v1-v4 retention_time) first.
"""

from __future__ import annotations

from dataclasses import dataclass

FAR_FUTURE = 2**63 - 1


@dataclass
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    log_offset: int = -1  # where its record is in __consumer_offsets: a later record wins


class OffsetBook:
    """Mixed into a group: `offsets` and `pending_txn_offsets` and the rules on them."""

    def _init_offsets(self) -> None:
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        # producer id → its transaction's offsets, not yet visible (log_offset -1: not yet written)
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], CommittedOffset]] = {}

    def on_offsets_committed(self, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """A commit reached the ISR: it is visible from now on. A record later in the log wins."""
        for key, committed in offsets.items():
            current = self.offsets.get(key)
            if current is None or committed.log_offset >= current.log_offset:
                self.offsets[key] = committed

    # -- transactional offsets (KIP-98, KIP-447) ----------------------------------------------

    def prepare_txn_offsets(self, producer_id: int, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """Kafka's prepareTxnOffsetCommit: pending from now on, before they are written."""
        self.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)

    def on_txn_offsets_written(self, producer_id: int, offsets: dict[tuple[str, int], CommittedOffset],
                               log_offsets: dict[tuple[str, int], int]) -> None:
        """The prepared `offsets` reached the ISR at `log_offsets` (unless completed or replaced meanwhile)."""
        pending = self.pending_txn_offsets.get(producer_id, {})
        for key, committed in offsets.items():
            if pending.get(key) is committed:
                committed.log_offset = log_offsets[key]

    def on_txn_offsets_failed(self, producer_id: int, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """Kafka's failPendingTxnOffsetCommit: the write failed, the prepared offsets are not pending."""
        pending = self.pending_txn_offsets.get(producer_id, {})
        for key, committed in offsets.items():
            if pending.get(key) is committed:
                del pending[key]
        if not pending:
            self.pending_txn_offsets.pop(producer_id, None)

    def complete_txn_offsets(self, producer_id: int, committed: bool) -> None:
        """Kafka's completePendingTxnOffsetCommit: the marker of the producer's transaction landed.
        A commit makes its written offsets visible unless a later record holds a newer one."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if committed:
            self.on_offsets_committed({key: c for key, c in pending.items() if c.log_offset >= 0})

    def has_pending_offsets(self, key: tuple[str, int]) -> bool:
        return any(key in pending for pending in self.pending_txn_offsets.values())

    # -- expiry and deletion --------------------------------------------------------------------

    def _expired_among(self, now_ms: int, retention_ms: int, kept_topics: frozenset[str],
                       since: int | None) -> list[tuple[str, int]]:
        """The offsets past their time: a commit's own expire timestamp, else `retention_ms` after
        `since` (an Empty classic group: when it became Empty), else after their commit. Offsets of
        `kept_topics`, and those a transaction may still replace, are kept (Kafka's removeExpiredOffsets)."""
        out = []
        for key, committed in self.offsets.items():
            if key[0] in kept_topics or self.has_pending_offsets(key):
                continue
            if committed.expire_timestamp != -1:
                expired = committed.expire_timestamp <= now_ms
            elif since is not None:
                expired = since + retention_ms <= now_ms
            else:
                expired = committed.commit_timestamp + retention_ms <= now_ms
            if expired:
                out.append(key)
        return out

    def remove_offsets(self, keys, log_offset: int = FAR_FUTURE) -> None:
        """Forget offsets whose tombstone is at `log_offset` (unless a later commit replaced them)."""
        for key in keys:
            current = self.offsets.get(key)
            if current is not None and current.log_offset < log_offset:
                del self.offsets[key]

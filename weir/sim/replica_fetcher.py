"""A simulated broker's follower loop (weir/broker/replica_fetcher.py in production): one request
at a time per followed partition, to its leader. The partition decides what to ask
(OffsetForLeaderEpoch or Fetch) and what an answer means; this only sends, waits and schedules.
Answers go to the partition's current follower, whose core matches them to what it asked.
"""

from __future__ import annotations

from weir.replication.follower import AppendRecords, Backoff, SendOffsetForLeaderEpoch


class SimFetcher:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.settings = broker.settings

    def start(self, partition) -> None:
        self.broker.later(0, self._tick, partition.key, partition.follower)

    def _tick(self, key, follower) -> None:
        broker, s = self.broker, self.settings
        partition = broker.partitions.get(key)
        if partition is None or partition.follower is not follower:
            return
        request = partition.next_fetch_request()

        def retry():
            broker.later(s.replica_fetch_backoff_ms, self._tick, key, follower)
        if isinstance(request, SendOffsetForLeaderEpoch):
            broker.request(request.leader_id, "ofle", (key, request.current_leader_epoch, request.leader_epoch),
                           lambda answer: self._on_epoch_answer(partition, follower, request, answer),
                           s.fetch_timeout_ms, retry)
        else:
            broker.request(request.leader_id, "fetch", (key, request.fetch_offset, request.current_leader_epoch,
                                                        broker.zk.registration_zxid),
                           lambda *answer: self._on_fetched(partition, follower, request, *answer),
                           s.fetch_timeout_ms, retry)

    def _on_epoch_answer(self, partition, follower, request, answer) -> None:
        if partition.follower is not None:
            backoff = partition.on_epoch_answer(request, answer)
            self.broker.later(self.settings.replica_fetch_backoff_ms if backoff else 0, self._tick, partition.key,
                              follower)

    def _on_fetched(self, partition, follower, request, error, leader_hw, batches) -> None:
        if partition.follower is not None:
            decision = partition.on_fetched(request, error, leader_hw, batches, batches, self.broker.now)
            delay = {AppendRecords: 0, Backoff: self.settings.replica_fetch_backoff_ms}.get(
                type(decision), self.settings.replica_fetch_wait_ms)
            self.broker.later(delay, self._tick, partition.key, follower)

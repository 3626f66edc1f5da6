"""A simulated broker's follower loop (weir/broker/replica_fetcher.py in production): one request
at a time per followed partition, to its leader. The partition decides what to ask
(OffsetForLeaderEpoch or Fetch) and what an answer means; this only sends, waits and schedules.
Answers go to the partition's current follower, whose core matches them to what it asked.

Fetches run in a fetch session (KIP-227) per partition, with production's FetchSessionHandler: a
request names the partition only when its position moved, and the leader answers only with news.
"""

from __future__ import annotations

from weir.broker.fetch_session_handler import FetchSessionHandler
from weir.replication.follower import AppendRecords, Backoff, SendOffsetForLeaderEpoch


class SimFetcher:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.settings = broker.settings
        self.sessions: dict = {}  # follower core -> its FetchSessionHandler

    def start(self, partition) -> None:
        self.sessions[partition.follower] = FetchSessionHandler()
        self.broker.later(0, self._tick, partition.key, partition.follower)

    def _tick(self, key, follower) -> None:
        broker, s = self.broker, self.settings
        partition = broker.partitions.get(key)
        if partition is None or partition.follower is not follower:
            self.sessions.pop(follower, None)
            return
        request = partition.next_fetch_request()

        def retry():
            broker.later(s.replica_fetch_backoff_ms, self._tick, key, follower)
        if isinstance(request, SendOffsetForLeaderEpoch):
            broker.request(request.leader_id, "ofle", (key, request.current_leader_epoch, request.leader_epoch),
                           lambda answer: self._on_epoch_answer(partition, follower, request, answer),
                           s.fetch_timeout_ms, retry)
            return
        session = self.sessions[follower]
        ask = session.build({key: (request.current_leader_epoch, request.fetch_offset, partition.log.log_start_offset)})

        def lost():
            session.on_failure()
            retry()
        broker.request(request.leader_id, "fetch", (key, request.fetch_offset, request.current_leader_epoch,
                                                    broker.zk.registration_zxid, partition.log.log_start_offset,
                                                    ask.session_id, ask.epoch, key in ask.send),
                       lambda *answer: self._on_fetched(partition, follower, request, session, *answer),
                       s.fetch_timeout_ms, lost)

    def _on_epoch_answer(self, partition, follower, request, answer) -> None:
        if partition.follower is not None:
            backoff = partition.on_epoch_answer(request, answer)
            self.broker.later(self.settings.replica_fetch_backoff_ms if backoff else 0, self._tick, partition.key,
                              follower)

    def _on_fetched(self, partition, follower, request, session, session_error, session_id, answer) -> None:
        if not session.on_answer(session_error, session_id):
            self.broker.later(0, self._tick, partition.key, follower)  # again, with a full request
            return
        decision = None
        if partition.follower is not None and answer is not None:  # None: the session had no news
            error, leader_hw, batches = answer
            decision = partition.on_fetched(request, error, leader_hw, batches, batches, self.broker.now)
        delay = {AppendRecords: 0, Backoff: self.settings.replica_fetch_backoff_ms}.get(
            type(decision), self.settings.replica_fetch_wait_ms)
        self.broker.later(delay, self._tick, partition.key, follower)

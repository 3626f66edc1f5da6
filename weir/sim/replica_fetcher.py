"""A simulated broker's followers (weir/broker/replica_fetcher.py in production): one fetcher per
leader, fetching every partition followed from it in one request at a time, in one fetch session
(KIP-227) with production's FetchSessionHandler. Each round, as production's: the partitions that
truncate ask their OffsetForLeaderEpoch together first, then the others fetch; a partition whose
answer says back off sits out the rounds for replica.fetch.backoff.ms (less while the leader
catches up: `backoff_ms`). The partitions decide what to ask and what an answer means; this only
sends, waits and schedules.

The next round starts as soon as an answer is handled: the leader holds a fetch that finds nothing
new (its long poll), as production's does.
"""

from __future__ import annotations

from weir.broker.fetch_session_handler import FetchSessionHandler
from weir.replication.follower import Backoff, SendFetch, SendOffsetForLeaderEpoch, backoff_ms


class SimFetcher:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.fetchers: dict[int, LeaderFetcher] = {}  # leader id -> its fetcher

    def start(self, partition) -> None:
        """`partition` now follows: the fetcher of its leader takes it. The fetcher of a leader it
        followed before drops it at its next round."""
        leader_id = partition.follower.leader_id
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = LeaderFetcher(self.broker, leader_id)
        fetcher.add(partition)


class LeaderFetcher:
    def __init__(self, broker, leader_id: int) -> None:
        self.broker = broker
        self.settings = broker.settings
        self.leader_id = leader_id
        self.partitions: dict = {}  # key -> partition
        self.backoff_until: dict = {}  # key -> simulated time
        self.session = FetchSessionHandler()
        self.running = False

    def add(self, partition) -> None:
        self.partitions[partition.key] = partition
        self.backoff_until.pop(partition.key, None)
        if not self.running:
            self.running = True
            self.broker.later(0, self._round)

    def _round(self) -> None:
        broker = self.broker
        self.partitions = {key: p for key in self.partitions if (p := self._current(key)) is not None}
        if not self.partitions:
            self.running = False
            return
        now = broker.now
        ready = [p for key, p in sorted(self.partitions.items()) if self.backoff_until.get(key, 0) <= now]
        if not ready:
            broker.later(min(self.backoff_until[key] for key in self.partitions) - now, self._round)
            return
        asks = {p.key: p.next_fetch_request() for p in ready}
        truncating = [p for p in ready if isinstance(asks[p.key], SendOffsetForLeaderEpoch)]
        fetching = [p for p in ready if isinstance(asks[p.key], SendFetch)]
        if not truncating:
            self._fetch(fetching, asks)
            return
        questions = [(p.key, asks[p.key].current_leader_epoch, asks[p.key].leader_epoch) for p in truncating]
        broker.request(self.leader_id, "ofle", (questions,),
                       lambda answers: self._on_epoch_answers(asks, answers, fetching),
                       self.settings.fetch_timeout_ms, self._retry)

    def _on_epoch_answers(self, asks, answers, fetching) -> None:
        for key, answer in answers:
            partition = self._current(key)
            if partition is not None and isinstance(asks.get(key), SendOffsetForLeaderEpoch):
                backoff = partition.on_epoch_answer(asks[key], answer)
                if backoff is not None:
                    self._back_off(key, backoff.error)
        self._fetch([p for p in fetching if self._current(p.key) is p], asks)

    def _fetch(self, fetching, asks) -> None:
        broker = self.broker
        if not fetching:
            broker.later(0, self._round)
            return
        ask = self.session.build({p.key: (asks[p.key].current_leader_epoch, asks[p.key].fetch_offset,
                                          p.log.log_start_offset) for p in fetching})

        def lost():
            self.session.on_failure()
            self._retry()
        broker.request(self.leader_id, "fetch", (broker.zk.registration_zxid, ask.session_id, ask.epoch,
                                                 [(key, *fields) for key, fields in ask.send.items()], ask.forgotten),
                       lambda *answer: self._on_fetched(fetching, asks, *answer), self.settings.fetch_timeout_ms, lost)

    def _on_fetched(self, fetching, asks, error, session_id, answers) -> None:
        broker = self.broker
        if not self.session.on_answer(error, session_id):
            broker.later(0, self._round)  # again, with a full request
            return
        if error:  # every partition of the request got it
            for p in fetching:
                self._back_off(p.key, error)
            broker.later(0, self._round)
            return
        for key, partition_error, leader_hw, leader_log_start, batches in answers:  # only those with news
            partition = self._current(key)
            if partition is None or not isinstance(asks.get(key), SendFetch):
                continue
            decision = partition.on_fetched(asks[key], partition_error, leader_hw, batches, batches or (),
                                            broker.now, leader_log_start)
            if isinstance(decision, Backoff):
                self._back_off(key, decision.error)
        broker.later(0, self._round)

    def _current(self, key):
        """The partition of `key` if it still follows this leader (perhaps in a newer epoch, whose
        follower core then judges what an older answer is worth, as in production)."""
        partition = self.partitions.get(key)
        if (partition is None or self.broker.partitions.get(key) is not partition or partition.follower is None
                or partition.follower.leader_id != self.leader_id):
            return None
        return partition

    def _back_off(self, key, error) -> None:
        self.backoff_until[key] = self.broker.now + backoff_ms(error, self.settings.replica_fetch_backoff_ms)

    def _retry(self) -> None:
        self.broker.later(self.settings.replica_fetch_backoff_ms, self._round)

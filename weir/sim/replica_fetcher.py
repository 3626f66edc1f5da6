"""A simulated broker's followers (weir/broker/replica_fetcher.py in production): one fetcher per
leader, fetching every partition followed from it in one request at a time, in one fetch session
(KIP-227). Every decision - what a round asks, what an answer means, who backs off - is
production's FetcherCore's; this only sends, waits and schedules.

The next round starts as soon as an answer is handled: the leader holds a fetch that finds nothing
new (its long poll), as production's does.
"""

from __future__ import annotations

from weir.replication.fetcher_core import FetcherCore, FetchRound


class SimFetcher:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.fetchers: dict[int, LeaderFetcher] = {}  # leader id -> its fetcher

    def on_role_change(self, partition) -> None:
        """`partition` changed role (production's ReplicaFetchers.on_role_change): the fetchers of
        other leaders drop it, and if it follows, the fetcher of its leader takes it."""
        leader_id = partition.follower.leader_id if partition.follower is not None else None
        for other, fetcher in self.fetchers.items():
            if other != leader_id:
                fetcher.core.remove(partition.key)
        if leader_id is None:
            return
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = LeaderFetcher(self.broker, leader_id)
        fetcher.add(partition)


class LeaderFetcher:
    def __init__(self, broker, leader_id: int) -> None:
        self.broker = broker
        self.settings = broker.settings
        self.leader_id = leader_id
        self.core = FetcherCore(leader_id, lambda: self.settings.replica_fetch_backoff_ms, lambda: broker.now,
                                isolate_failures=False)
        self.running = False

    def add(self, partition) -> None:
        self.core.add(partition)
        if not self.running:
            self.running = True
            self.broker.later(0, self._round)

    def _round(self) -> None:
        broker = self.broker
        round_ = self.core.next_round()
        if round_ is None:
            self.running = False
        elif not isinstance(round_, FetchRound):
            broker.later(round_, self._round)
        elif not round_.truncating:
            self._fetch(round_)
        else:
            questions = [(p.key, round_.asks[p.key].current_leader_epoch, round_.asks[p.key].leader_epoch)
                         for p in round_.truncating]
            broker.request(self.leader_id, "ofle", (questions,),
                           lambda answers: self._on_epoch_answers(round_, answers), self.settings.fetch_timeout_ms,
                           self._retry)

    def _on_epoch_answers(self, round_: FetchRound, answers) -> None:
        for key, answer in answers:
            self.core.on_epoch_answer(round_, key, answer)
        round_.fetching = self.core.still_fetching(round_)
        self._fetch(round_)

    def _fetch(self, round_: FetchRound) -> None:
        broker, fetching = self.broker, round_.fetching
        if not fetching:
            broker.later(0, self._round)
            return
        ask = self.core.session.build({p.key: (round_.asks[p.key].current_leader_epoch, round_.asks[p.key].fetch_offset,
                                               p.log.log_start_offset) for p in fetching})

        def lost():
            self.core.on_request_failed()
            self._retry()
        broker.request(self.leader_id, "fetch", (broker.zk.registration_zxid, ask.session_id, ask.epoch,
                                                 [(key, *fields) for key, fields in ask.send.items()], ask.forgotten),
                       lambda *answer: self._on_fetched(round_, *answer), self.settings.fetch_timeout_ms, lost)

    def _on_fetched(self, round_: FetchRound, error, session_id, answers) -> None:
        if self.core.on_fetch_answer(round_.fetching, error, session_id):
            for key, partition_error, leader_hw, leader_log_start, batches in answers:  # only those with news
                self.core.on_partition_answer(round_, key, partition_error, leader_hw, batches, batches or (),
                                              self.broker.now, leader_log_start)
        self.broker.later(0, self._round)

    def _retry(self) -> None:
        self.broker.later(self.settings.replica_fetch_backoff_ms, self._round)

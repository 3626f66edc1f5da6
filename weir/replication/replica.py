"""A follower replica as its leader sees it: how far it has fetched, and since when it is caught up.

Rules owned here (Kafka's Replica.updateFetchState and isCaughtUp):

- A follower's fetch at offset `o` tells the leader that the follower's LEO is `o`: it has every
  record below `o`, and asks for the next one.
- lastCaughtUpTime: the latest time at which the follower was known to have every record the leader
  had. After a fetch at `now`:
    * if `o` >= the leader's LEO now, the follower is caught up now: lastCaughtUpTime = now;
    * else if `o` >= the leader's LEO at the follower's *previous* fetch, the follower had then
      everything the leader had then: lastCaughtUpTime = time of the previous fetch;
    * else it stays. It never moves backwards.
  The second case is what keeps a follower of a busy leader in the ISR: under steady produce it is
  never exactly at the LEO, yet every fetch brings it to where the leader was one fetch ago.
- A follower is caught up if its LEO equals the leader's LEO, or if it was caught up within
  `replica.lag.time.max.ms`. Out of sync is the negation: LEO behind and
  now - lastCaughtUpTime > replica.lag.time.max.ms.
- A new leader does not know where its followers are: their LEOs become unknown (-1), and an
  ISR member is given the benefit of the doubt (caught up "now") so that it is not dropped before
  it has had a chance to fetch.
- BROKER EPOCHS (KIP-903). A fetch names the incarnation of the follower that sent it (its broker
  epoch: the registration's czxid). Once a newer incarnation has fetched, a fetch of an older one
  (a late packet of a process that restarted, maybe without its tail) is refused, and the epoch
  of the latest incarnation goes with the follower into ISR proposals, for the controller to check.

Theory of operation: one small mutable record per follower, owned by the leader's
`LeaderPartition`, updated only by `update_fetch_state` and `reset_for_leadership`.
"""

from __future__ import annotations

UNKNOWN_OFFSET = -1
NO_BROKER_EPOCH = -1  # a fetch that does not say (Fetch before v15)


class FollowerReplica:
    __slots__ = ("broker_id", "log_end_offset", "last_fetch_leader_log_end_offset", "last_fetch_time_ms",
                 "last_caught_up_time_ms", "broker_epoch", "log_start_offset")

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_time_ms = 0
        self.last_caught_up_time_ms = 0
        self.broker_epoch = NO_BROKER_EPOCH  # of the incarnation whose fetch was seen last
        self.log_start_offset = UNKNOWN_OFFSET  # as its last fetch said (DeleteRecords waits for it)

    def __repr__(self) -> str:
        return (f"FollowerReplica({self.broker_id}, leo={self.log_end_offset}, "
                f"caught_up_at={self.last_caught_up_time_ms})")

    def update_fetch_state(self, fetch_offset: int, now_ms: int, leader_log_end_offset: int,
                           broker_epoch: int = NO_BROKER_EPOCH) -> None:
        """Record a fetch at `fetch_offset` received at `now_ms` while the leader's LEO was
        `leader_log_end_offset`, sent by the follower's incarnation `broker_epoch` (Kafka's
        Replica.updateFetchState; KIP-903)."""
        assert 0 <= fetch_offset <= leader_log_end_offset, (fetch_offset, leader_log_end_offset)
        assert not self.is_stale_epoch(broker_epoch), "a fetch of an older incarnation is refused first"
        if broker_epoch != NO_BROKER_EPOCH:
            self.broker_epoch = broker_epoch
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset >= 0:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms

    def note_quiet_fetches(self, last_ms: int) -> None:
        """Fetches up to `last_ms` that a fetch session took for it without a visit, each at the
        LEO it had shown, which stayed the leader's LEO (fetch_sessions.py's quiet partitions):
        each is timed as `update_fetch_state` times one at the leader's LEO."""
        self.last_fetch_time_ms = max(self.last_fetch_time_ms, last_ms)
        self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, last_ms)

    def is_stale_epoch(self, broker_epoch: int) -> bool:
        """A fetch sent by an older incarnation of the follower than one already seen (KIP-903)."""
        return broker_epoch != NO_BROKER_EPOCH and broker_epoch < self.broker_epoch

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        """At the leader's LEO, or was there within replica.lag.time.max.ms."""
        return (self.log_end_offset == leader_log_end_offset
                or now_ms - self.last_caught_up_time_ms <= replica_lag_time_max_ms)

    def reset_for_leadership(self, now_ms: int, *, in_isr: bool) -> None:
        """A new leadership (new leader or new leader epoch): forget what was learned under the old
        one; an ISR member counts as caught up now (Kafka's resetReplicaState)."""
        self.log_end_offset = self.log_start_offset = UNKNOWN_OFFSET
        self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_time_ms = 0
        self.last_caught_up_time_ms = now_ms if in_isr else 0

"""The leader side of a partition: ISR, high watermark, and the checks behind acks=all.

Rules owned here (Kafka's Partition: maybeIncrementLeaderHW, maybeShrinkIsr, maybeExpandIsr,
checkEnoughReplicasReachOffset; KIP-497 for ISR changes through the controller):

- HIGH WATERMARK. HW = min LEO over the leader, the *maximal* ISR, and the followers about to
  join it: those caught up (replica.py) whose broker is alive (Kafka's maybeIncrementLeaderHW,
  shouldWaitForReplicaToJoinIsr). Without the last, a follower catching up on a leader that is
  its whole ISR never reaches the HW under steady produce (the HW is the leader's LEO, a fetch
  brings the follower to where that LEO was one fetch ago) and never rejoins the ISR. The HW only
  moves forward, and it does not move while the *committed* ISR is smaller than the effective
  minimum, min(min.insync.replicas, replication factor): with fewer copies than the topic demands,
  nothing new becomes visible to consumers (Kafka's isUnderMinIsr check, from KIP-966).
  Invariant: log_start <= HW <= leader LEO, and HW <= the LEO of every maximal-ISR member whose
  LEO is known (a member joins only with LEO >= HW, and LEOs only grow while we lead).
- REGRESSED MEMBERS. A fetch from an ISR member below the LEO it already showed us (it restarted
  without its tail) is refused until the member has left the ISR.
- ISR SHRINK. A follower in the ISR that is not caught up (replica.py) is proposed for removal.
  The leader never removes itself.
- ISR EXPAND. A follower outside the ISR whose broker is alive (KIP-841; ZooKeeper mode: it is
  registered, the controller checks it is not shutting down) is proposed for addition once its
  LEO >= HW and >= the start offset of the current leader epoch. The second condition matters: a follower whose LEO
  passed the HW but which still holds records of an older epoch beyond the current epoch's start
  has not yet truncated them away, and must not count towards commitment.
- ISR CHANGES GO THROUGH THE CONTROLLER (AlterPartition, KIP-497). The leader proposes
  (new ISR, leader epoch, partition epoch) and waits; at most one proposal is in flight. While it
  is in flight the *maximal* ISR = committed ISR | proposed ISR is used for the HW and for acks=all
  completion: a replica being added must already count (it may be committed any moment and then
  be elected), a replica being removed must still count (the removal may be refused).
  The *committed* ISR is used for every min.insync.replicas check: only what the controller has
  accepted is a promise about who holds the data.
- CONTROLLER ANSWERS. Accepted (with the committed ISR and the new partition epoch) -> committed.
  OPERATION_NOT_ATTEMPTED / INELIGIBLE_REPLICA -> back to the last committed state, free to
  propose again. FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION / UNKNOWN_TOPIC_OR_PARTITION, or an
  accepted answer naming another leader epoch -> our view is stale: stay pending (no new
  proposal) until new partition state arrives (`on_partition_state`). Any other error -> resend
  the same proposal (the shell backs off).
- acks=all BEFORE APPEND: rejected with NOT_ENOUGH_REPLICAS if the committed ISR is below the
  effective minimum.

Theory of operation: one `LeaderPartition` per partition this broker leads, created by
`become_leader` for each new leadership. The shell feeds it events - the leader appended
(`on_leader_append`), a follower fetched (`on_follower_fetch`), the ISR timer fired
(`maybe_shrink_isr`), the controller answered (`on_isr_change_result`), new partition state
arrived (`on_partition_state`), the live brokers changed (`on_live_brokers`) - and acts on what they return: a proposal to send to the
controller, and whether the HW advanced (then: wake parked produces and fetches, see
produce_purgatory.py). It never reads a clock: every time is a `now_ms` argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from weir.replication.replica import NO_BROKER_EPOCH, UNKNOWN_OFFSET, FollowerReplica


class LeaderEpochHistory(Protocol):
    """What the replication core needs of a leader-epoch cache (weir.log.LeaderEpochCache has it).
    Persistence, if any, is the cache's business: the core only calls these."""

    @property
    def latest_epoch(self) -> int: ...

    def assign(self, epoch: int, start_offset: int) -> None: ...

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]: ...


@dataclass(frozen=True)
class ReplicationConfig:
    """Kafka's names and defaults."""
    min_insync_replicas: int = 1  # min.insync.replicas
    replica_lag_time_max_ms: int = 30_000  # replica.lag.time.max.ms

    def __post_init__(self) -> None:
        assert self.min_insync_replicas >= 1 and self.replica_lag_time_max_ms >= 0


@dataclass(frozen=True)
class AlterPartitionProposal:
    """An ISR change for the controller to accept or refuse, fenced by both epochs."""
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: frozenset[int]
    is_expansion: bool
    # (member, broker epoch of its latest incarnation seen fetching, or -1) for the followers in
    # new_isr (AlterPartition v3's NewIsrWithEpochs, KIP-903): the controller refuses to add one
    # whose epoch is not its current registration's
    broker_epochs: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class IsrChangeAccepted:
    """The controller committed an ISR: the state as it now stands in the metadata store."""
    leader_epoch: int
    partition_epoch: int
    isr: frozenset[int]


@dataclass(frozen=True)
class IsrChangeRejected:
    error: ErrorCode


@dataclass(frozen=True)
class FollowerFetchOutcome:
    """error: none, or the error to answer the fetch with (the state is then unchanged).
    high_watermark_advanced: wake parked produces/fetches. alter_partition: send to controller."""
    error: ErrorCode
    high_watermark_advanced: bool = False
    alter_partition: AlterPartitionProposal | None = None


@dataclass(frozen=True)
class IsrChangeOutcome:
    """high_watermark_advanced: wake parked produces. retry: resend this proposal after a backoff.
    awaiting_metadata: our view is stale; no ISR change until `on_partition_state`."""
    high_watermark_advanced: bool = False
    retry: AlterPartitionProposal | None = None
    awaiting_metadata: bool = False


@dataclass(frozen=True)
class ReplicationStatus:
    """What parked produces depend on (produce_purgatory.py). leader_epoch None: not the leader."""
    leader_epoch: int | None
    high_watermark: int
    under_min_isr: bool


def is_alive(live_brokers: frozenset[int] | None, broker_id: int) -> bool:
    """Whether `broker_id` is registered; every broker counts as alive while `live_brokers` is
    not known (None)."""
    return live_brokers is None or broker_id in live_brokers


# Errors that say "your view of the partition is stale": wait for new partition state.
_STALE_VIEW_ERRORS = frozenset({ErrorCode.fenced_leader_epoch, ErrorCode.invalid_update_version,
                                ErrorCode.unknown_topic_or_partition})
# Errors that say "not done, nothing changed": forget the proposal.
_NOT_APPLIED_ERRORS = frozenset({ErrorCode.operation_not_attempted, ErrorCode.ineligible_replica})


class LeaderPartition:
    def __init__(self, broker_id: int, replicas: tuple[int, ...], isr: frozenset[int], leader_epoch: int,
                 partition_epoch: int, log_end_offset: int, high_watermark: int, now_ms: int,
                 config: ReplicationConfig, live_brokers: frozenset[int] | None = None) -> None:
        assert broker_id in replicas, (broker_id, replicas)
        assert broker_id in isr, "a leader must be in its ISR"
        assert isr <= set(replicas), (isr, replicas)
        assert 0 <= high_watermark <= log_end_offset, (high_watermark, log_end_offset)
        self.broker_id = broker_id
        self.replicas = tuple(replicas)
        self.config = config
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.leader_epoch_start_offset = log_end_offset
        self.log_end_offset = log_end_offset
        self.high_watermark = high_watermark
        self.committed_isr = frozenset(isr)
        self.pending: AlterPartitionProposal | None = None
        self.awaiting_metadata = False
        self.live_brokers = live_brokers  # None: not known, every follower counts as alive
        self.followers = {r: FollowerReplica(r) for r in replicas if r != broker_id}
        for follower in self.followers.values():
            follower.reset_for_leadership(now_ms, in_isr=follower.broker_id in isr)

    @classmethod
    def become_leader(cls, broker_id: int, replicas: tuple[int, ...], isr: frozenset[int], leader_epoch: int,
                      partition_epoch: int, log_end_offset: int, high_watermark: int, now_ms: int,
                      epochs: LeaderEpochHistory, config: ReplicationConfig = ReplicationConfig(),
                      live_brokers: frozenset[int] | None = None) -> "LeaderPartition":
        """A new leadership: the leader epoch starts at our LEO, recorded in the epoch cache so
        that OffsetForLeaderEpoch can tell followers where the previous epoch ended (KIP-101)."""
        epochs.assign(leader_epoch, log_end_offset)
        partition = cls(broker_id, replicas, isr, leader_epoch, partition_epoch, log_end_offset, high_watermark,
                        now_ms, config, live_brokers)
        partition.maybe_increment_high_watermark(now_ms)
        return partition

    # ----- views

    @property
    def maximal_isr(self) -> frozenset[int]:
        """KIP-497: while a change is in flight, everyone in either the committed or the proposed
        ISR counts for the HW and for acks=all."""
        if self.pending is None:
            return self.committed_isr
        return self.committed_isr | self.pending.new_isr

    @property
    def effective_min_isr(self) -> int:
        return min(self.config.min_insync_replicas, len(self.replicas))

    @property
    def is_under_min_isr(self) -> bool:
        return len(self.committed_isr) < self.effective_min_isr

    def status(self) -> ReplicationStatus:
        return ReplicationStatus(self.leader_epoch, self.high_watermark, self.is_under_min_isr)

    # ----- rules

    def check_acks_all(self) -> ErrorCode:
        """acks=all, before the append: the committed ISR must hold at least the effective minimum."""
        return ErrorCode.not_enough_replicas if self.is_under_min_isr else ErrorCode.none

    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """HW = min LEO over the leader, the maximal ISR and the followers about to join it;
        forward only; frozen while the committed ISR is below the effective minimum. Returns
        whether it moved."""
        if self.is_under_min_isr:
            return False
        new_hw = self.log_end_offset
        maximal_isr = self.maximal_isr
        for replica_id, follower in self.followers.items():
            if replica_id in maximal_isr or self._about_to_join_isr(follower, now_ms):
                new_hw = min(new_hw, follower.log_end_offset)
        if new_hw <= self.high_watermark:
            return False
        self.high_watermark = new_hw
        assert self.high_watermark <= self.log_end_offset, "HW beyond the leader's LEO"
        return True

    def _about_to_join_isr(self, follower: FollowerReplica, now_ms: int) -> bool:
        """A follower outside the ISR that the HW waits for: caught up and alive. One whose LEO
        this leadership has not seen is not (Kafka's lastCaughtUpTime 0 says so, but the
        simulator's clock starts at 0)."""
        return (follower.log_end_offset != UNKNOWN_OFFSET and self.is_alive(follower.broker_id)
                and follower.is_caught_up(self.log_end_offset, now_ms, self.config.replica_lag_time_max_ms))

    def is_alive(self, broker_id: int) -> bool:
        return is_alive(self.live_brokers, broker_id)

    def maybe_shrink_isr(self, now_ms: int) -> AlterPartitionProposal | None:
        """Propose removing every ISR follower that is out of sync (replica.lag.time.max.ms).
        The shell calls this on a timer (Kafka: every replica.lag.time.max.ms / 2)."""
        if self.pending is not None or self.awaiting_metadata:
            return None
        out_of_sync = frozenset(
            r for r in self.committed_isr
            if r != self.broker_id and not self.followers[r].is_caught_up(
                self.log_end_offset, now_ms, self.config.replica_lag_time_max_ms))
        if not out_of_sync:
            return None
        return self._propose(self.committed_isr - out_of_sync, is_expansion=False)

    def maybe_expand_isr(self, replica_id: int) -> AlterPartitionProposal | None:
        """Propose adding a follower whose LEO reached both the HW and the start of the current
        leader epoch."""
        if (self.pending is not None or self.awaiting_metadata or replica_id in self.committed_isr
                or not self.is_alive(replica_id)):
            return None
        follower = self.followers[replica_id]
        if (follower.log_end_offset < self.high_watermark
                or follower.log_end_offset < self.leader_epoch_start_offset):
            return None
        return self._propose(self.committed_isr | {replica_id}, is_expansion=True)

    def _propose(self, new_isr: frozenset[int], *, is_expansion: bool) -> AlterPartitionProposal:
        assert self.pending is None, "one ISR change in flight at a time"
        assert self.broker_id in new_isr, "the leader never leaves its own ISR"
        epochs = tuple((r, self.followers[r].broker_epoch) for r in sorted(new_isr) if r in self.followers)
        self.pending = AlterPartitionProposal(self.broker_id, self.leader_epoch, self.partition_epoch, new_isr,
                                              is_expansion, epochs)
        return self.pending

    # ----- events

    def on_leader_append(self, log_end_offset: int, now_ms: int) -> bool:
        """The leader appended; `log_end_offset` is its new LEO. Returns whether the HW moved
        (it does when the leader is the whole maximal ISR)."""
        assert log_end_offset >= self.log_end_offset, "a leader's log never shrinks"
        self.log_end_offset = log_end_offset
        return self.maybe_increment_high_watermark(now_ms)

    def on_live_brokers(self, live_brokers: frozenset[int], now_ms: int) -> bool:
        """The registered brokers changed: a follower whose broker went no longer holds the HW
        back. Returns whether the HW moved."""
        self.live_brokers = live_brokers
        return self.maybe_increment_high_watermark(now_ms)

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int,
                          broker_epoch: int = NO_BROKER_EPOCH) -> FollowerFetchOutcome:
        """A follower's incarnation `broker_epoch` fetched at `fetch_offset` (so its LEO is that).
        Updates its state, maybe proposes adding it to the ISR, maybe advances the HW. Call before
        reading the log for the response, so that the response carries the new HW. A fetch of an
        older incarnation than one already seen is refused (KIP-903): its offset describes a log
        that may no longer exist."""
        follower = self.followers.get(replica_id)
        if follower is None or follower.is_stale_epoch(broker_epoch) or self._regressed(follower, fetch_offset):
            return FollowerFetchOutcome(ErrorCode.not_leader_or_follower)
        if not 0 <= fetch_offset <= self.log_end_offset:
            return FollowerFetchOutcome(ErrorCode.offset_out_of_range)
        follower.update_fetch_state(fetch_offset, now_ms, self.log_end_offset, broker_epoch)
        proposal = self.maybe_expand_isr(replica_id)
        advanced = self.maybe_increment_high_watermark(now_ms)
        return FollowerFetchOutcome(ErrorCode.none, advanced, proposal)

    def on_quiet_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int,
                                broker_epoch: int = NO_BROKER_EPOCH, log_start_offset: int = UNKNOWN_OFFSET) -> bool:
        """`on_follower_fetch` for a fetch it would only time: an ISR member, with no ISR change in
        flight, fetching at the LEO it already showed us, which is our LEO and the HW (nothing to
        expand, advance or read), its log start no further than it said. True once noted (its
        fetch and caught-up times, as `on_follower_fetch` notes them); False, having done nothing,
        for any other fetch. A fetch session's leader checks its idle partitions this way."""
        follower = self.followers.get(replica_id)
        if (follower is None or follower.is_stale_epoch(broker_epoch) or self.pending is not None
                or replica_id not in self.committed_isr or log_start_offset > follower.log_start_offset
                or not fetch_offset == follower.log_end_offset == self.log_end_offset == self.high_watermark):
            return False
        follower.update_fetch_state(fetch_offset, now_ms, self.log_end_offset, broker_epoch)
        return True

    def _regressed(self, follower: FollowerReplica, fetch_offset: int) -> bool:
        """An ISR member fetching below the LEO it already showed us, or below the HW, restarted
        without its tail (a new incarnation that lost unflushed records, KIP-903's case): every
        member held every record below the HW when it was set, and truncation never cuts below it.
        The second test is the one a new leadership has, which has seen no LEO of it yet. Its
        lower LEO must not count while it is in the ISR (the HW would sit above a member's log): it
        is refused until it has left the ISR, by our shrink or by the controller seeing it bounce."""
        return follower.broker_id in self.maximal_isr and (fetch_offset < follower.log_end_offset
                                                           or fetch_offset < self.high_watermark)

    def on_isr_change_result(self, result: IsrChangeAccepted | IsrChangeRejected, now_ms: int) -> IsrChangeOutcome:
        """The controller's answer to the proposal in flight."""
        if self.pending is None:
            return IsrChangeOutcome()  # a late answer to a proposal cleared by new partition state
        if isinstance(result, IsrChangeRejected):
            if result.error in _NOT_APPLIED_ERRORS:
                self.pending = None
                return IsrChangeOutcome()
            if result.error in _STALE_VIEW_ERRORS:
                self.awaiting_metadata = True
                return IsrChangeOutcome(awaiting_metadata=True)
            return IsrChangeOutcome(retry=self.pending)
        if result.leader_epoch != self.leader_epoch or result.partition_epoch < self.partition_epoch:
            self.awaiting_metadata = True
            return IsrChangeOutcome(awaiting_metadata=True)
        self._commit_isr(result.isr, result.partition_epoch)
        return IsrChangeOutcome(high_watermark_advanced=self.maybe_increment_high_watermark(now_ms))

    def on_partition_state(self, leader_epoch: int, partition_epoch: int, isr: frozenset[int],
                           replicas: tuple[int, ...], now_ms: int, epochs: LeaderEpochHistory) -> bool:
        """New partition state from the controller in which we are still the leader (the shell
        handles "now a follower" by dropping this object and building a FollowerPartition).
        Stale states are ignored, but for the replicas they come with: the assignment, read apart
        from the states, may name new ones after the state that went with it was taken (then our
        own ISR changes make every later state stale, and a replica a reassignment adds could
        never fetch). A new leader epoch is a new leadership: the epoch starts at our LEO and
        follower positions are forgotten. Returns whether the HW moved."""
        assert self.broker_id in replicas and self.broker_id in isr
        if leader_epoch < self.leader_epoch or (
                leader_epoch == self.leader_epoch and partition_epoch <= self.partition_epoch):
            if tuple(replicas) != self.replicas and self.maximal_isr <= set(replicas):
                self._take_replicas(replicas)
            return False
        self._take_replicas(replicas)
        if leader_epoch > self.leader_epoch:
            epochs.assign(leader_epoch, self.log_end_offset)
            self.leader_epoch = leader_epoch
            self.leader_epoch_start_offset = self.log_end_offset
            for follower in self.followers.values():
                follower.reset_for_leadership(now_ms, in_isr=follower.broker_id in isr)
        self.awaiting_metadata = False
        self._commit_isr(frozenset(isr), partition_epoch)
        return self.maybe_increment_high_watermark(now_ms)

    def _take_replicas(self, replicas: tuple[int, ...]) -> None:
        self.replicas = tuple(replicas)
        self.followers = {r: self.followers.get(r, FollowerReplica(r)) for r in replicas if r != self.broker_id}

    def _commit_isr(self, isr: frozenset[int], partition_epoch: int) -> None:
        assert self.broker_id in isr, "a leader must be in its ISR"
        assert isr <= set(self.replicas), (isr, self.replicas)
        self.committed_isr = frozenset(isr)
        self.partition_epoch = partition_epoch
        self.pending = None

    def check_invariants(self) -> None:
        """For tests and the simulator: the invariants a data-losing bug would break."""
        assert 0 <= self.high_watermark <= self.log_end_offset
        assert self.broker_id in self.committed_isr
        assert self.pending is None or self.broker_id in self.pending.new_isr
        for r in self.maximal_isr - {self.broker_id}:
            leo = self.followers[r].log_end_offset
            assert leo == UNKNOWN_OFFSET or leo >= self.high_watermark, (r, leo, self.high_watermark)

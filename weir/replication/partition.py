"""One partition replica on one broker: everything the broker decides about it, as one object.

Kafka's `Partition`: the broker's asyncio shell (weir/broker) and the simulator's broker
(weir/sim) both feed it the same events and act on what it returns, so the rules below run in
`weir sim` exactly as they run in production. It holds the log (anything with the `ReplicaLog`
methods: weir.log.PartitionLog, or the simulator's MemoryLog), the role, the parked acks=all
produces, the idempotent producers' state and the transactions' (KIP-98), and delegates the
replication rules to the pure cores (LeaderPartition, FollowerPartition, ProducePurgatory,
ProducerStateTable, and PartitionTransactions through weir.replication.transactional).

Rules owned here:
- ROLES come from controller states: we lead, follow, or neither (offline). Stale states (older
  leader epoch, or same leader epoch and older partition epoch) are ignored. A state naming us
  leader that was written before our current registration (broker epochs, KIP-380) describes a
  previous incarnation of this broker, which may have held records we lost: we stay offline
  until the controller rewrites it (it always does once it sees our registration).
- REQUEST CHECKS in Kafka's order: the request's current leader epoch first (FENCED / UNKNOWN
  LEADER EPOCH), then leadership (NOT_LEADER_OR_FOLLOWER). Producers and consumers are served
  only while our leadership is proven (our ZooKeeper session known alive); followers always are,
  so that what was appended can still commit.
- PRODUCE: acks=all refused below min ISR; an idempotent producer's retry is answered from the
  producer table, never appended twice; a batch the transaction table refuses (KIP-98/890,
  weir.replication.transactional) is never written; then the log append, the HW, the purgatory.
- MARKERS (WriteTxnMarkers) are appended as leader like an acks=all produce, checked by the
  transaction table with origin COORDINATOR.
- TRUNCATION (as follower) trims the leader-epoch cache to the new LEO every time, even when no
  record goes, and forgets the producers and transactions of the cut batches.
- READS (`answer_fetch`, for the broker's Fetch and the simulator's alike): out of range only
  outside the log; consumers read up to the HW (READ_COMMITTED ones up to the last stable
  offset), followers to the LEO.
  ListOffsets latest at a new leader whose HW is below its epoch's start is OFFSET_NOT_AVAILABLE
  (KIP-207).

Every event returns `Effects` for the shell: produce requests now decided, an ISR proposal to
send, whether the role changed (drop queued proposals, re-route fetchers), whether readers
waiting on the partition should look again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Protocol

from kio.schema.errors import ErrorCode

from weir.protocol.errors import KafkaError
from weir.protocol.hot_responses import FetchPartitionResult
from weir.protocol.record_batch import CONTROL_BIT, TRANSACTIONAL_BIT
from weir.replication.epoch_fencing import NO_EPOCH_CHECK, check_current_leader_epoch
from weir.replication.follower import (AppendRecords, Backoff, FollowerPartition, SendFetch, SendOffsetForLeaderEpoch,
                                       StartAt)
from weir.replication.leader import (AlterPartitionProposal, IsrChangeAccepted, IsrChangeRejected, LeaderPartition,
                                     ReplicationConfig, ReplicationStatus, is_alive)
from weir.replication.produce_purgatory import ProduceCompletion, ProducePurgatory, PurgatoryFull
from weir.replication.producer_state import Duplicate, ProducerStateTable
from weir.replication.replica import UNKNOWN_OFFSET
from weir.replication.transactional import TransactionalAppends
from weir.replication.truncation import EpochEndOffset, Truncation, answer_offset_for_leader_epoch
from weir.transactions.markers import marker_batch, marker_of
from weir.transactions.partition_txns import SENTINEL, AppendedBatch, AppendOrigin, VerificationGuard
from weir.zk.model import NO_LEADER, PartitionState

log = logging.getLogger(__name__)

LEADER, FOLLOWER, OFFLINE = "leader", "follower", "offline"


class ReplicaLog(Protocol):
    """What a partition needs of its log."""
    log_start_offset: int
    log_end_offset: int
    leader_epochs: object  # a weir.log.LeaderEpochCache

    def append(self, records, leader_epoch: int, now_ms: int): ...  # -> .first_offset, .last_offset

    def append_as_follower(self, records, now_ms: int): ...

    def truncate_to(self, offset: int) -> None: ...

    # DeleteRecords (not simulated: the simulator's logs start at 0)
    def delete_records_before(self, offset: int) -> None: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def batch_headers(self, from_offset: int = 0) -> Iterable: ...  # producer fields, offsets, max timestamp

    # transactions (KIP-98): the aborted transaction index, and a control batch's bytes
    def batch_at(self, offset: int): ...  # the whole batch holding `offset`

    def append_aborted_txns(self, entries) -> None: ...  # only those past the last indexed marker

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list: ...


@dataclass
class Effects:
    completions: list[ProduceCompletion] = field(default_factory=list)
    isr_proposal: AlterPartitionProposal | None = None  # send it to the controller
    role_changed: bool = False  # forget proposals queued for the old role; fetchers follow
    data_changed: bool = False  # new records or a new HW: wake readers waiting on this partition
    new_records: bool = False  # appended as leader: wake follower fetches too (data_changed alone does not)
    fenced: bool = False  # a state naming us leader, written before our registration: not acted on

    @property
    def decide_nothing(self) -> bool:
        return not (self.completions or self.isr_proposal is not None or self.role_changed or self.data_changed
                    or self.new_records or self.fenced)


@dataclass(frozen=True)
class Produced:
    first_offset: int
    last_offset: int
    effects: Effects
    duplicate_timestamp: int = -1  # a retry's: its original batch's max timestamp; -1: not a retry, or unknown


@dataclass(frozen=True)
class ProducerSnapshot:
    offset: int  # the producer table covers the log below this offset
    table_json: str
    txn_json: str | None = None  # the transaction table (PartitionTransactions.to_snapshot); None: none kept


class Partition:
    def __init__(self, broker_id: int, topic: str, index: int, log: ReplicaLog, high_watermark: int, *,
                 transaction_verification: bool = True) -> None:
        self.broker_id = broker_id
        self.topic = topic
        self.index = index
        self.log = log
        self.state: PartitionState | None = None
        self.replicas: tuple[int, ...] = ()
        self.leader: LeaderPartition | None = None
        self.follower: FollowerPartition | None = None
        self.purgatory = ProducePurgatory()
        # the checkpointed HW, within [log start, LEO] as Kafka's UnifiedLog.updateHighWatermark puts it: a
        # damaged or stale checkpoint may hold anything (negative, or below a later DeleteRecords)
        self._high_watermark = max(min(high_watermark, log.log_end_offset), log.log_start_offset)
        self.producers = ProducerStateTable()
        self.txns = TransactionalAppends(log, verification_enabled=transaction_verification)
        self._snapshot: ProducerSnapshot | None = None
        self.live_brokers: frozenset[int] | None = None  # the registered brokers (None: not known yet)
        # the replicas of the latest state, when it names us leader but we may not lead from it
        # (written before we registered): the controller will write another
        self.unproven_leadership: tuple[int, ...] | None = None

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.index

    @property
    def role(self) -> str:
        return LEADER if self.leader else FOLLOWER if self.follower else OFFLINE

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch if self.state else -1

    @property
    def high_watermark(self) -> int:
        if self.leader:
            return self.leader.high_watermark
        if self.follower:
            return self.follower.high_watermark
        return self._high_watermark

    def status(self) -> ReplicationStatus:
        if self.leader:
            return self.leader.status()
        return ReplicationStatus(None, self.high_watermark, False)

    # -- roles -------------------------------------------------------------------------

    def apply_state(self, state: PartitionState, replicas: tuple[int, ...], config: ReplicationConfig, now_ms: int,
                    state_zxid: int | None, own_broker_epoch: int | None) -> Effects:
        """Take a controller state, written at `state_zxid`, while our registration is
        `own_broker_epoch` (None: not yet known)."""
        old = self.state
        members = with_members(replicas, state.isr)
        if state.leader == self.broker_id and not may_lead_from(state_zxid, own_broker_epoch):
            effects = (Effects(fenced=True) if self.role == OFFLINE and old is None else
                       Effects(self.become_offline(), role_changed=True, data_changed=True, fenced=True))
            self.unproven_leadership = members
            return effects
        if old is not None and (state.leader_epoch, state.partition_epoch) <= (old.leader_epoch, old.partition_epoch):
            self._take_assignment(replicas, now_ms)
            return Effects()
        self.state = state
        self.replicas = members
        self.unproven_leadership = None
        if state.leader == self.broker_id:
            if self.leader is not None and old is not None and old.leader == self.broker_id:
                self.leader.on_partition_state(state.leader_epoch, state.partition_epoch, frozenset(state.isr),
                                               members, now_ms, self.log.leader_epochs)
                return Effects(self._poll(now_ms), role_changed=state.leader_epoch != old.leader_epoch,
                               data_changed=True)
            self._drop_role()
            self.leader = LeaderPartition.become_leader(
                self.broker_id, members, frozenset(state.isr), state.leader_epoch, state.partition_epoch,
                self.log.log_end_offset, self._high_watermark, now_ms, self.log.leader_epochs, config,
                self.live_brokers)
            return Effects(self._poll(now_ms), role_changed=True, data_changed=True)
        if old is not None and old.leader == state.leader and old.leader_epoch == state.leader_epoch:
            return Effects()
        self._drop_role()
        if state.leader != NO_LEADER:
            self.follower = FollowerPartition(self.broker_id, state.leader, state.leader_epoch,
                                              self.log.log_end_offset, self._high_watermark, self.log.leader_epochs)
        return Effects(self.purgatory.fail_all(), role_changed=True,
                       data_changed=True)

    def _take_assignment(self, replicas: tuple[int, ...], now_ms: int) -> None:
        """The replicas assigned now, with a state we hold already. The assignment is read apart from
        the states, and a reassignment's may come after the state that went with it, with no later
        state to bring it: the reassignment waits for the replica it adds, whose fetches a leader
        without it would refuse for good. A leader takes them unless they drop a member of its ISR
        (LeaderPartition.on_partition_state, with its own epochs: a stale state, but for these)."""
        leader = self.leader
        if leader is None:
            self.replicas = with_members(replicas, self.state.isr)
            return
        leader.on_partition_state(leader.leader_epoch, leader.partition_epoch, leader.committed_isr,
                                  with_members(replicas, leader.committed_isr), now_ms, self.log.leader_epochs)
        self.replicas = leader.replicas

    def _drop_role(self) -> None:
        self._high_watermark = self.high_watermark
        self.leader = None
        self.follower = None

    def become_offline(self) -> list[ProduceCompletion]:
        """The topic is gone, or a state we may not act on names us leader."""
        self._drop_role()
        self.state = None
        self.unproven_leadership = None
        return self.purgatory.fail_all()

    def lose_leadership_proof(self) -> list[ProduceCompletion]:
        """Our ZooKeeper session is suspended: the parked requests were appended and may yet commit
        (a session that comes back leaves us leader); they get REQUEST_TIMED_OUT (purgatory rule 1)."""
        return self.purgatory.fail_all()

    def awaits_leadership_handover(self) -> bool:
        """Controlled shutdown: the leadership is ours to hand over while another replica is on a
        live broker (a broker stopping waits until none of its partitions is, as Kafka's waits,
        retrying, while its ControlledShutdown leaves partitions remaining). Ours: led here, or
        left to us by the controller's latest state, which names us leader before we could prove
        our registration, or names no leader with us in its ISR (the controller elects us next).
        The controller moves it to another live ISR member, or to a live replica once it catches
        up and this leader adds it to the ISR. One whose other replicas are all down is kept:
        nobody could take it."""
        if self.leader is not None:
            replicas = self.leader.replicas
        elif self.unproven_leadership is not None:
            replicas = self.unproven_leadership
        elif self.state is not None and self.state.leader == NO_LEADER and self.broker_id in self.state.isr:
            replicas = self.replicas
        else:
            return False
        return any(replica != self.broker_id and is_alive(self.live_brokers, replica) for replica in replicas)

    def on_live_brokers(self, live_brokers: frozenset[int], now_ms: int) -> Effects:
        """The registered brokers changed: only those may join the ISR or hold the HW back as
        about to (KIP-841, ZooKeeper mode)."""
        self.live_brokers = live_brokers
        if self.leader is None or not self.leader.on_live_brokers(live_brokers, now_ms):
            return Effects()
        return Effects(self._poll(now_ms), data_changed=True)

    def on_config(self, config: ReplicationConfig, now_ms: int) -> Effects:
        """min.insync.replicas is read at every produce in Kafka: a sitting leader takes it at once."""
        if self.leader is None:
            return Effects()
        self.leader.config = config
        return Effects(self._poll(now_ms))

    # -- requests ----------------------------------------------------------------------

    def check_request(self, current_leader_epoch: int, *, proven: bool = True) -> ErrorCode:
        """Kafka's order: the request's leader epoch first, then whether we lead (and can prove it)."""
        error = check_current_leader_epoch(current_leader_epoch, self.leader_epoch)
        if error:
            return error
        if self.leader is None or not proven:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.none

    def _check_leader_append(self, acks: int, proven: bool) -> LeaderPartition:
        error = self.check_request(NO_EPOCH_CHECK, proven=proven)
        if error:
            raise KafkaError(error, f"not the leader of {self.topic}-{self.index}")
        leader = self.leader
        if acks == -1 and leader.check_acks_all():
            raise KafkaError(ErrorCode.not_enough_replicas, f"{self.topic}-{self.index}: ISR "
                             f"{sorted(leader.committed_isr)} is below min.insync.replicas {leader.effective_min_isr}")
        return leader

    def produce(self, records, header, acks: int, now_ms: int, *, proven: bool,
                verification_guard: VerificationGuard = SENTINEL, origin: AppendOrigin = AppendOrigin.CLIENT) -> Produced:
        """Append a produced batch as leader; `header` carries its producer id, epoch, base
        sequence and record count; `verification_guard` is the one `start_verification` handed
        out for a transactional batch the coordinator verified (KIP-890). Origin COORDINATOR: the
        group coordinator's own batch (a transactional offset commit), whose sequence numbers
        are not checked, as Kafka's. Raises KafkaError when it is refused (nothing written)."""
        leader = self._check_leader_append(acks, proven)
        if origin is AppendOrigin.CLIENT:
            seen = self.producers.check(header.producer_id, header.producer_epoch, header.base_sequence,
                                        header.record_count)
        else:
            seen = self.producers.check_epoch(header.producer_id, header.producer_epoch)
        if isinstance(seen, Duplicate):  # a retry: appended before, not again
            return Produced(seen.first_offset, seen.last_offset, Effects(), seen.timestamp)
        txn = self.txns.check_produced(header, self.log.log_end_offset, self.high_watermark, verification_guard,
                                       origin)
        if seen is not None:
            raise KafkaError(seen, f"{self.topic}-{self.index}: producer {header.producer_id} epoch "
                                   f"{header.producer_epoch} sequence {header.base_sequence}")
        info = self.log.append(records, leader.leader_epoch, now_ms)
        self.producers.record(header.producer_id, header.producer_epoch, header.base_sequence, header.record_count,
                              info.first_offset, info.last_offset, header.max_timestamp)
        self.txns.complete(txn)
        effects = Effects(data_changed=True, new_records=True)
        if leader.on_leader_append(self.log.log_end_offset, now_ms):
            effects.completions = self._poll(now_ms)
        return Produced(info.first_offset, info.last_offset, effects)

    def start_verification(self, header, now_ms: int) -> VerificationGuard:
        """KIP-890 part 1: before asking the coordinator whether a transactional batch's producer
        has added this partition to its transaction, the guard the append must carry (SENTINEL:
        no need to ask: its transaction is ongoing here, or verification is off)."""
        if not header.attributes & TRANSACTIONAL_BIT or header.producer_id < 0:
            return SENTINEL
        return self.txns.maybe_start_verification(header.producer_id, header.base_sequence, header.producer_epoch,
                                                  now_ms)

    def append_marker(self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                      now_ms: int, *, proven: bool) -> Produced:
        """WriteTxnMarkers: append the transaction's COMMIT or ABORT marker as leader (origin
        COORDINATOR; Kafka appends it with acks=all). Raises KafkaError when refused (nothing
        written): NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH,
        TRANSACTION_COORDINATOR_FENCED."""
        leader = self._check_leader_append(-1, proven)
        batch = bytearray(marker_batch(producer_id, producer_epoch, marker_of(committed, coordinator_epoch),
                                       timestamp=now_ms, base_offset=self.log.log_end_offset,
                                       leader_epoch=leader.leader_epoch))
        txn = self.txns.check([AppendedBatch.of(batch)], AppendOrigin.COORDINATOR, self.high_watermark)
        info = self.log.append(batch, leader.leader_epoch, now_ms)
        self.producers.record_marker(producer_id, producer_epoch, now_ms)
        self.txns.complete(txn)
        effects = Effects(data_changed=True, new_records=True)
        if leader.on_leader_append(self.log.log_end_offset, now_ms):
            effects.completions = self._poll(now_ms)
        return Produced(info.first_offset, info.last_offset, effects)

    def await_replication(self, key: Hashable, last_offset: int, deadline_ms: int,
                          now_ms: int) -> ProduceCompletion | None:
        """acks=all: park `key` until the HW passes `last_offset`; the answer if it is known now."""
        try:
            return self.purgatory.park(key, last_offset + 1, self.leader.leader_epoch, deadline_ms, self.status(),
                                       now_ms)
        except PurgatoryFull:
            return ProduceCompletion(key, ErrorCode.request_timed_out)

    def on_follower_fetch(self, replica_id: int, replica_epoch: int, fetch_offset: int, current_leader_epoch: int,
                          now_ms: int, log_start_offset: int = UNKNOWN_OFFSET) -> tuple[ErrorCode, Effects]:
        """A follower's incarnation `replica_epoch` fetched at `fetch_offset` (once per request,
        not again when a long poll looks again); its log starts at `log_start_offset`."""
        error = self.check_request(current_leader_epoch)
        if error:
            return error, Effects()
        if replica_id not in self.leader.followers:
            # Kafka's followerReplicaOrThrow: our leader epoch, but a replica this leadership does not
            # know yet (it learned of its reassignment first) retries; without an epoch, nothing tells
            return (ErrorCode.not_leader_or_follower if current_leader_epoch == NO_EPOCH_CHECK
                    else ErrorCode.unknown_leader_epoch), Effects()
        outcome = self.leader.on_follower_fetch(replica_id, fetch_offset, now_ms, replica_epoch)
        if outcome.error:
            return outcome.error, Effects()
        effects = Effects(isr_proposal=outcome.alter_partition)
        follower = self.leader.followers[replica_id]
        if log_start_offset > follower.log_start_offset:
            follower.log_start_offset = log_start_offset
            effects.data_changed = True  # the low watermark may have moved: DeleteRecords waits on it
        if outcome.high_watermark_advanced:
            effects.completions, effects.data_changed = self._poll(now_ms), True
        return ErrorCode.none, effects

    def on_quiet_follower_fetch(self, told: tuple[int, int, int], replica_id: int, replica_epoch: int,
                                fetch_offset: int, current_leader_epoch: int, now_ms: int,
                                log_start_offset: int = UNKNOWN_OFFSET, *, again: bool = False) -> bool:
        """A fetch session's short way for a partition its follower did not name: True when `told`,
        the (HW, LSO, log start) the session last answered, still stands and this fetch could only
        be timed (LeaderPartition's `on_quiet_follower_fetch`), and was; the answer is then `told`
        again, with no records. A long poll reading `again` notes nothing (as `on_follower_fetch`
        is taken once per request) and needs only to be at the LEO. False, having done nothing,
        when the fetch needs `on_follower_fetch` and a read."""
        if (told != (self.high_watermark, self.last_stable_offset, self.log.log_start_offset)
                or self.check_request(current_leader_epoch)):
            return False
        if again:
            return fetch_offset == self.log.log_end_offset
        return self.leader.on_quiet_follower_fetch(replica_id, fetch_offset, now_ms, replica_epoch, log_start_offset)

    def quiet_fetch_credit(self, replica_id: int) -> Callable[[int], None]:
        """For a fetch session that stops visiting this partition while it stays quiet: the fetches
        it took meanwhile, up to a time, credited to the follower, if this is still the leadership
        that found it quiet (a new one has reset what it knows of its followers)."""
        leader = self.leader
        assert leader is not None, "only a leader's partition is quiet in a follower's session"
        leader_epoch = leader.leader_epoch

        def credit(last_ms: int) -> None:
            follower = leader.followers.get(replica_id)
            if self.leader is leader and leader.leader_epoch == leader_epoch and follower is not None:
                follower.note_quiet_fetches(last_ms)
        return credit

    def answer_fetch(self, fetch_offset: int, current_leader_epoch: int, replica_id: int, now_ms: int, *,
                     replica_epoch: int = -1, log_start_offset: int = UNKNOWN_OFFSET, first: bool = True,
                     proven: bool = True, read_committed: bool = False,
                     told: tuple[int, int, int] | None = None
                     ) -> tuple[FetchPartitionResult, int, Effects | None] | None:
        """What a Fetch of this partition is answered, all but the records: (the result, the
        offset the read stops at, the effects of a follower's fetch). The shell reads the log from
        `fetch_offset` up to that offset when the result has no error. A follower (`replica_id`
        >= 0) is timed once per request (`first`); a consumer is served while our leadership is
        `proven`, up to the HW (READ_COMMITTED: the LSO, with the aborted transactions of what it
        reads to list). None when a follower's fetch session already `told` it all
        (`on_quiet_follower_fetch`): the answer leaves the partition out."""
        follower = replica_id >= 0
        if told is not None and self.on_quiet_follower_fetch(told, replica_id, replica_epoch, fetch_offset,
                                                             current_leader_epoch, now_ms, log_start_offset,
                                                             again=not first):
            return None
        effects = None
        if follower and first:
            error, effects = self.on_follower_fetch(replica_id, replica_epoch, fetch_offset, current_leader_epoch,
                                                    now_ms, log_start_offset)
        else:
            error = self.check_request(current_leader_epoch, proven=follower or proven)
        if error:
            if error == ErrorCode.offset_out_of_range:
                hw = self.high_watermark
                return FetchPartitionResult(self.index, error, hw, hw, self.log.log_start_offset), fetch_offset, effects
            return FetchPartitionResult(self.index, error), fetch_offset, effects
        error, limit = self.read_limit(fetch_offset, follower=follower)
        lso = self.last_stable_offset
        result = FetchPartitionResult(self.index, error, self.high_watermark, lso, self.log.log_start_offset)
        if read_committed and not follower:
            limit = min(limit, lso)
            if not error:
                result.aborted_transactions = []
        return result, limit, effects

    # -- DeleteRecords -------------------------------------------------------------------

    def delete_records(self, offset: int) -> int:
        """As leader, move the log start to `offset` (-1: the HW); returns it. The records are gone
        from every replica once `low_watermark` reaches it."""
        target = self.high_watermark if offset == -1 else offset
        if not 0 <= target <= self.high_watermark:
            raise KafkaError(ErrorCode.offset_out_of_range, f"{self.topic}-{self.index}: cannot delete records before "
                                                            f"{offset}: the high watermark is {self.high_watermark}")
        self.log.delete_records_before(target)
        return target

    def low_watermark(self, replica_ids) -> int:
        """The lowest log start offset among us and followers `replica_ids` (Kafka: the alive ones);
        -1 while one of them has not told us."""
        return min([self.log.log_start_offset] + [self.leader.followers[r].log_start_offset
                                                  for r in replica_ids if r in self.leader.followers])

    def read_limit(self, offset: int, *, follower: bool) -> tuple[ErrorCode, int]:
        """(OFFSET_OUT_OF_RANGE or none, the offset reads stop at). Out of range means outside the
        log, as in Kafka: a consumer ahead of a new leader's lagging HW gets an empty answer."""
        if offset > self.log.log_end_offset or offset < self.log.log_start_offset:
            return ErrorCode.offset_out_of_range, offset
        return ErrorCode.none, self.log.log_end_offset if follower else self.high_watermark

    def latest_offset(self, read_committed: bool = False) -> int:
        """ListOffsets latest: the HW, or the LSO for READ_COMMITTED (KIP-98) (KIP-207: not while a
        new leader's HW is below where its epoch starts, which would move a consumer's end offset
        backwards)."""
        if self.leader.high_watermark < self.leader.leader_epoch_start_offset:
            raise KafkaError(ErrorCode.offset_not_available, "the new leader's high watermark is catching up")
        return self.last_stable_offset if read_committed else self.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """KIP-98's LSO: READ_COMMITTED consumers read below it (<= the HW)."""
        return self.txns.last_stable_offset(self.high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list:
        """The aborted transactions (AbortedTxn) overlapping [fetch_offset, upper_bound_offset)."""
        return self.txns.aborted_transactions(fetch_offset, upper_bound_offset)

    def answer_epoch_request(self, requested_epoch: int, current_leader_epoch: int) -> EpochEndOffset:
        """OffsetForLeaderEpoch (KIP-101/279)."""
        return answer_offset_for_leader_epoch(
            requested_epoch, current_leader_epoch, is_leader=self.leader is not None,
            our_leader_epoch=self.leader_epoch, epochs=self.log.leader_epochs, log_end_offset=self.log.log_end_offset)

    # -- the follower loop ---------------------------------------------------------------

    def next_fetch_request(self) -> SendOffsetForLeaderEpoch | SendFetch:
        return self.follower.next_request()

    def on_epoch_answer(self, request: SendOffsetForLeaderEpoch, answer: EpochEndOffset) -> Backoff | None:
        """The leader answered our OffsetForLeaderEpoch `request`: truncate as told."""
        decision = self.follower.on_offset_for_leader_epoch_response(request.current_leader_epoch,
                                                                     request.leader_epoch, answer)
        if isinstance(decision, Truncation):
            self.truncate_to(decision.offset)
            self.follower.on_truncated(self.log.log_end_offset)
        return decision if isinstance(decision, Backoff) else None

    def truncate_to(self, offset: int) -> bool:
        """Cut the log at `offset` (whole batches); returns whether records went. The epoch cache
        is trimmed to the LEO every time: an epoch starting at the LEO (a leadership that wrote
        nothing) would otherwise claim the records fetched next."""
        cuts = offset < self.log.log_end_offset
        self.log.truncate_to(offset)
        trim_epoch_cache(self.log)
        if cuts:  # the cut batches' producers and transactions are forgotten
            self._load_idempotent(self._snapshot)
            snapshot = self._snapshot
            if snapshot is not None and snapshot.offset > self.log.log_end_offset:
                snapshot = None
            self.txns.truncate_to(offset, self.high_watermark, snapshot and snapshot.txn_json,
                                  snapshot and snapshot.offset)
        return cuts

    def on_fetched(self, request: SendFetch, error: ErrorCode, leader_high_watermark: int, records, headers,
                   now_ms: int, leader_log_start_offset: int = 0) -> Backoff | AppendRecords | StartAt | None:
        """The leader answered our fetch `request`; `records` are appended as follower, `headers`
        being their whole batches' headers (none: nothing to append). Our log start follows the
        leader's (DeleteRecords), as far as our HW."""
        base_offset = headers[0].base_offset if headers else None
        if (base_offset is not None and not error and base_offset < request.fetch_offset <= headers[0].last_offset
                and request.fetch_offset == self.log.log_end_offset == self.log.log_start_offset):
            # Our empty log starts inside the leader's first batch (at its log start, which
            # DeleteRecords put mid-batch): start it again at the batch, as Kafka's Partition does.
            self._start_at(base_offset)
            request = SendFetch(request.leader_id, request.current_leader_epoch, base_offset)
        decision = self.follower.on_fetch_response(request.fetch_offset, error, leader_high_watermark, base_offset,
                                                   current_leader_epoch=request.current_leader_epoch,
                                                   leader_log_start_offset=leader_log_start_offset)
        if isinstance(decision, StartAt):
            self._start_at(decision.offset)
            return decision
        if isinstance(decision, AppendRecords):
            txn = self.txns.check_replicated(records, headers, self.follower.high_watermark)
            self.log.append_as_follower(records, now_ms)
            self._record_batches(headers)
            self.txns.complete(txn)
            self.follower.on_appended(self.log.log_end_offset, decision.leader_high_watermark)
        log_start = min(leader_log_start_offset, self.follower.high_watermark)
        if not error and log_start > self.log.log_start_offset:
            self.log.delete_records_before(log_start)
        return decision if isinstance(decision, (Backoff, AppendRecords)) else None

    def _start_at(self, offset: int) -> None:
        """Empty our log and go on from `offset` (Kafka's truncateFullyAndStartAt)."""
        self.log.truncate_fully_and_start_at(offset)
        self.load_producers(None)
        self.txns.start_at(offset)
        self.follower.on_started_at(offset)

    # -- the leader's ISR ----------------------------------------------------------------

    def check_isr(self, now_ms: int) -> Effects:
        """Every replica.lag.time.max.ms / 2: propose dropping followers that fell behind. A
        follower outside the ISR that fell behind no longer holds the HW back: the HW may move."""
        if self.leader is None:
            return Effects()
        proposal = self.leader.maybe_shrink_isr(now_ms)
        if self.leader.maybe_increment_high_watermark(now_ms):
            return Effects(self._poll(now_ms), isr_proposal=proposal, data_changed=True)
        return Effects(isr_proposal=proposal)

    def on_isr_change_result(self, proposal: AlterPartitionProposal, result: IsrChangeAccepted | IsrChangeRejected,
                             now_ms: int) -> Effects:
        """The controller answered `proposal`; a retry comes back as `isr_proposal`."""
        if self.leader is None or self.leader.pending is not proposal:
            return Effects()  # leadership moved on meanwhile
        outcome = self.leader.on_isr_change_result(result, now_ms)
        return Effects(self._poll(now_ms), isr_proposal=outcome.retry, data_changed=outcome.high_watermark_advanced)

    def expire(self, now_ms: int) -> Effects:
        """The produce timer: parked requests past their deadline are answered."""
        return Effects(self._poll(now_ms) if len(self.purgatory) else [])

    def _poll(self, now_ms: int) -> list[ProduceCompletion]:
        return self.purgatory.complete_ready(self.status(), now_ms)

    # -- idempotent producers --------------------------------------------------------------

    def _record_batches(self, headers) -> None:
        for h in headers:
            if h.attributes & CONTROL_BIT:  # a marker: no sequence, its epoch only
                self.producers.record_marker(h.producer_id, h.producer_epoch, h.max_timestamp)
            else:
                self.producers.record(h.producer_id, h.producer_epoch, h.base_sequence, h.record_count,
                                      h.base_offset, h.last_offset, h.max_timestamp)

    def load_producers(self, snapshot: ProducerSnapshot | None) -> None:
        """Rebuild the producer tables (idempotent, transactions): from `snapshot` if it still fits
        the log, then the log after it."""
        self._load_idempotent(snapshot)
        fits = snapshot is not None and snapshot.offset <= self.log.log_end_offset
        self.txns.reload(snapshot.txn_json if fits else None, snapshot.offset if fits else None)

    def _load_idempotent(self, snapshot: ProducerSnapshot | None) -> None:
        self.producers, start = ProducerStateTable(), self.log.log_start_offset
        if snapshot is not None and snapshot.offset <= self.log.log_end_offset:
            try:
                self.producers, start = ProducerStateTable.from_json(snapshot.table_json), snapshot.offset
            except (ValueError, KeyError, TypeError, AttributeError) as e:  # damaged: the log tells all
                log.warning("%s-%d: ignoring a damaged producer snapshot at %d: %r", self.topic, self.index,
                            snapshot.offset, e)
        self._snapshot = snapshot
        self._record_batches(h for h in self.log.batch_headers(start) if h.base_offset >= start)

    def expire_producers(self, now_ms: int, expiration_ms: int) -> None:
        """producer.id.expiration.ms: idle producers are forgotten by the transaction table
        (KIP-98), then by the idempotence table, which keeps those the transaction table still
        holds (an ongoing transaction, batches above the HW)."""
        self.txns.remove_expired_producers(now_ms, expiration_ms, self.high_watermark)
        self.producers.remove_expired(now_ms, expiration_ms, keep=self.txns.holds_producer)

    def producer_snapshot(self) -> ProducerSnapshot:
        self._snapshot = ProducerSnapshot(self.log.log_end_offset, self.producers.to_json(), self.txns.snapshot())
        return self._snapshot


def with_members(replicas: tuple[int, ...], isr) -> tuple[int, ...]:
    """The assigned replicas, and ISR members the assignment read does not name: a state may be
    read before the assignment written ahead of it (reassignment.py); its ISR is the truth."""
    return tuple(replicas) + tuple(sorted(set(isr) - set(replicas)))


def may_lead_from(state_zxid: int | None, own_broker_epoch: int | None) -> bool:
    """Broker epochs (KIP-380): only a state written after our current registration may make us lead."""
    return own_broker_epoch is not None and state_zxid is not None and state_zxid > own_broker_epoch


def trim_epoch_cache(log: ReplicaLog) -> None:
    log.leader_epochs.truncate_from_end(log.log_end_offset)

"""The invariants, checked after every step of a simulation.

The checker keeps a ledger per partition: the committed log, i.e. the values below the highest HW
any leader has reached, extended each time a leader's HW moves. Every rule is checked against it:

- COMMITTED-STABLE (log matching below the HW; KafkaReplication.tla's consistency): whenever a
  replica's HW moves (a leader, or a follower once it has truncated and fetches), its records
  below the new HW equal the ledger's. So a
  record below a reader's HW is never later different at any replica that counts it committed.
  (A follower's HW kept from a history an allowed unclean election voided is checked as far as
  the ledger goes, until its leader's first answer sets it.)
- ONE-LEADER-PER-EPOCH: every HW advance names (leader epoch, leader); two brokers committing
  under the same leader epoch is a violation.
- LEADER-COMPLETENESS (KafkaReplication.tla's LeaderCompleteness): a broker taking a leadership
  (a new LeaderPartition, or a new epoch of one) holds the whole ledger, up to what later leader
  epochs committed (a paused broker may take up a leadership that a newer one has already ended).
- CLEAN-ELECTION: a partition state written with a leader outside the previous ISR, while the
  controller did not allow unclean election, is a violation by itself, unless the previous leader
  asked for controlled shutdown (and has not started again since) and the write is its last ISR
  proposal (an AlterPartition of its leader epoch) without it, led by a replica the proposal
  added: such a leader that adds a caught-up replica hands it the partition (KRaft's
  PartitionChangeBuilder), and from its proposal on, the HW waited for that replica. (Seed 14880:
  without the controlled-shutdown condition an unclean election of the same shape was taken for
  one, and its loss not counted; seeds 167 and 3880: the write may apply after the leader stopped,
  the proposal be sent before it asked.)
- ACKED-DURABLE: an acks=all success names an offset whose value is committed at that moment; it
  is protected if the topic had min.insync.replicas >= 2 and unclean election off when it was
  acknowledged, and a protected write must be in every later leader's log and at the end.
- TRUNCATED-TO-MATCH (what KIP-101's truncation is for): a follower that starts fetching in a
  leadership holds a prefix of that leader's log.
- READ-CONSISTENT: what a reader reads below the HW is the ledger's, or was, before an allowed
  unclean election dropped it while the answer was on its way. (The HW a Fetch answer carries
  may go back after a failover, as in Kafka: a new leader learns its followers' positions first.)
- CORE-ASSERTIONS: LeaderPartition.check_invariants() on every leader, and any AssertionError a
  core raises, are violations.

An unclean election that the controller was allowed to make voids the guarantees for what was
committed before it: the ledger is cut back to what the new leader holds, protected writes beyond
are released. That is what the setting accepts; the
Jepsen scenario counts those lost writes instead of failing on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from weir.replication.follower import FollowerState
from weir.zk.model import NO_LEADER


@dataclass(frozen=True)
class Violation:
    rule: str
    detail: str
    at_ms: int


@dataclass
class _Watched:
    leader: object = None
    leader_epoch: int = -1
    leader_hw: int = 0
    follower: object = None
    follower_hw: int = 0


@dataclass
class PartitionLedger:
    committed: list = field(default_factory=list)
    acked: dict = field(default_factory=dict)  # offset -> (value, protected)
    commit_leaders: dict = field(default_factory=dict)  # leader epoch -> broker
    commit_epochs: list = field(default_factory=list)  # the leader epoch each committed offset was committed in
    unclean_epochs: set = field(default_factory=set)
    voided_below: int = 0  # the latest allowed unclean election's epoch: earlier leaderships' records may be gone
    lost: list = field(default_factory=list)  # acknowledged acks=all writes voided by unclean elections
    voided: set = field(default_factory=set)  # (offset, value): committed, then dropped by an allowed unclean election


class Checker:
    def __init__(self, world) -> None:
        self.world = world
        self.ledgers = {key: PartitionLedger() for key in world.keys}
        self.watched: dict = {}
        self.violations: list[Violation] = []
        self.acked_total = 0
        # (key, leader, leader epoch) -> the ISR it last asked for, and the leader's incarnation then
        self.isr_asked: dict[tuple, tuple[frozenset[int], int]] = {}
        self.shut_down: set[tuple[int, int]] = set()  # (broker, incarnation) that asked for controlled shutdown

    def fail(self, rule: str, detail: str) -> None:
        violation = Violation(rule, detail, self.world.events.now)
        self.violations.append(violation)
        self.world.trace(f"VIOLATION {rule}: {detail}")

    # ----- after every step

    def after_step(self) -> None:
        """Only a broker that ran code in this step can have changed its partitions."""
        touched = self.world.touched
        for broker in sorted(touched, key=lambda b: b.id) if len(touched) > 1 else touched:
            if not broker.up:
                continue
            for key, partition in broker.partitions.items():
                w = self.watched.get((broker.id, key))
                if w is None:
                    w = self.watched[(broker.id, key)] = _Watched()
                voided = self.ledgers[key].voided_below
                leader = partition.leader
                if leader is not None and leader.leader_epoch < voided:
                    w.leader = None  # a history an allowed unclean election voided: nothing to check
                elif leader is not None:
                    if leader is not w.leader or leader.leader_epoch != w.leader_epoch:
                        w.leader, w.leader_epoch, w.leader_hw = leader, leader.leader_epoch, 0
                        self._new_leadership(broker, key, leader.leader_epoch, partition.log)
                    if leader.high_watermark != w.leader_hw:
                        self._leader_hw(broker, key, leader.leader_epoch, partition.log, w.leader_hw,
                                        leader.high_watermark)
                        w.leader_hw = leader.high_watermark
                    try:
                        leader.check_invariants()
                    except AssertionError as e:
                        self.fail("core-assertion", f"b{broker.id} {key}: LeaderPartition.check_invariants: {e!r}")
                else:
                    w.leader = None
                follower = partition.follower
                if follower is not None and follower.state is FollowerState.FETCHING \
                        and follower.leader_epoch >= voided:
                    if follower is not w.follower:
                        w.follower, w.follower_hw = follower, 0
                        self._check_truncated(broker, key, follower, partition.log)
                        ledger = self.ledgers[key]
                        if ledger.voided_below and follower.high_watermark > len(ledger.committed):
                            # a HW kept from a history an allowed unclean election voided: checked up to
                            # the ledger; the first answer of its leader sets it (it may go back)
                            self._check_prefix(broker, key, partition.log, 0, len(ledger.committed), "follower")
                            w.follower_hw = follower.high_watermark
                    if follower.high_watermark > w.follower_hw:
                        self._check_prefix(broker, key, partition.log, w.follower_hw, follower.high_watermark,
                                           "follower")
                        w.follower_hw = follower.high_watermark
                    elif follower.high_watermark < w.follower_hw:
                        w.follower_hw = follower.high_watermark
                else:
                    w.follower = None
        touched.clear()

    def _leader_hw(self, broker, key, epoch, log, old, new) -> None:
        ledger = self.ledgers[key]
        if new < old:
            self.fail("hw-monotonic", f"b{broker.id} {key} epoch {epoch}: leader HW went from {old} to {new}")
            return
        holder = ledger.commit_leaders.setdefault(epoch, broker.id)
        if holder != broker.id:
            self.fail("one-leader-per-epoch", f"{key}: b{holder} and b{broker.id} both committed in leader epoch "
                                              f"{epoch}")
        committed = ledger.committed
        if new > log.log_end_offset:
            self.fail("core-assertion", f"b{broker.id} {key}: HW {new} beyond LEO {log.log_end_offset}")
            return
        values = log.values
        for offset in range(min(old, len(committed)), new):
            if offset < len(committed):
                if committed[offset] != values[offset]:
                    self.fail("committed-stable", f"{key} offset {offset}: committed {committed[offset]!r}, leader "
                                                  f"b{broker.id} (epoch {epoch}) has {values[offset]!r} below its HW "
                                                  f"{new}")
                    return
            else:
                committed.append(values[offset])
                ledger.commit_epochs.append(epoch)

    def _check_prefix(self, broker, key, log, old, new, role) -> None:
        committed = self.ledgers[key].committed
        if new > len(committed):
            self.fail("committed-stable", f"b{broker.id} {key}: {role} HW {new} beyond anything committed "
                                          f"({len(committed)})")
            return
        if log.values[old:new] != committed[old:new]:
            offset = next(o for o in range(old, new) if log.values[o] != committed[o])
            self.fail("committed-stable", f"{key} offset {offset}: committed {committed[offset]!r}, {role} "
                                          f"b{broker.id} has {log.values[offset]!r} below its HW {new}")

    def _check_truncated(self, broker, key, follower, log) -> None:
        """A follower done truncating holds a prefix of its leader's log, while that leadership lasts."""
        leader_broker = self.world.brokers_by_id[follower.leader_id]
        partition = leader_broker.partitions.get(key) if leader_broker.up else None
        leader = partition.leader if partition is not None else None
        if leader is None or leader.leader_epoch != follower.leader_epoch:
            return
        theirs = partition.log.values
        if log.log_end_offset > len(theirs) or log.values != theirs[:log.log_end_offset]:
            offset = next((o for o in range(log.log_end_offset) if o >= len(theirs) or log.values[o] != theirs[o]))
            self.fail("truncated-to-match", f"b{broker.id} {key} follows b{follower.leader_id} in epoch "
                                            f"{follower.leader_epoch} with offset {offset} = {log.values[offset]!r}, "
                                            f"which the leader does not have there")

    def _new_leadership(self, broker, key, epoch, log) -> None:
        ledger = self.ledgers[key]
        committed = ledger.committed
        if epoch in ledger.unclean_epochs:
            keep = 0
            limit = min(len(committed), log.log_end_offset)
            while keep < limit and committed[keep] == log.values[keep]:
                keep += 1
            if keep < len(committed):
                self.world.trace(f"checker: unclean leader b{broker.id} of {key} epoch {epoch} drops committed "
                                 f"offsets {keep}..{len(committed) - 1}")
                ledger.voided.update((o, committed[o]) for o in range(keep, len(committed)))
                del committed[keep:]
                del ledger.commit_epochs[keep:]
            for offset, (value, protected) in sorted(ledger.acked.items()):
                if offset >= keep:
                    ledger.lost.append((offset, value))
                    del ledger.acked[offset]
            return
        required = next((o for o, e in enumerate(ledger.commit_epochs) if e > epoch), len(committed))
        committed = committed[:required]
        if log.values[:len(committed)] != committed:
            if log.log_end_offset < len(committed):
                detail = f"LEO {log.log_end_offset} < committed {len(committed)}"
            else:
                offset = next(o for o in range(len(committed)) if log.values[o] != committed[o])
                detail = f"offset {offset}: committed {committed[offset]!r}, has {log.values[offset]!r}"
            self.fail("leader-completeness", f"b{broker.id} leads {key} in epoch {epoch} without every committed "
                                             f"record: {detail}")
            return
        self._check_acked(key, log, f"new leader b{broker.id} epoch {epoch}", below=required)

    def _check_acked(self, key, log, who, below: int | None = None) -> None:
        """Every acknowledged acks=all write (of those `below` an offset: a leader of an older epoch
        than the one that committed the rest, a zombie that can commit nothing, need not hold them)."""
        for offset, (value, protected) in self.ledgers[key].acked.items():
            if below is not None and offset >= below:
                continue
            if protected and (offset >= log.log_end_offset or log.values[offset] != value):
                self.fail("acked-durable", f"{key}: acknowledged acks=all write {value!r} at offset {offset} is "
                                           f"missing at {who}")
                return

    # ----- reports from the clients and the controller

    def on_acked(self, key, offset, value, leader_id) -> None:
        ledger = self.ledgers[key]
        self.acked_total += 1
        committed = ledger.committed
        if offset >= len(committed) or committed[offset] != value:
            have = committed[offset] if offset < len(committed) else None
            self.fail("acked-durable", f"{key}: b{leader_id} acknowledged acks=all write {value!r} at offset {offset}, "
                                       f"but the committed log has {have!r} there")
            return
        ledger.acked[offset] = (value, self.world.durable_config(key[0]))

    def on_read(self, key, leader_id, hw, offset, values) -> None:
        """A read answered before an allowed unclean election may arrive after it: what that
        election dropped was committed when it was read (the setting accepts losing it)."""
        ledger = self.ledgers[key]
        committed = ledger.committed
        for i, value in enumerate(values):
            o = offset + i
            if (o >= len(committed) or committed[o] != value) and (o, value) not in ledger.voided:
                self.fail("read-consistent", f"{key}: a reader read {value!r} at offset {o} below HW {hw} from "
                                             f"b{leader_id}; committed: {committed[o] if o < len(committed) else None!r}")
                return

    def on_isr_proposal(self, key, leader_id: int, leader_epoch: int, isr, incarnation: int) -> None:
        """A leader sends an AlterPartition."""
        self.isr_asked[(key, leader_id, leader_epoch)] = frozenset(isr), incarnation

    def on_shutdown_request(self, broker_id: int, incarnation: int) -> None:
        """A broker asked for controlled shutdown."""
        self.shut_down.add((broker_id, incarnation))

    def on_state_written(self, key, old, new, unclean_allowed: bool) -> None:
        if old is None or new.leader in (NO_LEADER, old.leader) or new.leader in old.isr:
            return
        # A controlled shutdown's handover: the stopping leader asked to add the new one (a member
        # its HW waited for), and asked to stop in that incarnation: before, or after (the
        # controller may answer it late, the leader stopped or started again meanwhile).
        asked, incarnation = self.isr_asked.get((key, old.leader, old.leader_epoch), (frozenset(), -1))
        if ((old.leader, incarnation) in self.shut_down and new.leader in asked
                and set(new.isr) == asked - {old.leader}):
            return
        ledger = self.ledgers[key]
        if unclean_allowed:
            ledger.unclean_epochs.add(new.leader_epoch)
            ledger.voided_below = max(ledger.voided_below, new.leader_epoch)
            self.world.trace(f"checker: unclean election of b{new.leader} for {key} (epoch "
                             f"{new.leader_epoch}, old ISR {list(old.isr)})")
        else:
            self.fail("clean-election", f"{key}: b{new.leader} elected in epoch {new.leader_epoch} outside the "
                                        f"ISR {list(old.isr)} with unclean election off")

    # ----- at the end

    def final_check(self) -> None:
        for key in self.world.keys:
            state = self.world.zk.partition_state(*key)
            broker = self.world.brokers_by_id[state.leader]
            self._check_acked(key, broker.logs[key], f"the final leader b{state.leader}")

    @property
    def lost_writes(self) -> int:
        return sum(len(ledger.lost) for ledger in self.ledgers.values())

"""Mutants: one replication or controller rule broken at a time, to prove the checker can fail.

Each mutant replaces one behaviour of a core *from the simulator's side* (an attribute of a core
class or module swapped for the duration of one run, then restored), never by editing the core:

- hw-max: the leader's HW is the max, not the min, of the ISR's LEOs.
- elect-outside-isr: the controller elects the first acceptable replica in assignment order,
  whether or not it is in the ISR.
- no-truncation: a follower never truncates on a new leadership (it skips the leader-epoch answer).
- isr-shrink-without-controller: the leader drops lagging followers from its ISR by itself,
  without an AlterPartition accepted by the controller.
- no-broker-epoch: broker epochs are ignored (KIP-903): the leader takes a fetch of any incarnation,
  the controller an AlterPartition of any.
- controller-view-drift: the controller does not re-read the states whose write had no answer
  before its next decision.
- reassign-unchecked-isr: a reassignment completes at once, its target replicas in the ISR
  whether they caught up or not.
- read-past-hw: a consumer's fetch reads up to the LEO, as a follower's does, not up to the HW.
- txn-unsafe-prepare (scenario transactions): the coordinator takes an EndTxn's PrepareCommit /
  PrepareAbort write as written even when the append failed: it answers the client and sends
  markers for an outcome `__transaction_state` may not hold.
- txn-skip-verification (scenario transactions): partitions skip KIP-890's verification guard:
  a transactional batch is appended whether or not its transaction still holds the partition.
- txn-stale-marker-drops-completion (scenario transactions): the coordinator bug the scenario
  found (issue 13): a WriteTxnMarkers answer of an earlier coordinator epoch, arriving after the
  same broker loaded the partition again, drops the newer load's pending completion; the
  transaction hangs in PrepareCommit/PrepareAbort.
- txn-lso-ignores-unreplicated (scenario transactions): the LSO passes a completed transaction
  whose marker is not yet below the HW (Kafka's unreplicatedTxns forgotten): a leader change that
  cuts the marker reopens the transaction below the LSO.
"""

from __future__ import annotations

import contextlib

from weir.controller import partition_change, reassignment
from weir.controller.decisions import ControllerCore
from weir.replication import partition
from weir.replication.follower import FollowerPartition
from weir.replication.leader import LeaderPartition
from weir.replication.replica import FollowerReplica
from weir.replication.truncation import Truncation
from weir.transactions import partition_txns
from weir.transactions.coordinator import TransactionCoordinator, WritePurpose

MUTANTS = ("hw-max", "elect-outside-isr", "no-truncation", "isr-shrink-without-controller",
           "no-broker-epoch", "controller-view-drift", "reassign-unchecked-isr",
           "read-past-hw", "txn-unsafe-prepare", "txn-skip-verification", "txn-lso-ignores-unreplicated",
           "txn-stale-marker-drops-completion")


def _hw_max(self, now_ms) -> bool:
    if self.is_under_min_isr:
        return False
    new_hw = self.log_end_offset
    for replica_id in self.maximal_isr:
        if replica_id != self.broker_id:
            new_hw = max(new_hw, self.followers[replica_id].log_end_offset)
    new_hw = min(new_hw, self.log_end_offset)  # even a mutant cannot commit what the leader lacks
    if new_hw <= self.high_watermark:
        return False
    self.high_watermark = new_hw
    return True


def _elect_ignoring_isr(replicas, target_isr, current_leader, live, shutting_down, unclean_allowed):
    target_isr = tuple(target_isr)
    if current_leader in target_isr and partition_change.is_acceptable_leader(current_leader, live, shutting_down):
        return current_leader, target_isr
    for r in replicas:
        if partition_change.is_acceptable_leader(r, live, shutting_down):
            return r, target_isr if r in target_isr else target_isr + (r,)
    return partition_change.NO_LEADER, target_isr


_original_ofle_response = FollowerPartition.on_offset_for_leader_epoch_response


def _no_truncation(self, current_leader_epoch, requested_epoch, answer):
    decision = _original_ofle_response(self, current_leader_epoch, requested_epoch, answer)
    if isinstance(decision, Truncation):
        decision = Truncation(self.log_end_offset, completed=True)
        self._pending_truncation = decision
    return decision


def _shrink_locally(self, now_ms):
    if self.pending is not None or self.awaiting_metadata:
        return None
    out_of_sync = frozenset(
        r for r in self.committed_isr
        if r != self.broker_id and not self.followers[r].is_caught_up(
            self.log_end_offset, now_ms, self.config.replica_lag_time_max_ms))
    if out_of_sync:
        self.committed_isr = self.committed_isr - out_of_sync
        self.maybe_increment_high_watermark(now_ms)
    return None


def _never_stale(*args) -> bool:
    return False


_original_state_within = reassignment.state_within


def _target_in_sync(state, replicas, preferred, *, live, shutting_down, controller_epoch):
    if tuple(replicas) != tuple(preferred):  # starting a move: unchanged
        return _original_state_within(state, replicas, preferred, live=live, shutting_down=shutting_down,
                                      controller_epoch=controller_epoch)
    leader = state.leader if state.leader in replicas else next(
        (r for r in preferred if partition_change.is_acceptable_leader(r, live, shutting_down)), None)
    if leader is None:
        return None
    return partition_change.changed_state(replicas, state, leader, tuple(replicas), controller_epoch)


_original_read_limit = partition.Partition.read_limit


def _read_like_a_follower(self, offset, *, follower):
    return _original_read_limit(self, offset, follower=True)


_original_on_write_done = TransactionCoordinator.on_write_done


def _prepare_taken_as_written(self, write, error, now):
    if write.purpose == WritePurpose.END_TXN:
        error = error.__class__.none
    return _original_on_write_done(self, write, error, now)


def _drop_any_pending_completion(self, transactional_id, coordinator_epoch):
    """TransactionCoordinator._pending_markers_of before the fix of commit 13a21b3."""
    pending = self._pending_completions.get(transactional_id)
    found = self._lookup(transactional_id)
    if not isinstance(found, tuple) or found[1] is None or pending is None \
            or found[0].coordinator_epoch != coordinator_epoch or pending.coordinator_epoch != coordinator_epoch:
        self._pending_completions.pop(transactional_id, None)
        return None
    return found[1]


def _no_verification_needed(self, producer_id, sequence, epoch, now):
    return partition_txns.SENTINEL


_PATCHES = {
    "hw-max": [(LeaderPartition, "maybe_increment_high_watermark", _hw_max)],
    "elect-outside-isr": [(partition_change, "elect_leader", _elect_ignoring_isr)],
    "no-truncation": [(FollowerPartition, "on_offset_for_leader_epoch_response", _no_truncation)],
    "isr-shrink-without-controller": [(LeaderPartition, "maybe_shrink_isr", _shrink_locally)],
    "no-broker-epoch": [(FollowerReplica, "is_stale_epoch", _never_stale),
                        (ControllerCore, "is_stale_broker_epoch", _never_stale)],
    "controller-view-drift": [(ControllerCore, "unconfirmed_keys", property(lambda self: []))],
    "reassign-unchecked-isr": [(reassignment, "state_within", _target_in_sync),
                               (reassignment, "is_complete", lambda target, state: True)],
    "read-past-hw": [(partition.Partition, "read_limit", _read_like_a_follower)],
    "txn-unsafe-prepare": [(TransactionCoordinator, "on_write_done", _prepare_taken_as_written)],
    "txn-stale-marker-drops-completion": [(TransactionCoordinator, "_pending_markers_of",
                                           _drop_any_pending_completion)],
    "txn-lso-ignores-unreplicated": [(partition_txns.PartitionTransactions, "first_unstable_offset",
                                      lambda self, high_watermark: min(self.ongoing, default=None))],
    "txn-skip-verification": [
        (partition_txns.PartitionTransactions, "maybe_start_transaction_verification", _no_verification_needed),
        (partition_txns.VerificationGuard, "verify", lambda self, request_guard: True)],
}


@contextlib.contextmanager
def applied(name: str | None):
    """Apply mutant `name` (None: none) for the duration of the block."""
    if name is None:
        yield
        return
    if name not in _PATCHES:
        raise ValueError(f"unknown mutant {name!r}; known: {', '.join(MUTANTS)}")
    originals = [(owner, attribute, owner.__dict__[attribute]) for owner, attribute, _ in _PATCHES[name]]
    for owner, attribute, replacement in _PATCHES[name]:
        setattr(owner, attribute, replacement)
    try:
        yield
    finally:
        for owner, attribute, original in originals:
            setattr(owner, attribute, original)

"""The invariants of `weir sim --scenario transactions`, checked as the run goes and at quiescence.

The checker keeps its own reading of each partition's log, independent of `PartitionTransactions`:
a transactional data record belongs to its producer's open span until that producer's next marker,
whose type (COMMIT or ABORT) is the record's fate. Each record carries the client's transaction
tag (`<transactional id>#<instance>.<n>`), so fates are known per client transaction.

- ATOMICITY: every record of one client transaction, on every partition, gets the same fate.
- DECIDED BEFORE ANSWERED: when a coordinator answers EndTxn OK, the committed part of
  `__transaction_state` (what every later coordinator loads) holds the outcome: the last record
  there of that id with the request's producer id and epoch is PrepareCommit/CompleteCommit (or
  the Abort pair). (A later record with another epoch, e.g. an InitProducerId answered
  REQUEST_TIMED_OUT whose record a later commit made durable, changes nothing of that outcome.)
- DURABILITY: an EndTxn answered OK gives every record of the transaction, on every partition,
  the answered outcome; and every batch answered OK to a produce is in the final log.
- READ_COMMITTED: what `fetch_read_committed` + `consume_read_committed` hand a consumer reading
  each partition up to its LSO (as the LSO moves, and once more from offset 0 at the end) are
  exactly the records whose fate is COMMIT: never an aborted one, never an open one, none missed.
- LSO: LSO <= HW always, and the LSO never moves backwards (not even across a leader change:
  a completed transaction counts as unstable until its marker is below the HW, so nothing the
  LSO passed can be cut).
- FENCING: the (producer id, epoch) pairs the coordinators answer to InitProducerId for one
  transactional id (in the order they answer, whichever coordinator) never go backwards, and two
  instances are never given the same pair.
- REBUILD: after a leader change, the transaction table replayed from the kept log, the old
  leader's table after `truncate_to`, and one restored from the last snapshot and replayed agree
  (producers, ongoing and unreplicated transactions, LSO, aborted index).
- NO HANGING TRANSACTION: at quiescence every partition's LSO equals its HW and its log end, no
  record is still open, and the coordinator holds no transaction that is not complete.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from weir.protocol.record_batch import CONTROL_BIT, read_batch_header
from weir.sim.checker import Violation
from weir.transactions.coordinator import TransactionResult
from weir.transactions.markers import ControlRecordType, read_marker
from weir.transactions.read_committed import consume_read_committed, consume_read_uncommitted, fetch_read_committed
from weir.transactions.state_log import TransactionState as S
from weir.transactions.state_log import read_key, read_value

COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT


def tag_of(value: bytes) -> str:
    return value.decode().split("|", 1)[0]


@dataclass
class _PartitionView:
    records: dict = field(default_factory=dict)  # offset -> value
    open: dict = field(default_factory=dict)  # producer id -> [offsets]
    fate: dict = field(default_factory=dict)  # offset -> ControlRecordType
    consumed: dict = field(default_factory=dict)  # offset -> value, read_committed
    position: int = 0
    last_lso: int = 0


class TxnChecker:
    def __init__(self, world) -> None:
        self.world = world
        self.violations: list[Violation] = []
        self.views: dict = {}
        self.fates: dict = {}  # tag -> {partition: {fates}}
        self.answered: dict = {}  # tag -> (TransactionResult, partitions written)
        self.pairs: dict = {}  # transactional id -> [(pid, epoch, instance)]
        self.committed = self.aborted = 0
        self._state_read = 0  # how much of __transaction_state's committed prefix was read
        self._state_last: dict = {}  # transactional id -> its last committed value there

    def fail(self, rule: str, detail: str) -> None:
        self.violations.append(Violation(rule, detail, self.world.events.now))

    def _view(self, partition) -> _PartitionView:
        view = self.views.get(partition.tp[1])
        if view is None:
            view = self.views[partition.tp[1]] = _PartitionView()
        return view

    # -- the log as it grows

    def on_append(self, partition, batch: bytes) -> None:
        self._read_batch(partition.tp[1], self._view(partition), batch)
        self.on_partition_changed(partition)

    def _read_batch(self, p: int, view: _PartitionView, batch: bytes) -> None:
        h = read_batch_header(batch)
        if h.attributes & CONTROL_BIT:
            marker = read_marker(batch)
            fate = marker.control_type
            for offset in view.open.pop(h.producer_id, []):
                view.fate[offset] = fate
                tag = tag_of(view.records[offset])
                fates = self.fates.setdefault(tag, {})
                fates.setdefault(p, set()).add(fate)
                if len(set().union(*fates.values())) > 1:
                    self.fail("atomicity", f"transaction {tag} has {self._describe(fates)}")
            return
        for record in consume_read_uncommitted([batch]):
            view.records[record.offset] = record.value
            view.open.setdefault(h.producer_id, []).append(record.offset)

    @staticmethod
    def _describe(fates: dict) -> str:
        return ", ".join(f"{'/'.join(sorted(f.name for f in v))} on partition {p}" for p, v in sorted(fates.items()))

    def on_rebuilt(self, partition, replayed, index, others) -> None:
        """A leader change built the partition's transaction table several ways: all must agree."""
        p = partition.tp[1]
        hw = partition.high_watermark
        for how, table, other_index in others:
            for what in ("producers", "ongoing", "unreplicated"):
                if getattr(table, what) != getattr(replayed, what):
                    self.fail("rebuild", f"partition {p}: {what} after {how} differ from a replay of the log: "
                              f"{getattr(table, what)} != {getattr(replayed, what)}")
                    return
            if table.last_stable_offset(hw) != replayed.last_stable_offset(hw):
                self.fail("rebuild", f"partition {p}: LSO after {how} differs from a replay of the log")
            if other_index is not None and other_index.entries != index.entries:
                self.fail("rebuild", f"partition {p}: the aborted index after {how} differs from a replay: "
                          f"{other_index.entries} != {index.entries}")

    def on_truncated(self, partition) -> None:
        """A leader change cut the log: read it again."""
        p = partition.tp[1]
        old = self._view(partition)
        for fates in self.fates.values():
            fates.pop(p, None)
        view = self.views[p] = _PartitionView(consumed=old.consumed, position=old.position, last_lso=old.last_lso)
        for batch in partition.batches:
            self._read_batch(p, view, batch)
        self.on_partition_changed(partition)

    def on_partition_changed(self, partition) -> None:
        view = self._view(partition)
        hw, lso = partition.high_watermark, partition.last_stable_offset
        if lso > hw:
            self.fail("lso", f"partition {partition.tp[1]}: LSO {lso} above HW {hw}")
        if lso < view.last_lso:
            self.fail("lso", f"partition {partition.tp[1]}: LSO went back from {view.last_lso} to {lso}")
        view.last_lso = max(view.last_lso, lso)
        if lso > view.position:
            self._consume(partition, view, lso)

    def _consume(self, partition, view: _PartitionView, lso: int) -> None:
        """A read_committed consumer's next fetch, from its position up to the LSO."""
        batches, aborted = fetch_read_committed(partition.batches_from(view.position), [partition.index],
                                                view.position, lso,
                                                partition.log_end_offset)
        for record in consume_read_committed(batches, aborted, view.position):
            fate = view.fate.get(record.offset)
            if fate != COMMIT or view.records.get(record.offset) != record.value:
                state = "open" if fate is None else fate.name
                self.fail("read-committed", f"partition {partition.tp[1]}: a read_committed consumer read "
                          f"{record.value!r} at {record.offset}, whose transaction is {state}")
            view.consumed[record.offset] = record.value
        if batches:
            view.position = read_batch_header(batches[-1]).last_offset + 1

    # -- what clients were told

    def on_init_answer(self, tid: str, instance: str, pid: int, epoch: int) -> None:
        for other_pid, other_epoch, other in self.pairs.get(tid, []):
            if (pid, epoch) < (other_pid, other_epoch) or ((pid, epoch) == (other_pid, other_epoch)
                                                           and other != instance):
                self.fail("fencing", f"{tid}: InitProducerId gave {instance} ({pid}, {epoch}) after giving {other} "
                          f"({other_pid}, {other_epoch})")
        self.pairs.setdefault(tid, []).append((pid, epoch, instance))

    def on_end_txn_answered(self, tid: str, producer_id: int, producer_epoch: int, result: TransactionResult,
                            state_log) -> None:
        # the committed prefix only grows (a failover keeps it): read what is new of it
        for key, value in state_log.records[self._state_read:state_log.committed]:
            if value is not None:
                decoded = read_value(value)
                self._state_last[(read_key(key), decoded.producer_id, decoded.producer_epoch)] = decoded
        self._state_read = max(self._state_read, state_log.committed)
        last = self._state_last.get((tid, producer_id, producer_epoch))
        want = (S.PREPARE_COMMIT, S.COMPLETE_COMMIT) if result == TransactionResult.COMMIT \
            else (S.PREPARE_ABORT, S.COMPLETE_ABORT)
        if last is None or last.transaction_status not in want:
            held = "nothing" if last is None else last.transaction_status.kafka_name
            self.fail("durability", f"{tid}: EndTxn {result.name} answered OK to producer ({producer_id}, "
                      f"{producer_epoch}) while the committed __transaction_state holds {held} for it")

    def on_end_answer(self, tag: str, result: TransactionResult, written: frozenset) -> None:
        if tag in self.answered and self.answered[tag][0] != result:
            self.fail("durability", f"{tag}: EndTxn answered OK for both outcomes")
        self.answered[tag] = (result, written)
        if result == TransactionResult.COMMIT:
            self.committed += 1
        else:
            self.aborted += 1

    # -- at quiescence

    def final_check(self) -> None:
        w = self.world
        for partition in w.partitions:
            p = partition.tp[1]
            view = self._view(partition)
            hw, lso, leo = partition.high_watermark, partition.last_stable_offset, partition.log_end_offset
            if not lso == hw == leo or view.open:
                opened = {pid: offsets[:3] for pid, offsets in view.open.items()}
                self.fail("hanging-transaction", f"partition {p}: LSO {lso}, HW {hw}, log end {leo}; open "
                          f"(producer: first offsets) {opened}")
            batches, aborted = fetch_read_committed(partition.batches, [partition.index], 0, lso, leo)
            read = {r.offset: r.value for r in consume_read_committed(batches, aborted, 0)}
            committed = {o: view.records[o] for o, fate in view.fate.items() if fate == COMMIT}
            if read != committed:
                extra = sorted(set(read) - set(committed))[:3]
                missed = sorted(set(committed) - set(read))[:3]
                self.fail("read-committed", f"partition {p}: read_committed from 0 read offsets {extra} that are "
                          f"not committed and missed committed {missed}")
            changed = [o for o, v in view.consumed.items() if committed.get(o) != v]
            if changed:
                self.fail("read-committed", f"partition {p}: records read as committed are no longer: {changed[:3]}")
        for tag, (result, written) in sorted(self.answered.items()):
            want = COMMIT if result == TransactionResult.COMMIT else ABORT
            fates = self.fates.get(tag, {})
            for p in written:
                if p[1] not in fates:
                    self.fail("durability", f"{tag}: a produce to partition {p[1]} was answered OK, "
                              "but its records are not in the log with a marker")
            for p, seen in fates.items():
                if seen != {want}:
                    self.fail("durability", f"{tag}: EndTxn {result.name} answered OK, "
                              f"but partition {p} has {'/'.join(f.name for f in seen)}")
        log = w.state_log
        if log.leader is not None:
            for meta in log.leader.core.transactions():
                if meta.state.kafka_name not in ("Empty", "CompleteCommit", "CompleteAbort") \
                        or meta.pending_state is not None:
                    self.fail("hanging-transaction", f"{meta.transactional_id} is {meta.state.kafka_name} at the end")

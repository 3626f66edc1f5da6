"""`weir sim --scenario transactions`: the transaction coordinator and partitions under faults (issue 13).

The simulated world only; every decision is production code's:

- COORDINATOR. Three coordinator brokers, each with a `weir.transactions.coordinator.TransactionCoordinator`.
  `__transaction_state` (one partition) is a replicated log modelled by its outcomes: an append is
  refused (NOT_ENOUGH_REPLICAS, not written), or written and answered REQUEST_TIMED_OUT (it stays in
  the uncommitted tail: a later commit makes it durable, a failover may cut it), or written and
  committed. A failover moves the leadership (a new coordinator epoch): the new leader keeps a prefix
  of the log between the committed offset and its end, `start_loading` / `finish_loading` rebuild
  the transactions from it; the old leader is unloaded (or crashed: its memory is gone) and its
  in-flight writes fail, some answered before the unload, some after. A bounce moves the
  leadership away and back within milliseconds, while the first epoch's markers are in flight.
- PARTITIONS. Each data partition has one leader at a time with a log of record-batch bytes, a
  `PartitionTransactions`, the idempotent `ProducerStateTable` and a `TransactionIndex`. A produce
  of a transactional batch asks the coordinator to verify the partition (KIP-890 part 1) with the
  guard `maybe_start_transaction_verification` handed out, then appends; WriteTxnMarkers appends a
  `marker_batch`. Produce and markers are acks=all: answered once the high watermark passes them.
  The HW follows the log end after a replication delay, unless replication stalls. A leader change
  keeps a prefix between the HW and the log end (the new leader's replica) and rebuilds its tables
  by replaying it, as a follower has them; requests waiting at the old leader fail.
- PRODUCERS. Transactional producers as librdkafka drives them: InitProducerId, AddPartitionsToTxn
  before the first batch to each partition, one batch in flight per partition, EndTxn commit or
  abort, retries on lost answers (request timeout) and on CONCURRENT_TRANSACTIONS /
  COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR, an abort and an epoch bump (KIP-360) after an
  abortable error (a batch that timed out is given up without waiting for it: it may still land),
  and a fenced producer gives up (a new instance of its transactional id starts later). Several
  instances share one transactional id, to fence each other.
- NETWORK. Messages are lost, delayed, duplicated (markers, answers, produce) and reordered. Client
  requests to the coordinator are never duplicated nor delivered after the client gave up on them
  (TCP: one connection, in order); produce requests may be held far beyond the client's timeout.
  Markers are duplicated only within the network's delay bound: a marker arriving after the next
  transaction began on its partition is the hazard of transaction version 1 that KIP-890 part 2's
  per-transaction epoch bump closes, outside what version 1 promises.

Time runs in simulated ms from one seed; faults stop at `heal_at_ms`, producers finish their
transaction and stop, and the run waits for quiescence (no transaction open anywhere) before the
checker's final verdict.
"""

from __future__ import annotations

import bisect
import hashlib
import random
import struct
from dataclasses import dataclass, field

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from weir.protocol.record_batch import CONTROL_BIT, TRANSACTIONAL_BIT, read_batch_header
from weir.protocol.records import encode_batch
from weir.replication.producer_state import Duplicate, ProducerStateTable
from weir.sim.events import EventLimitExceeded, EventQueue
from weir.sim.nemesis import Fault
from weir.sim.txn_checker import TxnChecker
from weir.transactions.coordinator import TransactionConfig, TransactionCoordinator, TransactionResult
from weir.transactions.markers import marker_batch, marker_of
from weir.transactions.partition_txns import (SENTINEL, AppendedBatch, AppendOrigin, PartitionTransactions, Refused,
                                              produce_error_for_verification)
from weir.transactions.state_log import TransactionState
from weir.transactions.txn_index import TransactionIndex

TOPIC = "txn"
STATE_PARTITION = 0
E = ErrorCode
RETRIABLE_COORDINATOR = frozenset({E.not_coordinator, E.coordinator_not_available, E.coordinator_load_in_progress,
                                   E.concurrent_transactions})
RETRIABLE_PRODUCE = frozenset({E.not_leader_or_follower, E.not_enough_replicas, E.not_enough_replicas_after_append,
                               E.request_timed_out})
# what AddPartitionsToTxnManager tells the producer when the coordinator could not verify: retry
VERIFICATION_RETRIABLE = frozenset({E.not_coordinator, E.coordinator_not_available, E.coordinator_load_in_progress,
                                    E.concurrent_transactions, E.request_timed_out})
MARKER_INJECTED_ERRORS = (E.not_leader_or_follower, E.not_enough_replicas, E.request_timed_out)


@dataclass(frozen=True)
class TxnSimSettings:
    transactional_ids: int = 3
    producers: int = 4  # instances, on the ids round robin: the first ids are shared
    partitions: int = 3
    coordinator_brokers: int = 3
    max_delay_ms: int = 8
    drop_rate: float = 0.02
    duplicate_rate: float = 0.03
    late_rate: float = 0.03  # produce requests held 150..500 ms (past the client's timeout)
    write_refused_rate: float = 0.04  # __transaction_state appends refused
    write_timeout_rate: float = 0.04  # written, answered REQUEST_TIMED_OUT, left uncommitted
    marker_error_rate: float = 0.08  # WriteTxnMarkers answered with a retriable error
    request_timeout_ms: int = 100  # the client's request.timeout.ms
    marker_timeout_ms: int = 60  # the coordinator's channel manager
    verification_timeout_ms: int = 40
    transaction_timeout_ms: int = 700
    abort_interval_ms: int = 200
    expire_interval_ms: int = 300
    transactional_id_expiration_ms: int = 700
    heal_at_ms: int = 2500
    settle_bound_ms: int = 4000
    fault_window_ms: tuple[int, int] = (100, 2300)


def random_txn_schedule(rng: random.Random, s: TxnSimSettings) -> list[Fault]:
    start, end = s.fault_window_ms
    faults = []
    for _ in range(rng.randint(0, 3)):
        faults.append(Fault(rng.randint(start, end), "coordinator-failover", "coordinator"))
    for _ in range(rng.randint(0, 1)):
        faults.append(Fault(rng.randint(start, end), "coordinator-bounce", "coordinator", rng.randint(5, 50)))
    for _ in range(rng.randint(0, 1)):
        faults.append(Fault(rng.randint(start, end), "coordinator-crash", "coordinator", rng.randint(100, 600)))
    for _ in range(rng.randint(0, 3)):
        faults.append(Fault(rng.randint(start, end), "leader-change", f"partition:{rng.randrange(s.partitions)}"))
    for _ in range(rng.randint(0, 2)):
        faults.append(Fault(rng.randint(start, end), "stall", f"partition:{rng.randrange(s.partitions)}",
                            rng.randint(50, 400)))
    for _ in range(rng.randint(0, 2)):  # past transaction.timeout.ms, often: the coordinator aborts
        faults.append(Fault(rng.randint(start, end), "producer-pause", f"producer:{rng.randrange(s.producers)}",
                            rng.randint(200, 1200)))
    for _ in range(rng.randint(0, 3)):
        faults.append(Fault(rng.randint(start, end), "producer-crash", f"producer:{rng.randrange(s.producers)}",
                            rng.randint(50, 800)))
    return sorted(faults, key=lambda f: (f.at_ms, f.kind, f.target))


def transactional_batch(values: list[bytes], *, producer_id: int, producer_epoch: int, base_sequence: int,
                        timestamp: int) -> bytes:
    raw = bytearray(encode_batch(values, producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_sequence=base_sequence, timestamp=timestamp))
    struct.pack_into(">h", raw, 21, TRANSACTIONAL_BIT)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


def at_offset(batch: bytes, base_offset: int) -> bytes:
    """The base offset is outside the CRC: the leader patches it in place."""
    return struct.pack(">q", base_offset) + batch[8:]


# ----- the network

class Wire:
    def __init__(self, world: TxnWorld, rng: random.Random) -> None:
        self.world, self.rng = world, rng
        self.in_flight = 0

    def send(self, callback, *args, duplicable: bool = False, late: bool = False, spread: int | None = None) -> None:
        w, s, rng = self.world, self.world.settings, self.rng
        if w.faulty and rng.random() < s.drop_rate:
            return
        delay = rng.randint(1, s.max_delay_ms)
        if late and w.faulty and rng.random() < s.late_rate:
            delay = rng.randint(150, 500)
        self._schedule(delay, callback, args)
        if duplicable and w.faulty and rng.random() < s.duplicate_rate:
            self._schedule(delay + rng.randint(0, s.max_delay_ms if spread is None else spread), callback, args)

    def _schedule(self, delay: int, callback, args) -> None:
        self.in_flight += 1
        self.world.events.after(delay, self._deliver, callback, args)

    def _deliver(self, callback, args) -> None:
        self.in_flight -= 1
        callback(*args)


# ----- the coordinator side

class CoordinatorBroker:
    def __init__(self, world: TxnWorld, broker_id: int) -> None:
        self.world, self.id = world, broker_id
        self.core = TransactionCoordinator(world.config)
        self.alive = True
        self.loaded_epoch = -1

    def init_producer_id(self, tid, expected, reply) -> None:
        if self.alive:
            w = self.world
            fx = self.core.init_producer_id(tid, w.settings.transaction_timeout_ms, expected, w.events.now,
                                            w.allocate_producer_id, token=reply)
            w.apply(self, self.core, fx)

    def add_partitions(self, tid, pid, epoch, partitions, reply) -> None:
        if self.alive:
            fx = self.core.add_partitions_to_txn(tid, pid, epoch, partitions, self.world.events.now, token=reply)
            self.world.apply(self, self.core, fx)

    def end_txn(self, tid, pid, epoch, result, reply) -> None:
        if self.alive:
            fx = self.core.end_txn(tid, pid, epoch, result, self.world.events.now, token=reply)
            self.world.apply(self, self.core, fx)

    def verify(self, tid, pid, epoch, tp, reply) -> None:
        if self.alive:
            error = self.core.verify_partitions(tid, pid, epoch, [tp])[tp]
            self.world.wire.send(reply, error, duplicable=True)


@dataclass
class _PendingWrite:
    broker: CoordinatorBroker
    core: TransactionCoordinator
    write: object
    offset: int


class StateLog:
    """`__transaction_state` partition 0, by its outcomes (see the module's docstring)."""

    def __init__(self, world: TxnWorld) -> None:
        self.world = world
        self.records: list[tuple[bytes, bytes | None]] = []
        self.committed = 0
        self.epoch = 0
        self.leader: CoordinatorBroker | None = None
        self.pending: dict[int, _PendingWrite] = {}
        self._ids = 0

    def append(self, broker: CoordinatorBroker, core, write) -> None:
        w, s, rng = self.world, self.world.settings, self.world.rng
        if self.leader is not broker or broker.core is not core or write.coordinator_epoch != self.epoch:
            w.events.after(1, w.write_done, broker, core, write, E.not_leader_or_follower)
            return
        fate = rng.random() if w.faulty else 1.0
        delay = rng.randint(1, 10)
        if fate < s.write_refused_rate:
            w.events.after(delay, w.write_done, broker, core, write, E.not_enough_replicas)
            return
        self._ids += 1
        self.records.append((write.key(), write.value()))
        self.pending[self._ids] = _PendingWrite(broker, core, write, len(self.records) - 1)
        timed_out = fate < s.write_refused_rate + s.write_timeout_rate
        w.events.after(delay + (20 if timed_out else 0), self._outcome, self._ids, timed_out)

    def _outcome(self, write_id: int, timed_out: bool) -> None:
        pending = self.pending.pop(write_id, None)
        if pending is None:  # a failover answered it
            return
        if not timed_out:
            self.committed = max(self.committed, pending.offset + 1)
        self.world.write_done(pending.broker, pending.core, pending.write,
                              E.request_timed_out if timed_out else E.none)


# ----- the data partitions

@dataclass
class _Waiting:
    offset: int
    reply: object
    answer: object


class DataPartition:
    def __init__(self, world: TxnWorld, index: int) -> None:
        self.world, self.tp = world, (TOPIC, index)
        self.batches: list[bytes] = []
        self.base_offsets: list[int] = []  # of the batches, for bisect
        self.log_end_offset = 0
        self.high_watermark = 0
        self.leader_epoch = 0
        self.txns = PartitionTransactions()
        self.producers = ProducerStateTable()
        self.index = TransactionIndex()
        self.waiting: list[_Waiting] = []
        self.stalled_until = -1
        self.replication_scheduled = False
        self.verifying = 0
        self.snapshot: tuple[int, str] | None = None  # (offset, PartitionTransactions.to_snapshot())

    # -- produce (KafkaApis / ReplicaManager.appendRecords with verification)

    def produce(self, batch: bytes, tid: str, tag: str, reply) -> None:
        w = self.world
        if w.faulty and w.rng.random() < w.settings.marker_error_rate / 2:
            return w.wire.send(reply, E.not_leader_or_follower, duplicable=True)
        h = read_batch_header(batch)
        seen = self.producers.check(h.producer_id, h.producer_epoch, h.base_sequence, h.record_count)
        if isinstance(seen, ErrorCode):
            return w.wire.send(reply, seen, duplicable=True)
        if isinstance(seen, Duplicate):
            return self._await(seen.last_offset, reply, E.none)
        guard = SENTINEL
        if self.txns.verification_enabled:
            guard = self.txns.maybe_start_transaction_verification(h.producer_id, h.base_sequence,
                                                                   h.producer_epoch, w.events.now)
        if guard is SENTINEL:
            return self._append(batch, tag, guard, reply)
        coordinator = w.state_log.leader
        epoch = self.leader_epoch
        asked = {"answered": False}
        self.verifying += 1

        def answered(error):
            if asked["answered"]:
                return
            asked["answered"] = True
            self.verifying -= 1
            if error is None:
                error = E.request_timed_out
            if self.leader_epoch != epoch:
                return w.wire.send(reply, E.not_leader_or_follower, duplicable=True)
            if error != E.none:
                if error not in VERIFICATION_RETRIABLE:
                    w.trace(f"partition {self.tp[1]}: the coordinator does not verify {tag}'s batch: {error.name}")
                if error in VERIFICATION_RETRIABLE:
                    error = E.not_enough_replicas
                return w.wire.send(reply, produce_error_for_verification(error), duplicable=True)
            # the append starts over (the sequence may have been taken meanwhile)
            again = self.producers.check(h.producer_id, h.producer_epoch, h.base_sequence, h.record_count)
            if isinstance(again, ErrorCode):
                return w.wire.send(reply, again, duplicable=True)
            if isinstance(again, Duplicate):
                return self._await(again.last_offset, reply, E.none)
            self._append(batch, tag, guard, reply)

        if coordinator is not None:
            w.wire.send(coordinator.verify, tid, h.producer_id, h.producer_epoch, self.tp, answered)
        w.events.after(w.settings.verification_timeout_ms, answered, None)

    def _append(self, batch: bytes, tag: str, guard, reply) -> None:
        placed = at_offset(batch, self.log_end_offset)
        checked = self.txns.prepare_append([AppendedBatch.of(placed)], AppendOrigin.CLIENT, guard)
        if isinstance(checked, Refused):
            self.world.trace(f"partition {self.tp[1]} refuses {tag}'s batch: {checked.error.name}")
            return self.world.wire.send(reply, checked.error, duplicable=True)
        h = read_batch_header(placed)
        self._add(placed, checked)
        self.producers.record(h.producer_id, h.producer_epoch, h.base_sequence, h.record_count, h.base_offset,
                              h.last_offset, h.max_timestamp)
        self._await(h.last_offset, reply, E.none)

    # -- WriteTxnMarkers

    def write_marker(self, markers, reply) -> None:
        w = self.world
        if w.faulty and w.rng.random() < w.settings.marker_error_rate:
            error = w.rng.choice(MARKER_INJECTED_ERRORS)
            if error != E.request_timed_out:
                return w.wire.send(reply, error, duplicable=True)
        else:
            error = E.none
        marker = marker_of(markers.result == TransactionResult.COMMIT, markers.coordinator_epoch)
        batch = marker_batch(markers.producer_id, markers.producer_epoch, marker, timestamp=w.events.now,
                             base_offset=self.log_end_offset)
        checked = self.txns.prepare_append([AppendedBatch.of(batch)], AppendOrigin.COORDINATOR)
        if isinstance(checked, Refused):
            w.trace(f"partition {self.tp[1]} refuses the {markers.result.name} marker of "
                    f"{markers.transactional_id} (epoch {markers.producer_epoch}, coordinator epoch "
                    f"{markers.coordinator_epoch}): {checked.error.name}")
            return w.wire.send(reply, checked.error, duplicable=True)
        self._add(batch, checked)
        if error == E.request_timed_out:  # written, but the acks=all wait timed out
            return w.wire.send(reply, error, duplicable=True)
        self._await(self.log_end_offset - 1, reply, E.none)

    # -- the log

    def _add(self, batch: bytes, checked) -> None:
        outcome = self.txns.complete_append(checked)
        for entry in outcome.aborted:
            self.index.append(entry)
        h = read_batch_header(batch)
        self.batches.append(batch)
        self.base_offsets.append(h.base_offset)
        self.log_end_offset = h.last_offset + 1
        self.world.checker.on_append(self, batch)
        self._schedule_replication()

    def _await(self, offset: int, reply, answer) -> None:
        if offset < self.high_watermark:
            return self.world.wire.send(reply, answer, duplicable=True)
        self.waiting.append(_Waiting(offset, reply, answer))
        self._schedule_replication()

    def _schedule_replication(self) -> None:
        if not self.replication_scheduled:
            self.replication_scheduled = True
            w = self.world
            w.events.after(max(w.rng.randint(1, 8), self.stalled_until - w.events.now), self._replicate)

    def _replicate(self) -> None:
        self.replication_scheduled = False
        w = self.world
        if w.events.now < self.stalled_until:
            return self._schedule_replication()
        if self.high_watermark < self.log_end_offset:
            self.high_watermark = self.log_end_offset
            self.txns.on_high_watermark_updated(self.high_watermark)
            done = [x for x in self.waiting if x.offset < self.high_watermark]
            self.waiting = [x for x in self.waiting if x.offset >= self.high_watermark]
            for x in done:
                w.wire.send(x.reply, x.answer, duplicable=True)
            if w.rng.random() < 0.2:  # the producer-state snapshot, at the HW
                self.snapshot = (self.high_watermark, self.txns.to_snapshot())
            w.checker.on_partition_changed(self)

    @property
    def last_stable_offset(self) -> int:
        return self.txns.last_stable_offset(self.high_watermark)

    def batches_from(self, offset: int) -> list[bytes]:
        """The batches from the one holding `offset` (a fetch's starting point)."""
        return self.batches[max(0, bisect.bisect_right(self.base_offsets, offset) - 1):]

    # -- faults

    def change_leader(self) -> None:
        """A replica holding a prefix between the HW and the log end takes over; requests waiting
        at the old leader fail. Its transaction table is built three ways, which must agree (the
        checker compares them): replicating the prefix (`replay`), the old leader undoing its cut
        tail (`truncate_to`), and a restart from the last snapshot plus the log after it."""
        w = self.world
        kept_end = w.rng.choice([o for o in self.base_offsets + [self.log_end_offset] if o >= self.high_watermark])
        cut = bisect.bisect_left(self.base_offsets, kept_end)
        kept = self.batches = self.batches[:cut]
        del self.base_offsets[cut:]
        self.log_end_offset = kept_end
        self.leader_epoch += 1
        replayed, index, self.producers = PartitionTransactions(), TransactionIndex(), ProducerStateTable()
        for batch in kept:
            h = read_batch_header(batch)
            for entry in replayed.replay([AppendedBatch.of(batch)]).aborted:
                index.append(entry)
            if not h.attributes & CONTROL_BIT:
                self.producers.record(h.producer_id, h.producer_epoch, h.base_sequence, h.record_count,
                                      h.base_offset, h.last_offset, h.max_timestamp)
        replayed.on_high_watermark_updated(self.high_watermark)
        undone = self.txns
        undone.truncate_to(kept_end)
        self.index.truncate_to(kept_end)
        others = [("truncate_to", undone, self.index)]
        if self.snapshot is not None:
            offset, text = self.snapshot
            restored = PartitionTransactions.from_snapshot(text, offset)
            restored.replay(AppendedBatch.of(b) for b in self.batches_from(offset)
                            if read_batch_header(b).base_offset >= offset)
            restored.on_high_watermark_updated(self.high_watermark)
            others.append(("snapshot + replay", restored, None))
        w.checker.on_rebuilt(self, replayed, index, others)
        self.txns = w.rng.choice([replayed] + [table for _, table, _ in others])
        self.index = index
        failed, self.waiting = self.waiting, []
        for x in failed:
            w.wire.send(x.reply, E.not_leader_or_follower, duplicable=True)
        w.checker.on_truncated(self)
        self._schedule_replication()


# ----- the producers

class Producer:
    """One instance of a transactional producer (librdkafka's transaction manager, simplified)."""

    def __init__(self, world: TxnWorld, slot: int, tid: str, instance: int) -> None:
        self.world, self.slot, self.tid, self.instance = world, slot, tid, instance
        self.rng = random.Random(f"producer/{world.seed}/{slot}/{instance}")
        self.alive = True
        self.done = False
        self.pid = self.epoch = -1
        self.sequences: dict = {}
        self.request = 0  # the id of the request whose answer is awaited
        self.attempts = 0
        self.txn_no = 0
        self.tag = ""
        self.todo: list = []
        self.added: set = set()
        self.written: set = set()
        self.needs_bump = False
        self.paused_until = -1

    def name(self) -> str:
        return f"{self.tid}#p{self.slot}i{self.instance}"

    def start(self) -> None:
        self._init(None)

    # -- requests with a timeout and retries

    def _call(self, route, method: str, args: tuple, on_answer) -> None:
        """Send to `route()` (where the client sends it now) and await one answer, or a timeout."""
        if not self.alive:
            return
        if self.world.events.now < self.paused_until:  # a pause (GC, a stuck thread): later
            self.world.events.at(self.paused_until, self._call, route, method, args, on_answer)
            return
        target = route()
        self.request += 1
        rid = self.request
        w = self.world

        def answer(result):
            if self.alive and self.request == rid:
                self.request += 1
                on_answer(result)
        answer.tid, answer.instance, answer.method = self.tid, self.name(), method  # for the checker
        answer.result, answer.producer = (args[3], args[1:3]) if method == "end_txn" else (None, None)
        if target is None:
            w.events.after(10, answer, E.coordinator_not_available)
            return
        w.wire.send(getattr(target, method), *args, answer, late=method == "produce",
                    duplicable=method == "produce")
        w.events.after(w.settings.request_timeout_ms, answer, None)

    def _coordinator_call(self, method: str, args: tuple, on_ok, *, on_error=None, limit: int = 25) -> None:
        self.attempts = 0

        def attempt():
            self.attempts += 1
            self._call(self._coordinator, method, args, handle)

        def handle(result):
            error = result.error if hasattr(result, "error") else result
            if error == E.none:
                return on_ok(result)
            if (error is None or error in RETRIABLE_COORDINATOR) and self.attempts < limit:
                return self.world.events.after(self.rng.randint(5, 25), attempt)
            if on_error is not None and error is not None:
                return on_error(error)
            self._give_up(f"{method}: {error.name if error is not None else 'timed out'}")
        attempt()

    def _give_up(self, why: str) -> None:
        """Fatal (fenced) or out of retries: this instance stops; a new one starts later."""
        w = self.world
        w.trace(f"producer {self.name()} gives up: {why}")
        self.alive = False
        w.restart_producer(self.slot, self.rng.randint(50, 400))

    # -- InitProducerId

    def _init(self, expected) -> None:
        self._coordinator_call("init_producer_id", (self.tid, expected), self._initialized)

    def _initialized(self, answer) -> None:
        if (answer.producer_id, answer.producer_epoch) != (self.pid, self.epoch):
            self.sequences = {}
        self.pid, self.epoch = answer.producer_id, answer.producer_epoch
        self.needs_bump = False
        self._next_transaction()

    # -- one transaction

    def _next_transaction(self) -> None:
        w = self.world
        if not w.faulty:
            self.done = True
            return
        self.txn_no += 1
        self.tag = f"{self.name()}.{self.txn_no}"
        count = self.rng.choice((1, 2, 2, 3))
        self.todo = self.rng.sample(range(w.settings.partitions), min(count, w.settings.partitions))
        self.added, self.written = set(), set()
        self.commit = self.rng.random() < 0.8
        w.events.after(self.rng.randint(1, 30), self._next_partition)

    def _next_partition(self) -> None:
        if not self.alive:
            return
        if not self.todo:
            return self._end(TransactionResult.COMMIT if self.commit else TransactionResult.ABORT)
        tp = (TOPIC, self.todo[0])
        if tp in self.added:
            return self._produce(tp, 1)

        def added(_):
            self.added.add(tp)
            self._produce(tp, 1)
        self._coordinator_call("add_partitions", (self.tid, self.pid, self.epoch, [tp]), added,
                               on_error=self._abortable_or_fatal)

    def _produce(self, tp, attempt: int) -> None:
        """One batch to `tp`, retried (same sequence) up to 5 attempts, or given up."""
        sequence = self.sequences.get(tp, 0)
        attempts = [attempt]
        values = [f"{self.tag}|{tp[1]}|{sequence + i}".encode() for i in range(self.rng.choice((1, 2)))]
        batch = transactional_batch(values, producer_id=self.pid, producer_epoch=self.epoch,
                                    base_sequence=sequence, timestamp=self.world.events.now)

        def answered(error):
            if error == E.none:
                self.sequences[tp] = sequence + len(values)
                self.written.add(tp)
                self.todo.pop(0)
                return self._next_partition()
            if error is None and self.rng.random() < 0.4:
                # delivery timeout: given up, without waiting for the request, which may still land
                return self._abort_after(f"produce to {tp[1]} timed out")
            if (error is None or error in RETRIABLE_PRODUCE) and attempts[0] < 5:
                attempts[0] += 1
                return self.world.events.after(self.rng.randint(5, 20), self._send_produce, tp, batch, answered)
            self._abort_after(f"produce to {tp[1]}: {error.name if error is not None else 'timed out'}")
        self._send_produce(tp, batch, answered)

    def _send_produce(self, tp, batch, answered) -> None:
        self._call(lambda: self.world.partitions[tp[1]], "produce", (batch, self.tid, self.tag), answered)

    def _coordinator(self):
        return self.world.state_log.leader  # FindCoordinator's answer

    def _abortable_or_fatal(self, error) -> None:
        if error in (E.producer_fenced, E.invalid_producer_epoch, E.invalid_producer_id_mapping,
                     E.transactional_id_authorization_failed):
            return self._give_up(error.name)
        self._abort_after(error.name)

    def _abort_after(self, why: str) -> None:
        self.world.trace(f"producer {self.name()} aborts {self.tag}: {why}")
        self.needs_bump = True
        self._end(TransactionResult.ABORT)

    def _end(self, result: TransactionResult) -> None:
        if not self.added:
            return self._after_end()
        tag, written = self.tag, frozenset(self.written)

        def ended(_):
            self.world.checker.on_end_answer(tag, result, written)
            self._after_end()

        def refused(error):
            self._give_up(f"EndTxn {result.name}: {error.name}")
        self._coordinator_call("end_txn", (self.tid, self.pid, self.epoch, result), ended, on_error=refused)

    def _after_end(self) -> None:
        if self.needs_bump:  # KIP-360: a new epoch, so the batches given up on are fenced
            return self._init((self.pid, self.epoch))
        self._next_transaction()

    def crash(self) -> None:
        self.alive = False


# ----- the world

@dataclass
class TxnRunResult:
    seed: int
    violations: list
    trace_hash: str
    events: int
    sim_ms: int
    acked: int  # EndTxn answered OK
    lost_writes: int
    schedule: list
    trace: list = field(default_factory=list)
    committed: int = 0
    aborted: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations


class TxnWorld:
    def __init__(self, seed: int, settings: TxnSimSettings | None = None, schedule: list[Fault] | None = None) -> None:
        self.seed = seed
        self.settings = s = settings or TxnSimSettings()
        self.events = EventQueue(max_events=300_000)
        self.rng = random.Random(f"txn-world/{seed}")
        self.wire = Wire(self, random.Random(f"txn-net/{seed}"))
        self.config = TransactionConfig(num_partitions=1, transaction_max_timeout_ms=60_000,
                                        transactional_id_expiration_ms=s.transactional_id_expiration_ms,
                                        abort_timed_out_transactions_interval_ms=s.abort_interval_ms,
                                        remove_expired_transactional_ids_interval_ms=s.expire_interval_ms)
        self.lines: list[str] = []
        self.faulty = True
        self.finished = False
        self._next_pid = 1000
        self.checker = TxnChecker(self)
        self.coordinators = [CoordinatorBroker(self, b) for b in range(1, s.coordinator_brokers + 1)]
        self.state_log = StateLog(self)
        self.partitions = [DataPartition(self, p) for p in range(s.partitions)]
        self.tids = [f"tx{i}" for i in range(s.transactional_ids)]
        self.instances = [0] * s.producers
        self.producers: list[Producer] = []
        for slot in range(s.producers):
            producer = Producer(self, slot, self.tids[slot % len(self.tids)], 0)
            self.producers.append(producer)
            self.events.at(self.rng.randint(0, 20), producer.start)
        if schedule is None:
            schedule = random_txn_schedule(random.Random(f"txn-schedule/{seed}"), s)
        self.schedule = schedule
        for fault in schedule:
            self.events.at(fault.at_ms, self._fault, fault)
        self._elect(self.coordinators[0])
        self.events.after(s.abort_interval_ms, self._abort_timer)
        self.events.after(s.expire_interval_ms, self._expire_timer)
        self.events.at(s.heal_at_ms, self._heal)

    def trace(self, text: str) -> None:
        self.lines.append(f"{self.events.now:6d} {text}")

    def allocate_producer_id(self) -> int:
        self._next_pid += 1
        return self._next_pid

    # -- the coordinator's effects

    def apply(self, broker: CoordinatorBroker, core, fx) -> None:
        for token, answer in fx.answers:
            if answer.error == E.none and answer.producer_id >= 0:  # InitProducerId's: fencing
                self.checker.on_init_answer(token.tid, token.instance, answer.producer_id, answer.producer_epoch)
            if answer.error == E.none and token.method == "end_txn":
                self.checker.on_end_txn_answered(token.tid, *token.producer, token.result, self.state_log)
            self.wire.send(token, answer, duplicable=True)
        for write in fx.writes:
            self.state_log.append(broker, core, write)
        for markers in fx.markers:
            self._send_markers(broker, core, markers)
        for write in fx.retry_writes:
            self.events.after(20, self._retry_write, broker, core, write)

    def _retry_write(self, broker, core, write) -> None:
        if broker.core is core:
            self.state_log.append(broker, core, write)

    def write_done(self, broker, core, write, error) -> None:
        if broker.core is not core or not broker.alive:
            return  # crashed meanwhile: nobody hears of it
        self.apply(broker, core, core.on_write_done(write, error, self.events.now))

    def _send_markers(self, broker, core, markers, delay: int = 0) -> None:
        for tp in sorted(markers.partitions):
            self.events.after(delay, self._send_marker, broker, core, markers, tp)

    def _send_marker(self, broker, core, markers, tp) -> None:
        if broker.core is not core or not broker.alive:
            return
        answered = {"done": False}

        def answer(error):
            if answered["done"]:
                return
            answered["done"] = True
            if broker.core is not core or not broker.alive:
                return
            fx = core.on_markers_written(markers, {tp: E.request_timed_out if error is None else error})
            retry, fx.markers = fx.markers, []
            self.apply(broker, core, fx)
            for m in retry:
                self._send_markers(broker, core, m, delay=self.rng.randint(5, 20))
        # a duplicate right behind the original: one arriving after the next transaction began on
        # the partition would end that one (transaction version 1 has nothing against it; TCP does)
        self.wire.send(self.partitions[tp[1]].write_marker, markers, answer, duplicable=True, spread=1)
        self.events.after(self.settings.marker_timeout_ms, answer, None)

    # -- coordinator leadership

    def _elect(self, broker: CoordinatorBroker) -> None:
        log = self.state_log
        log.epoch += 1
        log.leader = broker
        broker.core.start_loading(STATE_PARTITION, log.epoch)
        self.trace(f"coordinator b{broker.id} leads __transaction_state at epoch {log.epoch}, loading "
                   f"{len(log.records)} records")
        self.events.after(self.rng.randint(5, 40), self._finish_loading, broker, broker.core, log.epoch)

    def _finish_loading(self, broker, core, epoch) -> None:
        if broker.core is not core or not broker.alive or self.state_log.epoch != epoch:
            return
        fx = core.finish_loading(STATE_PARTITION, epoch, list(self.state_log.records), self.events.now)
        broker.loaded_epoch = epoch
        if fx.markers:
            self.trace(f"coordinator b{broker.id} loaded; resends the markers of "
                       f"{', '.join(f'{m.transactional_id} ({m.result.name})' for m in fx.markers)}")
        self.apply(broker, core, fx)

    def _fail_over(self, crash: bool, down_ms: int, to: CoordinatorBroker | None = None) -> None:
        log = self.state_log
        old = log.leader
        if old is None or old is to:
            return
        kept = self.rng.randint(log.committed, len(log.records))
        old_committed = log.committed
        del log.records[kept:]
        log.committed = kept
        pending, log.pending = log.pending, {}
        log.leader = None
        if crash:
            old.alive = False
            old.core = TransactionCoordinator(self.config)  # its memory is gone
            self.events.after(down_ms, self._restart_coordinator, old)
        candidates = [b for b in self.coordinators if b.alive and b is not old]
        self.trace(f"coordinator b{old.id} {'crashes' if crash else 'loses the leadership'}; "
                   f"__transaction_state keeps {kept} records ({old_committed} were committed)")
        if not crash:
            answer_first = self.rng.random() < 0.5
            if not answer_first:
                old.core.unload(STATE_PARTITION, log.epoch + 1)
            for write_id in sorted(pending):
                p = pending[write_id]
                error = E.none if p.offset < old_committed else E.not_leader_or_follower
                self.write_done(p.broker, p.core, p.write, error)
            if answer_first:
                old.core.unload(STATE_PARTITION, log.epoch + 1)
        if to is not None and to.alive:
            self._elect(to)
        elif candidates:
            self._elect(self.rng.choice(candidates))

    def _bounce_back(self, broker) -> None:
        if self.faulty and broker is not None:
            self.trace(f"coordinator b{broker.id} takes the leadership back")
            self._fail_over(False, 0, to=broker)

    def _restart_coordinator(self, broker) -> None:
        broker.alive = True
        self.trace(f"coordinator b{broker.id} restarts")
        if self.state_log.leader is None:
            self._elect(broker)

    def _abort_timer(self) -> None:
        leader = self.state_log.leader
        if leader is not None and leader.alive:
            fx = leader.core.abort_timed_out_transactions(self.events.now)
            for write in fx.writes:
                self.trace(f"coordinator b{leader.id} aborts {write.transactional_id}: timed out")
            self.apply(leader, leader.core, fx)
        if not self.finished:
            self.events.after(self.settings.abort_interval_ms, self._abort_timer)

    def _expire_timer(self) -> None:
        leader = self.state_log.leader
        if leader is not None and leader.alive:
            self.apply(leader, leader.core, leader.core.expire_transactional_ids(self.events.now))
        if not self.finished:
            self.events.after(self.settings.expire_interval_ms, self._expire_timer)

    # -- producers

    def restart_producer(self, slot: int, delay: int) -> None:
        self.events.after(delay, self._restart_producer, slot)

    def _restart_producer(self, slot: int) -> None:
        current = self.producers[slot]
        if current.alive or not self.faulty:
            return
        self.instances[slot] += 1
        producer = Producer(self, slot, current.tid, self.instances[slot])
        self.producers[slot] = producer
        self.trace(f"producer {producer.name()} starts")
        producer.start()

    # -- faults

    def _fault(self, fault: Fault) -> None:
        if not self.faulty:
            return
        self.trace(f"fault {fault}")
        kind = fault.kind
        if kind == "coordinator-failover":
            self._fail_over(False, 0)
        elif kind == "coordinator-bounce":  # away and back (a preferred leader election right after)
            back = self.state_log.leader
            self._fail_over(False, 0)
            self.events.after(fault.duration_ms, self._bounce_back, back)
        elif kind == "coordinator-crash":
            self._fail_over(True, fault.duration_ms)
        elif kind == "leader-change":
            self.partitions[int(fault.target.split(":")[1])].change_leader()
        elif kind == "stall":
            partition = self.partitions[int(fault.target.split(":")[1])]
            partition.stalled_until = self.events.now + fault.duration_ms
        elif kind == "producer-pause":
            self.producers[int(fault.target.split(":")[1])].paused_until = self.events.now + fault.duration_ms
        elif kind == "producer-crash":
            slot = int(fault.target.split(":")[1])
            producer = self.producers[slot]
            if producer.alive:
                producer.crash()
                self.restart_producer(slot, fault.duration_ms)
        else:
            raise ValueError(f"unknown fault {kind}")

    def _heal(self) -> None:
        self.trace("heal: no more faults; producers finish their transaction and stop")
        self.faulty = False
        for partition in self.partitions:
            partition.stalled_until = -1
        for broker in self.coordinators:
            if not broker.alive:
                self._restart_coordinator(broker)
        self.events.after(50, self._check_quiescence)

    def quiescent(self) -> str | None:
        """None when nothing is left to happen; else what is still going on."""
        if any(p.alive and not p.done for p in self.producers):
            return "producers still running"
        if self.wire.in_flight:
            return f"{self.wire.in_flight} messages in flight"
        log = self.state_log
        if log.leader is None or log.leader.loaded_epoch != log.epoch or log.pending:
            return "__transaction_state not loaded"
        for meta in log.leader.core.transactions():
            if meta.pending_state is not None or meta.state not in (
                    TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
                return f"{meta.transactional_id} is {meta.state.kafka_name}"
        for partition in self.partitions:
            if partition.waiting or partition.verifying or partition.high_watermark != partition.log_end_offset:
                return f"partition {partition.tp[1]} is replicating"
        return None

    def _check_quiescence(self) -> None:
        busy = self.quiescent()
        if busy is None:
            self.trace(f"quiescent: EndTxn answered OK {self.checker.committed} commits, "
                       f"{self.checker.aborted} aborts; "
                       f"log ends {[p.log_end_offset for p in self.partitions]}, __transaction_state "
                       f"{len(self.state_log.records)} records, {self.events.events_run} events")
            self.checker.final_check()
            self.finished = True
            return
        if self.events.now >= self.settings.heal_at_ms + self.settings.settle_bound_ms:
            self.checker.final_check()  # what is wrong, if the rules say more than "not quiescent"
            self.checker.fail("liveness", f"not quiescent {self.settings.settle_bound_ms}ms after healing: {busy}")
            self.finished = True
            return
        self.events.after(50, self._check_quiescence)

    def run(self) -> TxnRunResult:
        checker = self.checker
        try:
            while not self.finished and not checker.violations and self.events.step():
                pass
        except (AssertionError, EventLimitExceeded) as e:
            import traceback
            checker.fail("core-assertion", f"{type(e).__name__}: {e} at {traceback.format_exc(limit=-3)}")
        for violation in checker.violations[:1]:
            self.trace(f"VIOLATION {violation.rule}: {violation.detail}")
        digest = hashlib.sha256("\n".join(self.lines).encode()).hexdigest()[:16]
        return TxnRunResult(self.seed, list(checker.violations), digest, self.events.events_run, self.events.now,
                            checker.committed + checker.aborted, 0, self.schedule, self.lines,
                            checker.committed, checker.aborted)


def run_transactions_seed(seed: int, schedule: list[Fault] | None = None,
                          settings: TxnSimSettings | None = None) -> TxnRunResult:
    return TxnWorld(seed, settings, schedule).run()

"""A simulated broker's request handlers (weir/broker/apis.py in production): Produce (with
acks=all parked until the partition completes it), a client's read and a follower's Fetch of all
it follows from us (both long-polled in production's ParkedFetch, until there are records or
fetch.max.wait.ms / replica.fetch.wait.max.ms passes), and OffsetForLeaderEpoch, each answered
from what the partition objects decide.
"""

from __future__ import annotations

import random

from kio.schema.errors import ErrorCode

from weir.broker.fetch_waiters import ParkedFetch, keeps_waiting
from weir.protocol.errors import KafkaError
from weir.protocol.hot_requests import FetchPartition
from weir.protocol.hot_responses import FetchPartitionResult
from weir.replication.fetch_sessions import FetchSessionCache
from weir.replication.partition import Effects, Partition
from weir.replication.truncation import EpochEndOffset
from weir.sim.memlog import SimBatch

FOLLOWER_MIN_BYTES = 1  # replica.fetch.min.bytes
CONSUMER_MIN_BYTES = 1  # fetch.min.bytes
CONSUMER_MAX_RECORDS = 50


class SimApis:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.parked: dict = {}  # acks=all produce requests waiting for the HW
        # session ids from the seed: a run replays exactly
        self.fetch_sessions = FetchSessionCache(rng=random.Random(f"sessions/{broker.world.seed}/{broker.id}/"
                                                                  f"{broker.incarnation}"))
        broker.hosting.fetch_sessions = self.fetch_sessions

    def complete(self, completions) -> None:
        for completion in completions:
            first = self.parked.pop(completion.key, None)
            if first is not None:
                self.broker.send(completion.key[0], ("produce_resp", completion.key[1], completion.error, first))

    def produce(self, src, rid, partition: Partition, value: str, producer_id: int, timestamp: int,
                acks: int) -> None:
        broker = self.broker
        batch = SimBatch(value, producer_id, max_timestamp=timestamp)
        try:
            produced = partition.produce(batch, batch, acks, broker.now, proven=broker.can_lead)
        except KafkaError as e:
            if acks != 0:
                broker.send(src, ("produce_resp", rid, e.code, -1))
            return
        broker.act(partition, produced.effects)
        if acks == 1:
            broker.send(src, ("produce_resp", rid, ErrorCode.none, produced.first_offset))
        elif acks == -1:
            key = (src, rid, broker._rid())  # a duplicated request is parked twice, as the real broker would
            deadline = broker.now + broker.settings.request_timeout_ms
            done = partition.await_replication(key, produced.last_offset, deadline, broker.now)
            self.parked[key] = produced.first_offset
            if done is not None:
                broker.act(partition, Effects([done]))

    def read(self, src, rid, partition: Partition, offset: int, current_leader_epoch: int) -> None:
        """A consumer's Fetch of one partition: long-polled like a follower's, but woken by a new HW
        too (it reads up to the HW), and served only while our leadership is proven."""
        broker = self.broker

        def read(first: bool) -> list:
            if broker.partitions.get(partition.key) is not partition:  # deleted here while parked
                gone = FetchPartitionResult(partition.index, ErrorCode.not_leader_or_follower)
                return [(partition.topic, None, [gone])]
            result, limit, _ = partition.answer_fetch(offset, current_leader_epoch, -1, broker.now, first=first,
                                                      proven=broker.can_lead)
            if not result.error_code:
                result.records = partition.log.read(offset, limit, CONSUMER_MAX_RECORDS) or None
            return [(partition.topic, None, [result])]

        def answer(results: list) -> None:
            result = results[0][2][0]
            values = [b.value for b in result.records or ()]
            broker.send(src, ("read_resp", rid, result.error_code, result.high_watermark, offset, values))
        self._answer_or_park(read, answer, [partition.key], follower=False, min_bytes=CONSUMER_MIN_BYTES,
                             max_wait=broker.settings.fetch_max_wait_ms)

    def fetch(self, src, rid, replica_epoch: int, session_id: int, session_epoch: int, sends: list,
              forgotten: list) -> None:
        """A follower's Fetch of the partitions it follows from us, in its fetch session
        (weir/replication/fetch_sessions.py): `sends` the (key, current leader epoch, fetch offset,
        log start) of those it names. Answered with the partitions that have news."""
        broker = self.broker
        named: dict[str, list] = {}
        for (topic, index), current_leader_epoch, offset, log_start_offset in sends:
            named.setdefault(topic, []).append(FetchPartition(index, current_leader_epoch, offset, -1,
                                                              log_start_offset, 0))
        dropped: dict[str, list] = {}
        for topic, index in forgotten:
            dropped.setdefault(topic, []).append(index)
        try:
            context = self.fetch_sessions.context(session_id, session_epoch, list(named.items()), list(dropped.items()),
                                                  by_id=False, follower=True, now_ms=broker.now)
        except KafkaError as e:
            broker.send(src, ("fetch_resp", rid, e.code, 0, []))
            return

        def read(first: bool) -> list:
            results = [(topic, None, [self._fetch_one(src, context, topic, request, replica_epoch, first)
                                      for request in partitions])
                       for topic, partitions in context.wanted]
            if first:
                context.read_done(broker.now)
            return results

        def answer(results: list) -> None:
            context.unpark()
            session_id, sent = context.answer(results)
            answers = [((topic, r.index), r.error_code, r.high_watermark, r.log_start_offset, r.records)
                       for topic, _, answered in sent for r in answered]
            broker.send(src, ("fetch_resp", rid, ErrorCode.none, session_id, answers))
        keys = [(topic, p.partition) for topic, parts in context.wanted for p in parts]
        self._answer_or_park(read, answer, keys, follower=True, min_bytes=FOLLOWER_MIN_BYTES,
                             max_wait=broker.settings.replica_fetch_wait_ms, park=context.park,
                             quiet=context.holds_quiet)

    def _answer_or_park(self, read, answer, keys: list, *, follower: bool, min_bytes: int, max_wait: int,
                        park=lambda waiter: None, quiet: bool = False) -> None:
        """The first read answers the fetch, or it parks (production's DataApis.fetch). A read that
        raises stops the run, as any exception in the simulation does."""
        broker = self.broker
        results = read(True)
        if not ((keys or quiet) and keeps_waiting(results, min_bytes, max_wait)):
            answer(results)
            return

        def answer_or_raise(results: list | None, error: Exception | None) -> None:
            if error is not None:
                raise error
            answer(results)
        park(ParkedFetch(broker.waiters, keys, follower=follower, min_bytes=min_bytes, deadline=broker.now + max_wait,
                         read=read, answer=answer_or_raise, clock=lambda: broker.now,
                         call_soon=lambda fn: broker.later(0, fn),
                         call_at=lambda when, fn: broker.later(when - broker.now, fn)))

    def _fetch_one(self, src, context, topic: str, request, replica_epoch: int,
                   first: bool) -> FetchPartitionResult | None:
        """The partition's answer; None when its session's `told` still stands (nothing to send),
        and then it is quiet in the session (production's DataApis._read_all)."""
        broker = self.broker
        key = (topic, request.partition)
        partition = broker.partitions.get(key)
        if partition is None:
            return FetchPartitionResult(request.partition, ErrorCode.not_leader_or_follower)
        offset = request.fetch_offset
        answer = partition.answer_fetch(offset, request.current_leader_epoch, src, broker.now,
                                        replica_epoch=replica_epoch, log_start_offset=request.log_start_offset,
                                        first=first, told=context.told.get(key))
        if answer is None:
            if first:
                context.note_quiet(key, key, partition.quiet_fetch_credit(src))
            return None
        result, limit, effects = answer
        if effects is not None:
            broker.act(partition, effects)
        if not result.error_code:
            result.records = partition.log.read(offset, limit, broker.settings.replica_fetch_max_records) or None
        return result

    def ofle(self, src, rid, questions: list) -> None:
        """OffsetForLeaderEpoch of the partitions in `questions` (key, current leader epoch, epoch)."""
        broker = self.broker
        answers = []
        for key, current_leader_epoch, requested_epoch in questions:
            partition = broker.partitions.get(key)
            answers.append((key, EpochEndOffset(ErrorCode.unknown_topic_or_partition) if partition is None
                            else partition.answer_epoch_request(requested_epoch, current_leader_epoch)))
        broker.send(src, ("ofle_resp", rid, answers))

"""Data-plane request handlers: ApiVersions, Produce, Fetch, ListOffsets, OffsetForLeaderEpoch,
DeleteRecords, DescribeLogDirs, AlterReplicaLogDirs, DescribeProducers.

Every handler returns the response body - `bytes`, a dict for kio to encode, a list of buffers
(Fetch, with FileRegion items for record data), None when no response is owed (Produce with
acks=0) - or a coroutine producing one (acks=all waits for the ISR, Fetch may long-poll).
The control-plane handlers (metadata, topics, configs, elections) are in admin_apis.py.
"""

import asyncio
import functools
import logging
import os
import shutil
import time
from collections import Counter
from pathlib import Path

from weir.broker.fetch_waiters import ParkedFetch, keeps_waiting, records_size
from weir.broker.leader_hints import point_to_leaders
from weir.broker.replica_manager import FetchParams, ReplicaManager
from weir.broker.throttles import ClientThrottles, Throttled
from weir.broker.topics import INTERNAL_TOPICS
from weir.broker.txn_verification import TxnVerifier
from weir.clock import now_ms
from weir.config.topic_configs import MAX_INT
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.header import RequestHeader
from weir.protocol.hot_responses import (FetchPartitionResult, ProducePartitionResult, encode_fetch_response,
                                         encode_produce_response)
from weir.protocol.legacy_records import down_convert, up_convert
from weir.protocol.record_batch import TRANSACTIONAL_BIT
from weir.protocol.versions import SUPPORTED_VERSIONS, ApiKey
from weir.replication.fetch_sessions import FetchContext, FetchSessionCache
from weir.security.authorization import TOPIC, TXN, RequestAuthorizer, cluster_error, denied, refusal
from weir.transactions.partition_txns import SENTINEL, VerificationGuard

log = logging.getLogger(__name__)


class _EveryTopic:
    """The topics refused to a follower without CLUSTER_ACTION: all of them."""

    def __contains__(self, name) -> bool:
        return True


EVERY_TOPIC = _EveryTopic()

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
# the ListOffsets version each special timestamp needs (Kafka's timestampMinSupportedVersion); any
# other negative one is UNSUPPORTED_VERSION
SPECIAL_TIMESTAMP_VERSIONS = {EARLIEST: 0, LATEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}
READ_COMMITTED = 1  # isolation_level (KIP-98); 0 is READ_UNCOMMITTED
VALID_ACKS = (-1, 0, 1)  # Kafka's ReplicaManager.isValidRequiredAcks: any other is INVALID_REQUIRED_ACKS
ATTRIBUTES_LOW_BYTE = 22  # of a record batch (attributes int16 at 21)



def fetching_replica(header: RequestHeader, request) -> tuple[int, int]:
    """A Fetch's (replica id, replica epoch): a follower's id, or -1 for a consumer."""
    if header.api_version >= 15:
        return request.replica_state.replica_id, request.replica_state.replica_epoch
    return request.replica_id, -1


class CloseConnection(Exception):
    """The client must learn of an error it gets no response for (acks=0)."""


class InOrder:
    """An answer that is decided later but must not hold back the requests behind it (acks=all
    Produce: the append is done; only the answer waits for the ISR). `awaitable`: a coroutine
    or a future."""

    def __init__(self, awaitable) -> None:
        self.awaitable = awaitable


class DataApis:
    def __init__(self, replicas: ReplicaManager, verifier: TxnVerifier | None = None,
                 authz: RequestAuthorizer | None = None, fetch_sessions: FetchSessionCache | None = None,
                 throttles: ClientThrottles | None = None) -> None:
        self.replicas = replicas
        self.throttles = throttles  # client quotas (None: none)
        self.verifier = verifier  # KIP-890: asks the transaction coordinator (None: nobody to ask)
        self.authz = authz  # None: no authorizer, everything is allowed
        self.fetch_sessions = fetch_sessions or FetchSessionCache()  # KIP-227
        self.handlers = {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
            ApiKey.DELETE_RECORDS: self.delete_records,
            ApiKey.DESCRIBE_LOG_DIRS: self.describe_log_dirs,
            ApiKey.ALTER_REPLICA_LOG_DIRS: self.alter_replica_log_dirs,
            ApiKey.DESCRIBE_PRODUCERS: self.describe_producers,
        }

    # -- ApiVersions -------------------------------------------------------

    def api_versions(self, header: RequestHeader, request) -> dict:
        return self.api_versions_body(ErrorCode.none)

    @staticmethod
    def api_versions_body(error: ErrorCode) -> dict:
        return {
            "error_code": error,
            "api_keys": [{"api_key": int(k), "min_version": lo, "max_version": hi}
                         for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())],
            "throttle_time": 0,
        }

    # -- Produce -----------------------------------------------------------

    def produce(self, header: RequestHeader, request):
        by_id = header.api_version >= 13
        names = [self.replicas.view.topic_name(t.topic_id) if by_id else t.name for t in request.topic_data]
        now = now_ms()
        topics_out = []
        waiting: list[tuple[ProducePartitionResult, asyncio.Future]] = []
        verifying: list[tuple[ProducePartitionResult, str, object, VerificationGuard]] = []
        failed = False
        refused = self._refused_producing(header, request, names) if self.authz is not None else None
        for topic_data, name in zip(request.topic_data, names):
            results = []
            for data in topic_data.partition_data:
                result = ProducePartitionResult(data.index)
                try:
                    if header.api_version < 3 and data.records is not None:  # message format 0 or 1
                        data.records = memoryview(up_convert(data.records))
                    if name is None:
                        raise KafkaError(ErrorCode.unknown_topic_id, f"no topic with id {topic_data.topic_id}")
                    if refused and name in refused:
                        raise KafkaError(refused[name], f"{header.principal} may not write to {name}")
                    if request.acks not in VALID_ACKS and self._known_partition(name, data.index):
                        raise KafkaError(ErrorCode.invalid_required_acks, f"acks={request.acks}: only -1, 0 or 1")
                    if name in INTERNAL_TOPICS:
                        raise KafkaError(ErrorCode.invalid_topic_exception, f"{name} is written by the broker only")
                    validated = None
                    if _is_transactional(data.records):  # KIP-98/890: only these pay for the checks
                        partition, validated = self.replicas.validate(name, data.index, data.records, now)
                        if request.transactional_id is None:
                            raise KafkaError(ErrorCode.transactional_id_authorization_failed,
                                             "transactional records without a transactional id")
                        guard = partition.start_verification(validated.header, now)
                        if guard is not SENTINEL and self.verifier is not None:
                            verifying.append((result, name, validated, guard))
                            results.append(result)
                            continue
                    self._append(result, name, data.index, data.records, request, now, waiting, validated)
                except KafkaError as e:
                    failed = True
                    self._refused(result, name, e)
                results.append(result)
            topics_out.append((topic_data.name if not by_id else "", topic_data.topic_id if by_id else None, results))
        answer = functools.partial(self._produce_answer, header, names)
        if verifying:
            return InOrder(self._produce_verified(answer, request, topics_out, waiting, verifying))
        if request.acks == 0:
            if failed:
                raise CloseConnection("acks=0 produce failed")
            return answer(None)
        if not waiting or all(f.done() for _, f in waiting):
            self._settle(waiting)
            return answer(topics_out)
        return InOrder(self._produce_replicated(answer, topics_out, waiting))

    def _produce_answer(self, header: RequestHeader, names: list, topics_out: list | None):
        """The answer (None: acks=0, no answer) with the producer's throttle time, once the
        request is done (Kafka records a Produce against producer_byte_rate then), and KIP-951's
        pointers to the leaders of partitions that moved (v10+)."""
        throttle = self.throttles.produced(header) if self.throttles is not None else 0
        if topics_out is None:
            body = None
        else:
            endpoints = ()
            if header.api_version >= 10:
                endpoints = point_to_leaders(self.replicas.view, header.listener,
                                             ((name, results) for name, (_, _, results) in zip(names, topics_out)))
            body = encode_produce_response(header.api_version, topics_out, throttle, endpoints)
        return Throttled(body, throttle) if throttle else body

    def _known_partition(self, name: str, index: int) -> bool:
        """The partition exists (else the append answers UNKNOWN_TOPIC_OR_PARTITION, which Kafka
        checks before the acks)."""
        assignment = self.replicas.view.topics.get(name)
        return assignment is not None and index in assignment.replicas

    def _refused_producing(self, header: RequestHeader, request, names: list) -> dict[str, ErrorCode]:
        """Topic → error, for the topics this producer may not write to (`names`: its topics' names,
        None for an unknown id): all of them when it may not use its transactional id
        (TRANSACTIONAL_ID WRITE), else those without TOPIC WRITE."""
        wanted = [n for n in names if n is not None]
        if request.transactional_id is not None and denied(self.authz, header, TXN, [request.transactional_id]):
            return dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
        return dict.fromkeys(denied(self.authz, header, TOPIC, wanted), ErrorCode.topic_authorization_failed)

    def _append(self, result: ProducePartitionResult, name: str, index: int, records, request, now: int, waiting,
                validated=None, verification_guard: VerificationGuard = SENTINEL) -> None:
        partition, result.base_offset, last, result.log_append_time = self.replicas.append(
            name, index, records, request.acks, now, validated=validated, verification_guard=verification_guard)
        result.log_start_offset = partition.log.log_start_offset
        if request.acks == -1:
            waiting.append((result, self.replicas.await_replication(
                partition, last, int(request.timeout.total_seconds() * 1000), now)))

    @staticmethod
    def _refused(result: ProducePartitionResult, name: str, e: KafkaError) -> None:
        result.error_code, result.error_message = e.code, e.message
        result.record_errors = e.record_errors
        log.warning("produce to %s-%d refused: %s", name, result.index, e)

    async def _produce_verified(self, answer, request, topics_out, waiting, verifying):
        """KIP-890 part 1: the coordinator verifies the partitions whose producer has no
        transaction on them yet; each is appended, with its guard, only once verified."""
        producers = {(v.header.producer_id, v.header.producer_epoch) for _, _, v, _ in verifying}
        if len(producers) == 1:
            [(producer_id, producer_epoch)] = producers
            unverified = await self.verifier.verify(request.transactional_id, producer_id, producer_epoch,
                                                    [(name, r.index) for r, name, _, _ in verifying])
        else:  # one Produce request, one transactional producer
            unverified = {(name, r.index): ErrorCode.invalid_txn_state for r, name, _, _ in verifying}
        now = now_ms()
        for result, name, validated, guard in verifying:
            try:
                error = unverified.get((name, result.index))
                if error:
                    raise KafkaError(error, "the transaction coordinator did not verify this partition")
                self._append(result, name, result.index, validated.records, request, now, waiting, validated, guard)
            except KafkaError as e:
                self._refused(result, name, e)
        if request.acks == 0:
            return answer(None)
        await asyncio.gather(*(f for _, f in waiting))
        self._settle(waiting)
        return answer(topics_out)

    def _produce_replicated(self, answer_now, topics_out, waiting) -> asyncio.Future:
        """A future answered with the response once every partition's acks=all wait is over:
        callbacks on the partitions' futures, not a task gathering them (this is per request)."""
        answer = asyncio.get_running_loop().create_future()
        pending = [f for _, f in waiting if not f.done()]

        def one_done(_) -> None:
            pending.pop()
            if not pending and not answer.done():
                try:
                    self._settle(waiting)
                    answer.set_result(answer_now(topics_out))
                except Exception as e:
                    answer.set_exception(e)

        for future in pending:
            future.add_done_callback(one_done)
        return answer

    @staticmethod
    def _settle(waiting) -> None:
        for result, future in waiting:
            error = future.result()
            if error:
                result.error_code = error
                result.error_message = f"acks=all: {error.name}"

    # -- Fetch -------------------------------------------------------------

    def fetch(self, header: RequestHeader, request):
        """The answer at once when the first read settles it (enough data, an error, no wait
        asked); else a future of it, which a ParkedFetch settles (the long poll). Most fetches
        are answered at once, and so cost the connection no task."""
        by_id = header.api_version >= 13
        replica_id, replica_epoch = fetching_replica(header, request)
        try:
            context = self.fetch_sessions.context(
                request.session_id, request.session_epoch,
                [(t.topic_id if by_id else t.topic, t.partitions) for t in request.topics],
                [(t.topic_id if by_id else t.topic, t.partitions) for t in request.forgotten_topics_data],
                by_id=by_id, follower=replica_id >= 0, now_ms=now_ms())
        except KafkaError as e:
            log.debug("fetch refused: %s", e)
            return encode_fetch_response(header.api_version, e.code, 0, [])
        view = self.replicas.view
        name_of = view.topic_name if by_id else (lambda key: key)
        refused = None
        if self.authz is not None:  # a follower needs CLUSTER_ACTION (else every topic is refused), a consumer READ
            if replica_id >= 0:
                refused = EVERY_TOPIC if cluster_error(self.authz, header) else None
            else:
                named = [name for key, _ in context.wanted if (name := name_of(key)) is not None]
                refused = denied(self.authz, header, TOPIC, named)
        read_committed = request.isolation_level == READ_COMMITTED  # KIP-98
        consumer = replica_id < 0
        limit = self.throttles.fetch_limit(header) if consumer and self.throttles is not None else None
        max_bytes = request.max_bytes if limit is None else min(request.max_bytes, limit)

        def read(first: bool) -> list:
            now = now_ms()
            params = FetchParams(replica_id, replica_epoch, read_committed, now, first)
            results = self._read_all(params, context, name_of, max_bytes, by_id, refused=refused)
            if first:
                context.read_done(now)
            return results
        results = read(True)
        max_wait_s = request.max_wait.total_seconds()
        waits = keeps_waiting(results, request.min_bytes, max_wait_s)
        keys = waits and [
            (name, p.partition) for key, parts in context.wanted if (name := name_of(key)) is not None for p in parts]
        if not (waits and (keys or context.holds_quiet)):
            return self._fetch_answer(header, context, results, consumer)
        # a long poll: the connection awaits the answer (and handles nothing else meanwhile, as Kafka)
        loop = asyncio.get_running_loop()
        answered = loop.create_future()

        def answer(results: list | None, error: Exception | None) -> None:
            context.unpark()
            if answered.done():  # cancelled: the broker is stopping
                return
            if error is not None:
                answered.set_exception(error)  # the connection logs it and closes
            else:
                answered.set_result(self._fetch_answer(header, context, results, consumer))
        context.park(ParkedFetch(self.replicas.waiters, keys, follower=replica_id >= 0, min_bytes=request.min_bytes,
                                 deadline=loop.time() + max_wait_s, read=read, answer=answer, clock=loop.time,
                                 call_soon=loop.call_soon, call_at=loop.call_at))
        return answered

    def _fetch_answer(self, header: RequestHeader, context: FetchContext, results: list, consumer: bool):
        """The answer to a Fetch, with KIP-951's pointers to the leaders of partitions that moved
        (v16+). A consumer over consumer_byte_rate gets an empty one with its throttle time instead,
        the bytes read not counted (Kafka's handleFetchRequest): it fetches them again once unmuted."""
        throttles = self.throttles
        if consumer and throttles is not None and throttles.fetch.enabled:
            size = sum(records_size(r) for _, _, answered in results for r in answered if r is not None)
            throttle = throttles.fetched(header, size)
            if throttle:
                return Throttled(encode_fetch_response(header.api_version, 0, context.throttled_session_id(), [],
                                                       throttle), throttle)
        session_id, topics = context.answer(results)
        if header.api_version < 4:  # no sessions before v7: the answer is in the request's order
            self._down_convert(header.api_version, context, topics)
        endpoints = ()
        if header.api_version >= 16:
            endpoints = point_to_leaders(self.replicas.view, header.listener,
                                         ((name, results) for name, _, results in topics))
        return encode_fetch_response(header.api_version, 0, session_id, topics, 0, endpoints)

    def _down_convert(self, version: int, context: FetchContext, topics: list) -> None:
        """Fetch v0-v3: the records as a message set of format 0 (v0-v1) or 1 (v2-v3), read from
        the segment files into memory, as Kafka's down-conversion does (weir.protocol.legacy_records);
        a topic with message.downconversion.enable=false answers UNSUPPORTED_VERSION (Kafka)."""
        magic = 0 if version <= 1 else 1
        for (_, partitions), (name, _, results) in zip(context.wanted, topics):
            if name in self.replicas.view.topics and not self.replicas.topic_config(name, "message.downconversion.enable"):
                results[:] = [FetchPartitionResult(r.index, ErrorCode.unsupported_version) for r in results]
                continue
            for request, result in zip(partitions, results):
                if result.records:
                    data = b"".join(r if isinstance(r, (bytes, bytearray, memoryview))
                                    else os.pread(r.fd, r.size, r.position) for r in result.records)
                    result.records = [down_convert(data, magic, request.fetch_offset)]

    def _read_all(self, params: FetchParams, context: FetchContext, name_of, max_bytes: int, by_id: bool, *,
                  refused=None) -> list:
        """Each partition of the context's, in its order; a follower's partition found with
        nothing to tell in the first read is quiet in its session from then on."""
        out = []
        budget = max(max_bytes, 0)
        min_one = True  # Kafka's minOneMessage: until a partition has given records (KIP-74)
        told = context.told
        for topic_key, partitions in context.wanted:
            name = name_of(topic_key)
            results = []
            for p in partitions:
                if name is None:
                    results.append(FetchPartitionResult(p.partition, ErrorCode.unknown_topic_id))
                    continue
                if refused and name in refused:
                    results.append(FetchPartitionResult(p.partition, ErrorCode.topic_authorization_failed))
                    continue
                # The first partition with records gives at least one whole batch (KIP-74), even
                # past max_bytes or partition_max_bytes (0 too), so a consumer progresses past a
                # batch larger than its limits; the partitions after it keep to what is left.
                result = self.replicas.read(params, name, p.partition, p.fetch_offset,
                                            min(p.partition_max_bytes, budget), p.current_leader_epoch,
                                            log_start_offset=getattr(p, "log_start_offset", -1),
                                            told=told.get((topic_key, p.partition)) if told else None,
                                            min_one_batch=min_one)
                if result is None and params.first:
                    context.note_quiet((topic_key, p.partition), (name, p.partition),
                                       self.replicas.quiet_fetch_credit(name, p.partition, params.replica_id))
                results.append(result)  # None: the fetch session's answer leaves it out
                size = records_size(result) if result is not None else 0
                if size:
                    budget = max(budget - size, 0)
                    min_one = False
            out.append((name or "", topic_key if by_id else None, results))
        return out

    # -- ListOffsets -------------------------------------------------------

    def list_offsets(self, header: RequestHeader, request) -> dict:
        """As Kafka's handleListOffsetRequestV1AndAbove: a partition named twice is INVALID_REQUEST
        (each time), a special timestamp the version does not have UNSUPPORTED_VERSION. v0 answers
        a list ("old style" offsets): the one offset v1 finds, if any and if max_num_offsets > 0,
        where Kafka's handleListOffsetRequestV0 listed segment base offsets too (by their files'
        mtimes) for a client to pick from."""
        read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
        refused = denied(self.authz, header, TOPIC, [t.name for t in request.topics])
        named = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                out = {"partition_index": p.partition_index, "error_code": 0, "timestamp": -1,
                       "offset": -1, "leader_epoch": -1, "old_style_offsets": []}
                try:
                    if t.name in refused:
                        raise KafkaError(ErrorCode.topic_authorization_failed)
                    if named[(t.name, p.partition_index)] > 1:
                        raise KafkaError(ErrorCode.invalid_request, "the partition is named twice")
                    if p.timestamp < 0 and header.api_version < SPECIAL_TIMESTAMP_VERSIONS.get(p.timestamp, MAX_INT):
                        raise KafkaError(ErrorCode.unsupported_version, f"timestamp {p.timestamp}")
                    partition = self.replicas.leader_partition(t.name, p.partition_index,
                                                               getattr(p, "current_leader_epoch", -1))
                    out["offset"], out["timestamp"], out["leader_epoch"] = self._offset_for(partition, p.timestamp,
                                                                                           read_committed)
                    if header.api_version == 0 and out["offset"] >= 0 and p.max_num_offsets > 0:
                        out["old_style_offsets"] = [out["offset"]]
                except KafkaError as e:
                    out["error_code"] = e.code
                    if e.code == ErrorCode.offset_not_available and header.api_version < 5:
                        out["error_code"] = ErrorCode.leader_not_available  # Kafka: only v5+ know the error
                partitions.append(out)
            topics.append({"name": t.name, "partitions": partitions})
        return {"throttle_time": 0, "topics": topics}

    @staticmethod
    def _offset_for(partition, timestamp: int, read_committed: bool = False) -> tuple[int, int, int]:
        """(offset, timestamp, leader epoch), the epoch as Kafka's UnifiedLog.fetchOffsetByTimestamp
        gives it: the leader's for LATEST, else the epoch of the offset found (-1 when none is).
        LATEST_TIERED (KIP-1005): none, as Kafka answers for a topic without remote storage (Weir
        tiers nothing); EARLIEST_LOCAL is therefore EARLIEST."""
        plog = partition.log
        if timestamp == LATEST_TIERED:
            return -1, -1, -1
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return plog.log_start_offset, -1, plog.leader_epochs.epoch_for_offset(plog.log_start_offset)
        if timestamp == LATEST:
            return partition.latest_offset(read_committed), -1, partition.leader_epoch
        if timestamp == MAX_TIMESTAMP:
            found = plog.max_timestamp_offset()
        else:
            found = plog.offset_for_timestamp(timestamp)
        if found is None or found[0] >= (partition.last_stable_offset if read_committed else partition.high_watermark):
            return -1, -1, -1
        return found[0], found[1], plog.leader_epochs.epoch_for_offset(found[0])

    # -- DescribeProducers (KIP-664) ---------------------------------------------

    def describe_producers(self, header: RequestHeader, request) -> dict:
        """Each partition's idempotent producers as this replica's producer table holds them. Any
        replica answers, leader or follower (the admin client asks the leader unless told a
        broker), as Kafka's; NOT_LEADER_OR_FOLLOWER from a broker that hosts none. The coordinator
        epoch and the ongoing transaction's first offset are the transaction table's (-1: none)."""
        refused = denied(self.authz, header, TOPIC, [t.name for t in request.topics])
        topics = []
        for t in request.topics:
            partitions = []
            for index in t.partition_indexes:
                out = {"partition_index": index, "error_code": ErrorCode.none, "error_message": None,
                       "active_producers": []}
                try:
                    if t.name in refused:
                        raise KafkaError(ErrorCode.topic_authorization_failed)
                    partition = self.replicas.hosted(t.name, index)
                    txns = partition.txns.table.producers
                    out["active_producers"] = [
                        {"producer_id": producer_id, "producer_epoch": entry.epoch,
                         "last_sequence": entry.last_sequence, "last_timestamp": entry.last_timestamp,
                         "coordinator_epoch": txns[producer_id].coordinator_epoch if producer_id in txns else -1,
                         "current_txn_start_offset": _txn_start(txns.get(producer_id))}
                        for producer_id, entry in sorted(partition.producers.producers.items())]
                except KafkaError as e:
                    out["error_code"], out["error_message"] = e.code, e.message
                partitions.append(out)
            topics.append({"name": t.name, "partitions": partitions})
        return {"throttle_time": 0, "topics": topics}

    # -- OffsetForLeaderEpoch (KIP-101/279) ----------------------------------

    def offset_for_leader_epoch(self, header: RequestHeader, request) -> dict:
        """CLUSTER_ACTION on the cluster (a follower's) or DESCRIBE on the topic, whoever asks (Kafka)."""
        names = [t.topic for t in request.topics]
        refused = denied(self.authz, header, TOPIC, names) if cluster_error(self.authz, header) else set()
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                partition = self.replicas.partitions.get((t.topic, p.partition))
                if t.topic in refused:
                    partitions.append({"error_code": ErrorCode.topic_authorization_failed, "partition": p.partition,
                                       "leader_epoch": -1, "end_offset": -1})
                    continue
                if partition is None:
                    partitions.append({"error_code": ErrorCode.unknown_topic_or_partition, "partition": p.partition,
                                       "leader_epoch": -1, "end_offset": -1})
                    continue
                answer = partition.answer_epoch_request(p.leader_epoch, getattr(p, "current_leader_epoch", -1))
                partitions.append({"error_code": answer.error, "partition": p.partition,
                                   "leader_epoch": answer.leader_epoch, "end_offset": answer.end_offset})
            topics.append({"topic": t.topic, "partitions": partitions})
        return {"throttle_time": 0, "topics": topics}

    # -- DeleteRecords -------------------------------------------------------

    async def delete_records(self, header: RequestHeader, request) -> dict:
        """Move each partition's log start (the leader's at once); answer once every live replica
        has followed, with the low watermark, or REQUEST_TIMED_OUT at the request's timeout, as
        Kafka's DelayedDeleteRecords."""
        results = {}  # (topic, index) -> [partition, target, error]
        refused = denied(self.authz, header, TOPIC, [t.name for t in request.topics])
        for t in request.topics:
            for p in t.partitions:
                key = (t.name, p.partition_index)
                try:
                    if t.name in refused:
                        raise KafkaError(ErrorCode.topic_authorization_failed, f"{header.principal} may not delete "
                                                                               f"records of {t.name}")
                    if t.name in INTERNAL_TOPICS:
                        raise KafkaError(ErrorCode.invalid_topic_exception, f"cannot delete records of internal "
                                                                            f"topic {t.name}")
                    partition = self.replicas.leader_partition(*key)
                    if "delete" not in self.replicas.cleanup_policy(t.name):
                        raise KafkaError(ErrorCode.policy_violation,
                                         f"{t.name} is compacted only: records cannot be deleted by offset")
                    results[key] = [partition, partition.delete_records(p.offset), ErrorCode.none]
                    self.replicas.hosting.news(key, wake=False)  # a new log start to tell
                except KafkaError as e:
                    log.warning("DeleteRecords %s-%d before %d refused: %s", *key, p.offset, e)
                    results[key] = [None, -1, e.code]
        deadline = time.monotonic() + request.timeout.total_seconds()
        while (waiting := [key for key, (partition, target, error) in results.items()
                           if not error and self._low_watermark(partition) < target]):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                for key in waiting:
                    results[key][2] = ErrorCode.request_timed_out
                break
            await self.replicas.waiters.wait(waiting, remaining)
        return {"throttle_time": 0, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": results[(t.name, p.partition_index)][2],
                 "low_watermark": self._low_watermark(results[(t.name, p.partition_index)][0])}
                for p in t.partitions]} for t in request.topics]}

    def _low_watermark(self, partition) -> int:
        if partition is None or partition.leader is None:
            return -1
        live = self.replicas.view.brokers
        return partition.low_watermark([r for r in partition.replicas if r in live])

    # -- DescribeLogDirs -----------------------------------------------------

    def describe_log_dirs(self, header: RequestHeader, request) -> dict:
        """Our one log directory: each hosted partition's size, and its lag as Kafka reports it
        (how far its LEO is below its own HW: 0 unless the log was cut below it). CLUSTER DESCRIBE,
        else no directories (and CLUSTER_AUTHORIZATION_FAILED from v3), as Kafka."""
        if cluster_error(self.authz, header):
            return refusal(ErrorCode.cluster_authorization_failed, results=[])
        wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
        topics: dict[str, list] = {}
        for (name, index), partition in sorted(self.replicas.partitions.items()):
            if wanted is None or (name, index) in wanted:
                plog = partition.log
                topics.setdefault(name, []).append({
                    "partition_index": index, "partition_size": plog.size_in_bytes(),
                    "offset_lag": max(0, partition.high_watermark - plog.log_end_offset), "is_future_key": False})
        usage = shutil.disk_usage(self.replicas.root)
        return {"throttle_time": 0, "error_code": ErrorCode.none, "results": [{
            "error_code": ErrorCode.none, "log_dir": str(self.replicas.root.resolve()),
            "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()],
            "total_bytes": usage.total, "usable_bytes": usage.free}]}


    def alter_replica_log_dirs(self, header: RequestHeader, request) -> dict:
        """A broker has one log directory: a replica may be asked to stay in it (NONE, nothing
        moves), any other path is LOG_DIR_NOT_FOUND, as Kafka answers for a directory it lacks."""
        ours = self.replicas.root.resolve()
        refused = cluster_error(self.authz, header)
        results: dict[str, list] = {}
        for d in request.dirs:
            code = refused or (ErrorCode.none if _names_directory(d.path, ours) else ErrorCode.log_dir_not_found)
            for t in d.topics:
                results.setdefault(t.name, []).extend({"partition_index": p, "error_code": code} for p in t.partitions)
        return {"throttle_time": 0, "results": [{"topic_name": name, "partitions": partitions}
                                                for name, partitions in results.items()]}


def _names_directory(path: str, directory: Path) -> bool:
    try:
        return Path(path).resolve() == directory
    except (ValueError, OSError):  # a NUL in it, a name too long: no directory at all
        return False


def _txn_start(entry) -> int:
    if entry is None or entry.current_txn_first_offset is None:
        return -1
    return entry.current_txn_first_offset


def _is_transactional(records) -> bool:
    """Whether a produced batch has the transactional bit (the low byte of its attributes)."""
    return records is not None and len(records) > ATTRIBUTES_LOW_BYTE and bool(
        records[ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_BIT)

"""Request handlers of the transaction coordinator (KIP-98), over every version we advertise.

InitProducerId (idempotent and transactional producers), AddPartitionsToTxn (v4: batched, and
KIP-890's verify_only from partition leaders), AddOffsetsToTxn, EndTxn, DescribeTransactions,
ListTransactions. FindCoordinator with key type TRANSACTION is served by the group handlers
(`weir.broker.group_apis`), which ask `TransactionCoordinatorShell.find_coordinator`. Each handler turns
a kio request into a call on the shell and returns a dict for kio to encode, or a coroutine when
the answer waits for a write to `__transaction_state`. Version differences live here
(`error_for_version`: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH to older clients).
"""

from __future__ import annotations

from datetime import timedelta

from weir.broker.txn_coordinator import TransactionCoordinatorShell, now_ms
from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey
from weir.security.authorization import (CLUSTER, GROUP, TOPIC, TXN, RequestAuthorizer, allowed, cluster_error, denied,
                                         refusal)
from weir.transactions.coordinator import error_for_version, expected_producer
from weir.transactions.state_log import TransactionState

_MS = timedelta(milliseconds=1)
# every state is a known ListTransactions filter, as Kafka's TransactionState.fromName (AllStates),
# Dead and PrepareEpochFence too, though no listed transaction is ever in them
STATE_NAMES = {s.kafka_name: s for s in TransactionState}


def _ms(value) -> int:
    return value // _MS if isinstance(value, timedelta) else int(value)


class TransactionApis:
    def __init__(self, coordinator: TransactionCoordinatorShell, offsets_partition_count,
                 authz: RequestAuthorizer | None = None) -> None:
        """`offsets_partition_count()`: the partitions of `__consumer_offsets` (AddOffsetsToTxn)."""
        self.coordinator = coordinator
        self.authz = authz
        self._offsets_partition_count = offsets_partition_count
        self.handlers = {
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn,
            ApiKey.END_TXN: self.end_txn,
            ApiKey.DESCRIBE_TRANSACTIONS: self.describe_transactions,
            ApiKey.LIST_TRANSACTIONS: self.list_transactions,
        }

    @property
    def view(self):
        return self.coordinator.replicas.view

    # -- InitProducerId ----------------------------------------------------------------------

    def init_producer_id(self, header: RequestHeader, request):
        return self._init_producer_id(header.api_version, request, self._producer_id_refusal(header, request))

    def _producer_id_refusal(self, header: RequestHeader, request) -> ErrorCode | None:
        """A transactional producer needs WRITE on its id; an idempotent one IDEMPOTENT_WRITE on the
        cluster or WRITE on some topic (Kafka 2.8+, KIP-679)."""
        if self.authz is None:
            return None
        if request.transactional_id is not None:
            return None if allowed(self.authz, header, TXN, request.transactional_id) \
                else ErrorCode.transactional_id_authorization_failed
        if allowed(self.authz, header, CLUSTER) or self.authz.allows_any(header, TOPIC):
            return None
        return ErrorCode.cluster_authorization_failed

    async def _init_producer_id(self, version: int, request, refusal: ErrorCode | None) -> dict:
        expected = refusal or (expected_producer(request.producer_id, request.producer_epoch) if version >= 3
                               else None)
        if isinstance(expected, ErrorCode):
            error, producer_id, epoch = expected, -1, -1
        else:
            answer = await self.coordinator.init_producer_id(request.transactional_id,
                                                             _ms(request.transaction_timeout), expected)
            error, producer_id, epoch = answer.error, answer.producer_id, answer.producer_epoch
        if error:
            producer_id, epoch = -1, -1
        return {"throttle_time": 0, "error_code": error_for_version("InitProducerId", version, error),
                "producer_id": producer_id, "producer_epoch": epoch}

    # -- AddPartitionsToTxn --------------------------------------------------------------------

    def add_partitions_to_txn(self, header: RequestHeader, request):
        if header.api_version >= 4 and cluster_error(self.authz, header):  # v4+: from brokers only (KIP-890)
            return refusal(ErrorCode.cluster_authorization_failed, results_by_transaction=[])
        return self._add_partitions_to_txn(header, request)

    async def _add_partitions_to_txn(self, header: RequestHeader, request) -> dict:
        version = header.api_version
        if version >= 4:
            results = []
            for txn in request.transactions:
                errors = await self._add_partitions(header, txn.transactional_id, txn.producer_id,
                                                    txn.producer_epoch, txn.topics, txn.verify_only)
                results.append({"transactional_id": txn.transactional_id, "topic_results": _topic_results(errors)})
            return {"throttle_time": 0, "error_code": ErrorCode.none, "results_by_transaction": results}
        errors = await self._add_partitions(header, request.v3_and_below_transactional_id,
                                            request.v3_and_below_producer_id, request.v3_and_below_producer_epoch,
                                            request.v3_and_below_topics, False)
        return {"throttle_time": 0, "results_by_topic_v3_and_below": _topic_results(errors)}

    async def _add_partitions(self, header: RequestHeader, transactional_id: str, producer_id: int,
                              producer_epoch: int, topics, verify_only: bool) -> dict[tuple[str, int], ErrorCode]:
        """Per partition, as KafkaApis: from a client (v3-), without WRITE on the transactional id all
        are TRANSACTIONAL_ID_AUTHORIZATION_FAILED; partitions of topics without WRITE are
        TOPIC_AUTHORIZATION_FAILED and those of unknown topics UNKNOWN_TOPIC_OR_PARTITION, and then
        the others OPERATION_NOT_ATTEMPTED; else the coordinator's one answer for all. From a broker
        (v4+), CLUSTER_ACTION was checked for the whole request and nothing more is."""
        version = header.api_version
        wanted = [(t.name, p) for t in topics for p in t.partitions]
        from_client = version < 4
        if from_client and not allowed(self.authz, header, TXN, transactional_id):
            return dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
        refused = denied(self.authz, header, TOPIC, [t.name for t in topics]) if from_client else set()
        unknown = {(t, p) for t, p in wanted
                   if t not in refused and (t not in self.view.topics or p not in self.view.topics[t].replicas)}
        if refused or unknown:
            return {tp: ErrorCode.topic_authorization_failed if tp[0] in refused
                    else ErrorCode.unknown_topic_or_partition if tp in unknown
                    else ErrorCode.operation_not_attempted for tp in wanted}
        if verify_only:
            found = self.coordinator.core.verify_partitions(transactional_id, producer_id, producer_epoch, wanted)
            return {tp: error_for_version("AddPartitionsToTxn", version, e) for tp, e in found.items()}
        answer = await self.coordinator.add_partitions(transactional_id, producer_id, producer_epoch, wanted)
        error = error_for_version("AddPartitionsToTxn", version, answer.error)
        return {tp: error for tp in wanted}

    # -- AddOffsetsToTxn, EndTxn ---------------------------------------------------------------

    def add_offsets_to_txn(self, header: RequestHeader, request):
        if not allowed(self.authz, header, TXN, request.transactional_id):
            return refusal(ErrorCode.transactional_id_authorization_failed)
        if not allowed(self.authz, header, GROUP, request.group_id):
            return refusal(ErrorCode.group_authorization_failed)
        return self._add_offsets_to_txn(header.api_version, request)

    async def _add_offsets_to_txn(self, version: int, request) -> dict:
        answer = await self.coordinator.add_offsets(request.transactional_id, request.producer_id,
                                                    request.producer_epoch, request.group_id,
                                                    self._offsets_partition_count())
        return {"throttle_time": 0, "error_code": error_for_version("AddOffsetsToTxn", version, answer.error)}

    def end_txn(self, header: RequestHeader, request):
        if not allowed(self.authz, header, TXN, request.transactional_id):
            return refusal(ErrorCode.transactional_id_authorization_failed)
        return self._end_txn(header.api_version, request)

    async def _end_txn(self, version: int, request) -> dict:
        answer = await self.coordinator.end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                                request.committed)
        return {"throttle_time": 0, "error_code": error_for_version("EndTxn", version, answer.error)}

    # -- DescribeTransactions, ListTransactions (KIP-664) --------------------------------------

    def describe_transactions(self, header: RequestHeader, request) -> dict:
        core = self.coordinator.core
        refused = denied(self.authz, header, TXN, request.transactional_ids)
        out = []
        for transactional_id in request.transactional_ids:
            entry = {"error_code": ErrorCode.none, "transactional_id": transactional_id, "transaction_state": "",
                     "transaction_timeout": 0, "transaction_start_time": -1, "producer_id": -1, "producer_epoch": -1,
                     "topics": []}
            meta = (ErrorCode.transactional_id_authorization_failed if transactional_id in refused
                    else core.describe_transaction(transactional_id))
            if isinstance(meta, ErrorCode):
                entry["error_code"] = meta
            else:
                topics: dict[str, list[int]] = {}
                hidden = denied(self.authz, header, TOPIC, {topic for topic, _ in meta.partitions})
                for topic, index in sorted(meta.partitions):
                    if topic not in hidden:  # as Kafka: only the topics the principal may describe
                        topics.setdefault(topic, []).append(index)
                entry.update(transaction_state=meta.state.kafka_name, transaction_timeout=meta.txn_timeout_ms,
                             transaction_start_time=meta.txn_start_timestamp, producer_id=meta.producer_id,
                             producer_epoch=meta.producer_epoch,
                             topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()])
            out.append(entry)
        return {"throttle_time": 0, "transaction_states": out}

    def list_transactions(self, header: RequestHeader, request) -> dict:
        """Kafka's listTransactionStates: the ids this broker coordinates, filtered by state,
        producer id and (v1) a least running time; COORDINATOR_LOAD_IN_PROGRESS while loading."""
        if self.coordinator.loading:
            return {"throttle_time": 0, "error_code": ErrorCode.coordinator_load_in_progress,
                    "unknown_state_filters": [], "transaction_states": []}
        states = set(request.state_filters)
        unknown = sorted(states - set(STATE_NAMES))
        producers = set(request.producer_id_filters)
        duration = request.duration_filter if header.api_version >= 1 else -1
        now = now_ms()
        out = []
        for meta in self.coordinator.core.transactions():
            if (states and meta.state.kafka_name not in states) or (producers and meta.producer_id not in producers):
                continue
            if duration >= 0 and now - meta.txn_start_timestamp <= duration:
                continue
            out.append({"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
                        "transaction_state": meta.state.kafka_name})
        hidden = denied(self.authz, header, TXN, [t["transactional_id"] for t in out])  # those it may not describe
        out = [t for t in out if t["transactional_id"] not in hidden]
        return {"throttle_time": 0, "error_code": ErrorCode.none, "unknown_state_filters": unknown,
                "transaction_states": out}


def _topic_results(errors: dict[tuple[str, int], ErrorCode]) -> list[dict]:
    topics: dict[str, list] = {}
    for (topic, index), error in errors.items():
        topics.setdefault(topic, []).append({"partition_index": index, "partition_error_code": error})
    return [{"name": name, "results_by_partition": parts} for name, parts in topics.items()]

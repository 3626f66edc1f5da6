"""WriteTxnMarkers (api key 27, KIP-98): the transaction coordinator ends a transaction on the
partitions this broker leads.

Kafka's KafkaApis.handleWriteTxnMarkersRequest, for each marker (producer id and epoch, COMMIT or
ABORT, coordinator epoch) and each partition it names:

- A marker with a producer id < 0 refuses the whole request: UNKNOWN_SERVER_ERROR for every
  partition of every marker, nothing written (Kafka's MemoryRecordsBuilder.appendEndTxnMarker
  throws IllegalArgumentException for NO_PRODUCER_ID, and WriteTxnMarkersRequest.getErrorResponse
  puts that error on every partition).
- A partition this broker holds no replica of: UNKNOWN_TOPIC_OR_PARTITION (Kafka's getMagic
  finds no log). One it holds but does not lead (or cannot prove it leads):
  NOT_LEADER_OR_FOLLOWER. Both tell the coordinator to look the leader up again and retry.
- Otherwise the leader appends the marker (weir.replication.partition.Partition.append_marker,
  origin COORDINATOR): below min.insync.replicas NOT_ENOUGH_REPLICAS; a marker of a deposed
  coordinator TRANSACTION_COORDINATOR_FENCED; of an older producer epoch INVALID_PRODUCER_EPOCH.
  Nothing is written when it is refused.
- The answer waits until every appended marker is replicated to the ISR (Kafka appends markers
  with requiredAcks=-1), at most request.timeout.ms (REQUEST_TIMED_OUT), and gives each
  partition its error.
- Markers on `__consumer_offsets` partitions, once replicated without error, are handed to the
  group coordinator, which then makes that producer's pending transactional offset commits on
  the partition visible (COMMIT) or drops them (ABORT): `ReplicaManager.on_offsets_marker(
  partition_index, producer_id, committed)` when the server set it (Kafka's
  GroupCoordinator.onTransactionCompleted).

Versions 0 and 1 (flexible; the same fields). kio has no schema for version 0 (Kafka 4 removed
it, KIP-896): weir.protocol.legacy_schemas has it.
"""

from __future__ import annotations

import asyncio
import logging

from weir.broker.replica_manager import ReplicaManager
from weir.clock import now_ms
from weir.groups.placement import OFFSETS_TOPIC
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey
from weir.security.authorization import RequestAuthorizer, cluster_error

log = logging.getLogger(__name__)



class TxnMarkerApis:
    def __init__(self, replicas: ReplicaManager, authz: RequestAuthorizer | None = None) -> None:
        self.replicas = replicas
        self.authz = authz
        self.handlers = {ApiKey.WRITE_TXN_MARKERS: self.write_txn_markers}

    def write_txn_markers(self, header: RequestHeader, request):
        now = now_ms()
        timeout_ms = self.replicas.config["request.timeout.ms"]
        results = []  # per marker: (marker, {(topic, index): error})
        waiting = []  # (marker's errors, key, future)
        refused = self._refused(header, request)
        for marker in request.markers:
            errors: dict[tuple[str, int], ErrorCode] = {}
            for topic in marker.topics:
                for index in topic.partition_indexes:
                    key = (topic.name, index)
                    try:
                        if refused:
                            raise refused
                        errors[key] = ErrorCode.none
                        partition, offset = self._append(topic.name, index, marker, now)
                        waiting.append((errors, key, self.replicas.await_replication(partition, offset, timeout_ms,
                                                                                      now)))
                    except KafkaError as e:
                        errors[key] = e.code
                        log.info("WriteTxnMarkers: %s marker of producer %d (epoch %d) on %s-%d refused: %s",
                                 "COMMIT" if marker.transaction_result else "ABORT", marker.producer_id,
                                 marker.producer_epoch, topic.name, index, e)
            results.append((marker, errors))
        if not waiting:
            return self._answer(results)
        return self._answered_once_replicated(results, waiting)

    def _refused(self, header: RequestHeader, request) -> KafkaError | None:
        """The error of every partition when the request is refused whole."""
        if cluster_error(self.authz, header):  # CLUSTER_ACTION: from a transaction coordinator only
            return KafkaError(ErrorCode.cluster_authorization_failed,
                              "WriteTxnMarkers needs CLUSTER_ACTION on the cluster")
        invalid = [m.producer_id for m in request.markers if m.producer_id < 0]
        if invalid:
            return KafkaError(ErrorCode.unknown_server_error,
                              f"an end transaction marker requires a valid producer id, not {invalid[0]}")
        return None

    def _append(self, topic: str, index: int, marker, now_ms: int):
        if (topic, index) not in self.replicas.partitions:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no replica of {topic}-{index} here")
        return self.replicas.append_marker(topic, index, marker.producer_id, marker.producer_epoch,
                                           marker.transaction_result, marker.coordinator_epoch, now_ms)

    async def _answered_once_replicated(self, results, waiting) -> dict:
        await asyncio.gather(*(future for _, _, future in waiting))
        for errors, key, future in waiting:
            errors[key] = future.result()
        return self._answer(results)

    def _answer(self, results) -> dict:
        hook = self.replicas.on_offsets_marker
        out = []
        for marker, errors in results:
            topics: dict[str, list] = {}
            for (name, index), error in errors.items():
                topics.setdefault(name, []).append({"partition_index": index, "error_code": error})
                if hook is not None and name == OFFSETS_TOPIC and error == ErrorCode.none:
                    hook(index, marker.producer_id, marker.transaction_result)
            out.append({"producer_id": marker.producer_id,
                        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]})
        return {"markers": out}

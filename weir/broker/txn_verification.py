"""KIP-890 part 1, the partition leader's side: before a producer's first transactional batch on a
partition is appended, ask the transaction coordinator whether the producer added the partition
to its transaction (Kafka's AddPartitionsToTxnManager).

Rules this module owns (Kafka 3.6+; transaction.partition.verification.enable):

- THE COORDINATOR of transactional id T is the leader of `__transaction_state` partition
  `partition_for(T, its partition count)` (50 by default). No such topic, partition or live
  leader: COORDINATOR_NOT_AVAILABLE.
- THE QUESTION is AddPartitionsToTxn v4 sent broker to broker: one transaction (T, the batch's
  producer id and epoch, verify_only=true) naming the partitions of the Produce request that
  need verification. The answer's per-partition errors are the unverified partitions; none is
  verified.
- ERRORS AS THE PRODUCER SEES THEM (AddPartitionsToTxnManager, ReplicaManager):
  PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH (produce_error_for_verification); a top-level
  CLUSTER_AUTHORIZATION_FAILED becomes INVALID_TXN_STATE; the retriable ones
  (CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION: no connection or no answer,
  COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) become
  NOT_ENOUGH_REPLICAS, which every producer retries without a metadata refresh.
- A coordinator that does not know AddPartitionsToTxn v4 cannot verify: the batch is appended
  unverified, as Kafka does on an unsupported version. (All Weir brokers run one version: that
  is this broker's own table of versions.)

Theory of operation: `TxnVerifier.verify` is awaited by the Produce handler between
Partition.start_verification (which hands out the guard) and the append that carries the guard.
"""

from __future__ import annotations

import logging

from weir.client import ClientError
from weir.protocol.errors import ErrorCode
from weir.protocol.versions import ApiKey, is_supported
from weir.transactions.coordinator import partition_for
from weir.transactions.partition_txns import produce_error_for_verification
from weir.transactions.state_log import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)

VERIFY_VERSION = 4
RETRIABLE = frozenset({ErrorCode.concurrent_transactions, ErrorCode.network_exception,
                       ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                       ErrorCode.not_coordinator})


def error_for_producer(coordinator_error: ErrorCode) -> ErrorCode:
    """What the producer is told when the coordinator did not verify its partition."""
    if coordinator_error in RETRIABLE:
        return ErrorCode.not_enough_replicas
    return produce_error_for_verification(coordinator_error)


def verification_supported() -> bool:
    return is_supported(ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION)


def coordinator_of(view, transactional_id: str) -> int | None:
    """The broker leading the coordinator's `__transaction_state` partition, if it is alive."""
    assignment = view.topics.get(TRANSACTION_STATE_TOPIC)
    if assignment is None or not assignment.replicas:
        return None
    state = view.states.get((TRANSACTION_STATE_TOPIC, partition_for(transactional_id, len(assignment.replicas))))
    if state is None or state.leader < 0 or state.leader not in view.brokers:
        return None
    return state.leader


class TxnVerifier:
    def __init__(self, replicas, connect) -> None:
        self.replicas = replicas
        self.connect = connect  # broker id -> a (cached) BrokerConnection

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """The error the producer gets for each partition of `partitions` that is not verified
        (none: all verified)."""
        coordinator = coordinator_of(self.replicas.view, transactional_id)
        if coordinator is None:
            return self._all(partitions, ErrorCode.coordinator_not_available)
        if not verification_supported():
            return {}
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        try:
            conn = await self.connect(coordinator)
            response = await conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, {"transactions": [{
                "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
                "verify_only": True,
                "topics": [{"name": name, "partitions": indexes} for name, indexes in topics.items()]}]},
                timeout_s=self.replicas.config["request.timeout.ms"] / 1000)
        except (ClientError, OSError) as e:
            log.warning("AddPartitionsToTxn (verify) of %s to broker %d failed: %s", transactional_id, coordinator, e)
            return self._all(partitions, ErrorCode.network_exception)
        if response.error_code:
            error = ErrorCode(response.error_code)
            if error == ErrorCode.cluster_authorization_failed:
                error = ErrorCode.invalid_txn_state
            return self._all(partitions, error)
        unverified = {}
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    if p.partition_error_code:
                        unverified[(topic.name, p.partition_index)] = error_for_producer(
                            ErrorCode(p.partition_error_code))
        return unverified

    @staticmethod
    def _all(partitions, error: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
        return {key: error_for_producer(error) for key in partitions}

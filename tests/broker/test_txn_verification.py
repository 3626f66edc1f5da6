"""KIP-890 part 1's sending side, pure parts: which broker is a transactional id's coordinator,
and what a producer is told when its partition was not verified (Kafka's AddPartitionsToTxnManager
and ReplicaManager)."""

import uuid

from kio.schema.errors import ErrorCode

from weir.broker.txn_verification import TRANSACTION_STATE_TOPIC, coordinator_of, error_for_producer
from weir.transactions.coordinator import partition_for
from weir.zk.model import ClusterView, PartitionState, TopicAssignment


def view_with(leaders: dict[int, int], live=(0, 1, 2)) -> ClusterView:
    view = ClusterView()
    view.brokers = {b: object() for b in live}
    view.topics[TRANSACTION_STATE_TOPIC] = TopicAssignment(TRANSACTION_STATE_TOPIC, uuid.uuid4(),
                                                           {p: (0, 1, 2) for p in range(len(leaders))})
    for p, leader in leaders.items():
        view.states[(TRANSACTION_STATE_TOPIC, p)] = PartitionState(leader, 0, (0, 1, 2) if leader >= 0 else (0,),
                                                                   0, 0)
    return view


def test_the_coordinator_leads_the_transaction_state_partition_of_the_id():
    leaders = {p: p % 3 for p in range(50)}
    view = view_with(leaders)
    for txn_id in ("tx", "orders-app-0", "x" * 40):
        assert coordinator_of(view, txn_id) == leaders[partition_for(txn_id, 50)]
    assert coordinator_of(view_with({0: 2, 1: 1, 2: 0}), "tx") == {0: 2, 1: 1, 2: 0}[partition_for("tx", 3)]


def test_no_coordinator_without_the_topic_a_leader_or_a_live_one():
    assert coordinator_of(ClusterView(), "tx") is None
    p = partition_for("tx", 50)
    assert coordinator_of(view_with({i: (-1 if i == p else 0) for i in range(50)}), "tx") is None
    assert coordinator_of(view_with({i: 2 for i in range(50)}, live=(0, 1)), "tx") is None


def test_errors_as_the_producer_sees_them():
    assert error_for_producer(ErrorCode.producer_fenced) == ErrorCode.invalid_producer_epoch
    for retriable in (ErrorCode.concurrent_transactions, ErrorCode.network_exception,
                      ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                      ErrorCode.not_coordinator):
        assert error_for_producer(retriable) == ErrorCode.not_enough_replicas
    assert error_for_producer(ErrorCode.invalid_txn_state) == ErrorCode.invalid_txn_state
    assert error_for_producer(ErrorCode.invalid_producer_id_mapping) == ErrorCode.invalid_producer_id_mapping

"""Transactional offsets in a group (pure), their records in __consumer_offsets, and the routing
of transaction markers to partition leaders (MarkerSender with a fake cluster view)."""

import asyncio
import uuid

from weir.broker.marker_sender import MarkerSender, request_body
from weir.groups.group import UNKNOWN_MEMBER, Group, GroupConfig
from weir.groups.offsets import CommittedOffset
from weir.groups.records import LoggedMarker, LoggedRecord, encode_batch, encode_transactional_batch, read_offsets_log
from weir.protocol.errors import ErrorCode
from weir.protocol.record_batch import TRANSACTIONAL_BIT, crc_matches, read_batch_header
from weir.transactions.coordinator import MarkersToSend, TransactionResult
from weir.transactions.markers import marker_batch, marker_of
from weir.zk.model import BrokerInfo, ClusterView, PartitionState, TopicAssignment

TP = ("data", 0)


def offset(value: int, log_offset: int = -1) -> CommittedOffset:
    return CommittedOffset(value, -1, "", 1000, -1, log_offset)


# -- the group's pending transactional offsets ---------------------------------------------------

def test_transactional_offsets_are_pending_until_committed():
    group = Group("g", GroupConfig(), 0)
    prepared = {TP: offset(5)}
    group.prepare_txn_offsets(7, prepared)
    assert group.has_pending_offsets(TP) and group.offsets == {}
    group.on_txn_offsets_written(7, prepared, {TP: 100})
    group.complete_txn_offsets(7, committed=True)
    assert group.offsets[TP].offset == 5 and group.offsets[TP].log_offset == 100
    assert not group.has_pending_offsets(TP) and group.pending_txn_offsets == {}


def test_an_abort_drops_them_and_a_failed_write_is_not_pending():
    group = Group("g", GroupConfig(), 0)
    group.on_offsets_committed({TP: offset(3, 50)})
    prepared = {TP: offset(5)}
    group.prepare_txn_offsets(7, prepared)
    group.on_txn_offsets_written(7, prepared, {TP: 100})
    group.complete_txn_offsets(7, committed=False)
    assert group.offsets[TP].offset == 3
    failed = {TP: offset(9)}
    group.prepare_txn_offsets(8, failed)
    group.on_txn_offsets_failed(8, failed)
    assert not group.has_pending_offsets(TP) and 8 not in group.pending_txn_offsets


def test_a_later_plain_commit_wins_over_an_older_transactional_one():
    group = Group("g", GroupConfig(), 0)
    prepared = {TP: offset(5)}
    group.prepare_txn_offsets(7, prepared)
    group.on_txn_offsets_written(7, prepared, {TP: 100})
    group.on_offsets_committed({TP: offset(6, 101)})  # OffsetCommit after the TxnOffsetCommit
    group.complete_txn_offsets(7, committed=True)
    assert group.offsets[TP].offset == 6


def test_offsets_not_yet_written_when_the_marker_lands_are_not_made_visible():
    group = Group("g", GroupConfig(), 0)
    group.prepare_txn_offsets(7, {TP: offset(5)})
    group.complete_txn_offsets(7, committed=True)
    assert group.offsets == {}


def test_an_offset_with_a_pending_transactional_commit_does_not_expire():
    group = Group("g", GroupConfig(offsets_retention_ms=1000), 0)
    group.on_offsets_committed({TP: offset(3, 50), ("data", 1): offset(4, 51)})
    group.prepare_txn_offsets(7, {TP: offset(5)})
    assert group.expired_offsets(10_000) == [("data", 1)]


def test_txn_offset_commit_checks_are_kafkas():
    group = Group("g", GroupConfig(), 0)
    assert group.validate_txn_offset_commit(UNKNOWN_MEMBER, None, -1) is None
    # Kafka's validateOffsetCommit: no generation into an Empty group is taken from anyone; a
    # generation must come from a current member (GroupCoordinator.scala, ClassicGroup.java)
    assert group.validate_txn_offset_commit("stranger", None, -1) is None
    assert group.validate_txn_offset_commit(UNKNOWN_MEMBER, None, 3) == ErrorCode.unknown_member_id
    group.mark_dead(ErrorCode.not_coordinator, 0)
    assert group.validate_txn_offset_commit(UNKNOWN_MEMBER, None, -1) == ErrorCode.coordinator_not_available


# -- records ---------------------------------------------------------------------------------------

def test_a_transactional_offsets_batch_and_its_marker_read_back_in_log_order():
    batch = encode_transactional_batch([(b"k1", b"v1"), (b"k2", None)], 1000, producer_id=7, producer_epoch=2)
    header = read_batch_header(batch)
    assert header.attributes == TRANSACTIONAL_BIT and (header.producer_id, header.producer_epoch) == (7, 2)
    assert header.base_sequence == 0 and crc_matches(batch, 0, len(batch), header.crc)
    plain = bytearray(encode_batch([(b"k3", b"v3")], 1000))
    plain[0:8] = (3).to_bytes(8, "big")
    marker = marker_batch(7, 2, marker_of(False, 4), timestamp=1000, base_offset=2)
    entries, next_offset, skipped = read_offsets_log(batch + marker + bytes(plain))
    assert entries == [LoggedRecord(0, b"k1", b"v1", 7), LoggedRecord(1, b"k2", None, 7),
                       LoggedMarker(2, 7, committed=False), LoggedRecord(3, b"k3", b"v3", None)]
    assert (next_offset, skipped) == (4, 0)


# -- marker routing --------------------------------------------------------------------------------

class FakeReplicas:
    def __init__(self) -> None:
        self.view = ClusterView(
            brokers={0: BrokerInfo(0, "h", 1), 1: BrokerInfo(1, "h", 2)},
            topics={"a": TopicAssignment("a", uuid.uuid4(), {0: (0, 1), 1: (1, 0), 2: (0, 1)})},
            states={("a", 0): PartitionState(0, 1, (0, 1), 1, 0), ("a", 1): PartitionState(1, 1, (1, 0), 1, 0),
                    ("a", 2): PartitionState(-1, 2, (), 1, 0)})


class FakeConnection:
    closed = False

    def __init__(self, broker_id: int, sent: list, fail: bool) -> None:
        self.broker_id, self.sent, self.fail = broker_id, sent, fail

    async def request(self, api_key, version, body, timeout_s=None):
        self.sent.append((self.broker_id, api_key, version, body))
        if self.fail:
            from weir.client import ConnectionClosed
            raise ConnectionClosed("gone")
        marker = body["markers"][0]

        class Result:
            pass
        out = Result()
        out.markers = [Result()]
        out.markers[0].producer_id = marker["producer_id"]
        topic = Result()
        topic.name = "a"
        topic.partitions = []
        for index in marker["topics"][0]["partition_indexes"]:
            p = Result()
            p.partition_index, p.error_code = index, ErrorCode.none
            topic.partitions.append(p)
        out.markers[0].topics = [topic]
        return out

    async def close(self) -> None:
        pass


def test_markers_go_to_each_leader_deleted_partitions_are_unroutable_and_leaderless_ones_wait():
    results, unroutable, sent = [], [], []

    async def scenario():
        async def connect(broker_id):
            return FakeConnection(broker_id, sent, fail=broker_id == 1)
        sender = MarkerSender(FakeReplicas(), connect, lambda m, e: results.append((m, e)),
                              lambda m, ps: unroutable.append(ps), backoff_ms=10_000, timeout_ms=1000)
        markers = MarkersToSend("t", 7, 3, 5, TransactionResult.COMMIT,
                                frozenset({("a", 0), ("a", 1), ("a", 2), ("gone", 0)}))
        sender.send(markers)
        await asyncio.sleep(0.05)
        await sender.close()

    asyncio.run(scenario())
    assert unroutable == [[("gone", 0)]]
    assert sorted((b, body["markers"][0]["topics"][0]["partition_indexes"][0]) for b, _, _, body in sent) == \
        [(0, 0), (1, 1)]
    assert all((api, version) == (27, 1) for _, api, version, _ in sent)
    errors = {tp: e for _, by_tp in results for tp, e in by_tp.items()}
    # answered by broker 0; broker 1's connection failed: retried by the core (REQUEST_TIMED_OUT);
    # a-2 has no leader: held back for the backoff, not reported
    assert errors == {("a", 0): ErrorCode.none, ("a", 1): ErrorCode.request_timed_out}


def test_write_txn_markers_body():
    body = request_body(MarkersToSend("t", 7, 3, 5, TransactionResult.ABORT, frozenset({("b", 1), ("a", 2), ("b", 0)})))
    assert body == {"markers": [{"producer_id": 7, "producer_epoch": 3, "transaction_result": False,
                                 "coordinator_epoch": 5, "topics": [{"name": "a", "partition_indexes": [2]},
                                                                    {"name": "b", "partition_indexes": [0, 1]}]}]}

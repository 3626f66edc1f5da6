"""OffsetCommit on a running broker, spoken by hand for the versions today's clients no longer send."""

import datetime

from kio.schema.find_coordinator.v1.request import FindCoordinatorRequest
from kio.schema.offset_commit.v2.request import (OffsetCommitRequest, OffsetCommitRequestPartition,
                                                 OffsetCommitRequestTopic)
from kio.schema.offset_fetch.v1.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.static.primitive import i64Timedelta
from raw_protocol import NONE, RawClient, assert_healthy, create_topic
from waiting import wait_until

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
GROUP_SETTINGS = {"offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}


def coordinator_found(client, group):
    return client.call(FIND_COORDINATOR, 1, FindCoordinatorRequest(key=group, key_type=0)).error_code == NONE


def commit_v2(client, group, offset, retention_ms):
    response = client.call(OFFSET_COMMIT, 2, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        retention_time=i64Timedelta.parse(datetime.timedelta(milliseconds=retention_ms)),
        topics=(OffsetCommitRequestTopic(name="t", partitions=(
            OffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_metadata=""),)),)))
    return response.topics[0].partitions[0].error_code


def committed(client, group):
    response = client.call(OFFSET_FETCH, 1, OffsetFetchRequest(
        group_id=group, topics=(OffsetFetchRequestTopic(name="t", partition_indexes=(0,)),)))
    return response.topics[0].partitions[0].committed_offset


def test_a_v2_commit_expires_after_its_own_retention_time_unless_it_is_minus_one(start_broker):
    """Kafka takes any retention_time but -1 (DEFAULT_RETENTION_TIME) as the offset's lifetime from
    its commit (GroupCoordinatorAdapter.commitOffsets: expire = now + retention), 0 and below too:
    such an offset is gone at the next expiry pass, while the one committed with -1 keeps the
    broker's offsets.retention.minutes."""
    broker = start_broker(0, **GROUP_SETTINGS, **{"offsets.retention.check.interval.ms": "200"})
    with RawClient(broker.port) as client:
        create_topic(client, "t")
        wait_until(lambda: coordinator_found(client, "kept"), "the group coordinator")
        assert wait_until(lambda: commit_v2(client, "kept", 7, -1) == NONE, "the coordinator to take commits")
        for group, retention in [("zero", 0), ("negative", -2)]:
            assert commit_v2(client, group, 5, retention) == NONE
            assert committed(client, group) in (5, -1)
        wait_until(lambda: committed(client, "zero") == committed(client, "negative") == -1, "the offsets to expire")
        assert committed(client, "kept") == 7
    assert_healthy(broker)


def test_a_v2_commits_retention_time_survives_a_restart(start_broker):
    """The expire timestamp is written in the offset's record (value v1, as Kafka's
    offsetCommitValue), so the coordinator that loads the group again still expires it."""
    broker = start_broker(0, **GROUP_SETTINGS, **{"offsets.retention.check.interval.ms": "200"})
    with RawClient(broker.port) as client:
        create_topic(client, "t")
        wait_until(lambda: coordinator_found(client, "brief"), "the group coordinator")
        assert wait_until(lambda: commit_v2(client, "brief", 5, 20_000) == NONE, "the coordinator to take commits")
    broker.stop()
    broker.start()
    with RawClient(broker.port) as client:
        assert wait_until(lambda: coordinator_found(client, "brief"), "the group coordinator")
        wait_until(lambda: committed(client, "brief") == -1, "the offset to expire after the restart")
    assert_healthy(broker)


def test_a_v2_commit_with_the_longest_retention_time_is_kept(start_broker):
    """retention_time is an int64 to Kafka: 2^63-1 is answered and the offset kept (kio's
    timedelta reader overflowed on it, and the connection was closed). The expiry is capped at
    int64's end, where Java's sum wraps around to the past."""
    from weir.protocol.schema_overrides import REQUEST_SCHEMAS
    broker = start_broker(0, **GROUP_SETTINGS, **{"offsets.retention.check.interval.ms": "200"})
    longest = REQUEST_SCHEMAS[(OFFSET_COMMIT, 2)]
    with RawClient(broker.port) as client:
        create_topic(client, "t")
        wait_until(lambda: coordinator_found(client, "forever"), "the group coordinator")

        def commit() -> int:
            response = client.call(OFFSET_COMMIT, 2, longest(
                group_id="forever", generation_id_or_member_epoch=-1, member_id="", retention_time=2**63 - 1,
                topics=(OffsetCommitRequestTopic(name="t", partitions=(
                    OffsetCommitRequestPartition(partition_index=0, committed_offset=9, committed_metadata=""),)),)))
            return response.topics[0].partitions[0].error_code
        assert wait_until(lambda: commit() == NONE, "the coordinator to take commits")
        assert committed(client, "forever") == 9
        assert commit_v2(client, "probe", 1, 0) == NONE  # a later pass expires this one, not "forever"
        wait_until(lambda: committed(client, "probe") == -1, "an expiry pass")
        assert committed(client, "forever") == 9
    assert_healthy(broker)

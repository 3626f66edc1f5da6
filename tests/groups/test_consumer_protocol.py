"""Consumer groups of the consumer protocol (KIP-848) against real brokers: confluent-kafka
(librdkafka) members with group.protocol=consumer, and the wire answers Kafka 4 gives.

Each member runs in a thread and commits synchronously after every record it hands on; the
checks are those of test_consumer_groups: every record consumed, none read again past a commit
that succeeded, and at the end the committed offsets are the end of every partition.
"""

import asyncio
import threading
import uuid

from waiting import wait_until

from weir.client import BrokerConnection
from weir.groups.placement import partition_for
from weir.protocol.errors import ErrorCode
from weir.protocol.versions import ApiKey

from .test_consumer_groups import (check_exactly_once_past_commits, create_topic, expected_offsets, find_coordinator,
                                   produce)

# heartbeats every 500 ms (Kafka's lowest is 5 s: the bounds are lowered with it)
CONSUMER_SETTINGS = {"offsets.topic.num.partitions": "3", "num.partitions": "6",
                     "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
                     "group.consumer.session.timeout.ms": "10000", "group.consumer.min.session.timeout.ms": "10000"}


class Member(threading.Thread):
    """A consumer-protocol member in a thread; `log` gets (partition, offset, committed)."""

    def __init__(self, bootstrap: str, group: str, topic: str, log: list, **extra) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "topic.metadata.refresh.interval.ms": 1000, **extra})
        self.consumer.subscribe([topic])
        self.log = log
        self.stopping = threading.Event()
        self.assignment: list[int] = []
        self.assigned: list[tuple[str, int]] = []  # read here, not by calling the consumer from another thread

    def run(self) -> None:
        from confluent_kafka import KafkaException
        while not self.stopping.is_set():
            msg = self.consumer.poll(0.2)
            self.assigned = sorted((tp.topic, tp.partition) for tp in self.consumer.assignment())
            self.assignment = [p for _, p in self.assigned]
            if msg is None or msg.error():
                continue
            try:
                self.consumer.commit(message=msg, asynchronous=False)
                committed = True
            except KafkaException:
                committed = False
            self.log.append((msg.partition(), msg.offset(), committed))

    def leave(self) -> None:
        self.stopping.set()
        self.join(30)
        self.consumer.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    [result] = admin.list_consumer_group_offsets([request]).values()
    return {tp.partition: tp.offset for tp in result.result(30).topic_partitions}


def test_members_split_six_partitions_a_third_joins_and_one_leaves(start_broker):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient
    broker = start_broker(0, **CONSUMER_SETTINGS)
    topic, partitions, group = "kip848", 6, "g-848"
    create_topic(broker.bootstrap, topic, partitions)
    log: list = []
    members = [Member(broker.bootstrap, group, topic, log) for _ in range(2)]
    for m in members:
        m.start()
    wait_until(lambda: sorted(len(m.assignment) for m in members) == [3, 3], "3 partitions each", 30)
    produce(broker.bootstrap, topic, 300, partitions)
    wait_until(lambda: len({(p, o) for p, o, _ in log}) >= 300, "first 300 consumed", 30)

    members.append(Member(broker.bootstrap, group, topic, log))
    members[-1].start()
    produce(broker.bootstrap, topic, 300, partitions, start=300)
    wait_until(lambda: sorted(len(m.assignment) for m in members) == [2, 2, 2], "2 partitions each", 30)
    assert sorted(p for m in members for p in m.assignment) == list(range(partitions))

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert described.type == ConsumerGroupType.CONSUMER and len(described.members) == 3, described
    assert sorted(len(m.assignment.topic_partitions) for m in described.members) == [2, 2, 2]
    listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30)
    assert [g.group_id for g in listed.valid] == [group]
    assert not admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(30).valid

    members[0].leave()
    rest = members[1:]
    produce(broker.bootstrap, topic, 300, partitions, start=600)
    wait_until(lambda: sorted(len(m.assignment) for m in rest) == [3, 3], "3 partitions each after the leave", 30)
    wait_until(lambda: len({(p, o) for p, o, _ in log}) >= 900, "all 900 consumed", 30)
    wait_until(lambda: sum(committed_offsets(broker.bootstrap, group, topic, partitions).values()) == 900,
               "every record committed", 30)
    for m in rest:
        m.leave()
    check_exactly_once_past_commits(log, expected_offsets(900, partitions))
    assert admin.describe_consumer_groups([group])[group].result(30).state == ConsumerGroupState.EMPTY


def test_group_carries_on_when_its_coordinator_is_killed(start_cluster):
    cluster = start_cluster(**CONSUMER_SETTINGS, **{"offsets.topic.replication.factor": "3",
                                                    "default.replication.factor": "3"})
    topic, partitions, group = "kip848-failover", 6, "g-848-failover"
    create_topic(cluster.bootstrap, topic, partitions, replication=3)
    log: list = []
    members = [Member(cluster.bootstrap, group, topic, log) for _ in range(2)]
    for m in members:
        m.start()
    wait_until(lambda: sorted(len(m.assignment) for m in members) == [3, 3], "3 partitions each", 40)
    produce(cluster.bootstrap, topic, 300, partitions)
    wait_until(lambda: len({(p, o) for p, o, _ in log}) >= 300, "first 300 consumed", 30)
    committed_before = committed_offsets(cluster.bootstrap, group, topic, partitions)
    assigned_before = sorted(tuple(m.assignment) for m in members)

    coordinator = find_coordinator(cluster.brokers[0].port, group)
    cluster.brokers[coordinator].kill()
    survivor = next(b for b in cluster.brokers if b.running)
    produce(survivor.bootstrap, topic, 300, partitions, start=300)
    wait_until(lambda: len({(p, o) for p, o, _ in log}) >= 600, "all 600 consumed after the failover", 60)
    new_coordinator = find_coordinator(survivor.port, group)
    assert new_coordinator != coordinator
    index = partition_for(group, 3)
    assert f"__consumer_offsets-{index}: coordinating 1 group(s)" in cluster.brokers[new_coordinator].output()
    after = committed_offsets(survivor.bootstrap, group, topic, partitions)
    assert all(after[p] >= committed_before[p] for p in range(partitions)), (committed_before, after)
    wait_until(lambda: sum(committed_offsets(survivor.bootstrap, group, topic, partitions).values()) == 600,
               "every record committed", 30)
    # the new coordinator took the members and their assignment over from the records: no rebalance
    assert sorted(tuple(m.assignment) for m in members) == assigned_before
    for m in members:
        m.leave()
    check_exactly_once_past_commits(log, expected_offsets(600, partitions))


# -- the wire ---------------------------------------------------------------------------------------

def _join(group: str, member: str, **extra) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout": 30000, "subscribed_topic_names": ["wire"], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": [], **extra}


def test_the_wire_answers_as_kafka_4(start_broker):
    broker = start_broker(0, **CONSUMER_SETTINGS)
    create_topic(broker.bootstrap, "wire", 2)
    for group in ("gw", "gw0"):
        find_coordinator(broker.port, group)  # creates __consumer_offsets

    async def scenario() -> None:
        async with await BrokerConnection.open("127.0.0.1", broker.port, timeout_s=10) as conn:
            async def beat(version=1, **body):
                for _ in range(100):
                    response = await conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, body)
                    if response.error_code not in (ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
                                                   ErrorCode.coordinator_load_in_progress):
                        return response
                    await asyncio.sleep(0.1)
                raise AssertionError(response)
            member = str(uuid.uuid4())
            joined = await beat(**_join("gw", member))
            assert joined.error_code == ErrorCode.none and joined.member_epoch == 1, joined
            assert joined.heartbeat_interval.total_seconds() == 0.5
            [owned] = joined.assignment.topic_partitions
            assert sorted(owned.partitions) == [0, 1]
            meta = await conn.request(ApiKey.METADATA, 12, {"topics": [{"name": "wire", "topic_id": None}],
                                                            "allow_auto_topic_creation": False,
                                                            "include_topic_authorized_operations": False})
            assert meta.topics[0].topic_id == owned.topic_id  # assignments name topics by Metadata's ids
            assert (await beat(**_join("gw", member, server_assignor="sticky"))).error_code == \
                ErrorCode.unsupported_assignor
            bad_regex = _join("gw", "m2", subscribed_topic_names=None, subscribed_topic_regex="wi(re")
            assert (await beat(**bad_regex)).error_code == ErrorCode.invalid_regular_expression
            assert (await beat(**_join("gw", ""))).error_code == ErrorCode.invalid_request  # v1: the client names it
            v0 = await beat(version=0, **_join("gw0", ""))
            assert v0.error_code == ErrorCode.none and v0.member_id  # v0: the coordinator does
            ahead = await beat(group_id="gw", member_id=member, member_epoch=5, topic_partitions=None)
            assert ahead.error_code == ErrorCode.fenced_member_epoch
            unknown = await beat(group_id="gw", member_id="nobody", member_epoch=1, topic_partitions=None)
            assert unknown.error_code == ErrorCode.unknown_member_id

            def commit(version, epoch):
                return conn.request(ApiKey.OFFSET_COMMIT, version, {
                    "group_id": "gw", "generation_id_or_member_epoch": epoch, "member_id": member,
                    "group_instance_id": None, "topics": [{"name": "wire", "partitions": [
                        {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                         "committed_metadata": ""}]}]})
            assert (await commit(9, 1)).topics[0].partitions[0].error_code == ErrorCode.none
            assert (await commit(9, 0)).topics[0].partitions[0].error_code == ErrorCode.stale_member_epoch
            assert (await commit(8, 1)).topics[0].partitions[0].error_code == ErrorCode.unsupported_version
            fetched = await conn.request(ApiKey.OFFSET_FETCH, 9, {"groups": [
                {"group_id": "gw", "member_id": member, "member_epoch": 0, "topics": None}], "require_stable": True})
            assert fetched.groups[0].error_code == ErrorCode.stale_member_epoch

            described = await conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
                "group_ids": ["gw", "absent"], "include_authorized_operations": False})
            gw, absent = described.groups
            assert (gw.group_state, gw.group_epoch, gw.assignment_epoch, gw.assignor_name) == ("Stable", 1, 1,
                                                                                               "uniform")
            assert gw.members[0].member_epoch == 1 and gw.members[0].assignment.topic_partitions[0].topic_name == "wire"
            assert absent.error_code == ErrorCode.group_id_not_found
            classic = await conn.request(ApiKey.DESCRIBE_GROUPS, 6, {"groups": ["gw"],
                                                                     "include_authorized_operations": False})
            assert classic.groups[0].error_code == ErrorCode.group_id_not_found
            assert classic.groups[0].error_message == "Group gw is not a classic group."
            listed = await conn.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
            assert {(g.group_id, g.group_type) for g in listed.groups} == {("gw", "consumer"), ("gw0", "consumer")}
            join = await conn.request(ApiKey.JOIN_GROUP, 9, {
                "group_id": "gw", "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
                "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range",
                                                                                         "metadata": b""}],
                "reason": None})
            assert join.error_code == ErrorCode.inconsistent_group_protocol

            async def delete(group):
                response = await conn.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
                return response.results[0].error_code
            assert await delete("gw") == ErrorCode.non_empty_group
            left = await beat(group_id="gw", member_id=member, member_epoch=-1, topic_partitions=None)
            assert left.error_code == ErrorCode.none and left.member_epoch == -1
            empty = await conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["gw"],
                                                                           "include_authorized_operations": False})
            assert empty.groups[0].group_state == "Empty" and empty.groups[0].group_epoch == 2

            # an empty group of one type gives way to the other, its offsets kept
            async def committed(group):
                response = await conn.request(ApiKey.OFFSET_FETCH, 9, {"groups": [
                    {"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}],
                    "require_stable": False})
                return [p.committed_offset for t in response.groups[0].topics for p in t.partitions]
            assert await committed("gw") == [0]
            classic_join = await conn.request(ApiKey.JOIN_GROUP, 9, {
                "group_id": "gw", "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}], "reason": None})
            assert classic_join.error_code == ErrorCode.member_id_required  # a classic group now
            assert await committed("gw") == [0]
            again = await beat(**_join("gw", member))
            assert again.error_code == ErrorCode.none and again.member_epoch == 1, "a consumer group again"
            assert await committed("gw") == [0]
            await beat(group_id="gw", member_id=member, member_epoch=-1, topic_partitions=None)
            assert await delete("gw") == ErrorCode.none
            assert await committed("gw") == []
            gone = await conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["gw"],
                                                                          "include_authorized_operations": False})
            assert gone.groups[0].error_code == ErrorCode.group_id_not_found
    asyncio.run(scenario())


def test_java_client_members_split_join_and_leave(start_broker):
    """The same with Apache Kafka's Java client (3.9.1, where group.protocol=consumer is a preview:
    it speaks ConsumerGroupHeartbeat v0, the coordinator naming its member), and a librdkafka
    member in the same group."""
    from java_client import JavaMember
    broker = start_broker(0, **CONSUMER_SETTINGS)
    topic, partitions, group = "kip848-java", 6, "g-848-java"
    create_topic(broker.bootstrap, topic, partitions)
    log: list = []
    members = [JavaMember(broker.bootstrap, group, topic, log) for _ in range(2)]
    try:
        wait_until(lambda: sorted(len(m.assignment) for m in members) == [3, 3], "3 partitions each", 60)
        produce(broker.bootstrap, topic, 300, partitions)
        wait_until(lambda: len({(p, o) for p, o, _ in log}) >= 300, "first 300 consumed", 30)
        members.append(Member(broker.bootstrap, group, topic, log))
        members[-1].start()
        produce(broker.bootstrap, topic, 300, partitions, start=300)
        wait_until(lambda: sorted(len(m.assignment) for m in members) == [2, 2, 2], "2 partitions each", 30)
        assert sorted(p for m in members for p in m.assignment) == list(range(partitions))
        members[0].leave()
        rest = members[1:]
        wait_until(lambda: sorted(len(m.assignment) for m in rest) == [3, 3], "3 partitions each after the leave", 30)
        wait_until(lambda: len({(p, o) for p, o, _ in log}) >= 600, "all 600 consumed", 30)
        wait_until(lambda: sum(committed_offsets(broker.bootstrap, group, topic, partitions).values()) == 600,
                   "every record committed", 30)
        for m in rest:
            m.leave()
    finally:
        for m in members:
            if isinstance(m, JavaMember):
                m.kill()
    check_exactly_once_past_commits(log, expected_offsets(600, partitions))


def describe_group(port: int, group: str):
    async def ask():
        async with await BrokerConnection.open("127.0.0.1", port, timeout_s=10) as conn:
            response = await conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [group],
                                                                              "include_authorized_operations": False})
            return response.groups[0]
    return asyncio.run(ask())


def test_regular_expression_subscription_follows_new_topics(start_broker):
    """librdkafka sends a ^-pattern as the subscription's regex; the coordinator matches it (RE2,
    as Kafka) and a topic created later joins the assignment."""
    broker = start_broker(0, **CONSUMER_SETTINGS)
    create_topic(broker.bootstrap, "rx-a", 2)
    create_topic(broker.bootstrap, "other", 2)
    log: list = []
    member = Member(broker.bootstrap, "g-rx", "^rx-.*", log)
    member.start()
    try:
        wait_until(lambda: member.assignment == [0, 1], "rx-a's partitions", 30)
        create_topic(broker.bootstrap, "rx-b", 3)
        wait_until(lambda: len(member.assigned) == 5, "rx-b's partitions too", 30)
        assert {topic for topic, _ in member.assigned} == {"rx-a", "rx-b"}
        described = describe_group(broker.port, "g-rx")
        assert described.members[0].subscribed_topic_regex == "(^rx-.*)"  # as librdkafka sends it
    finally:
        member.leave()


def test_a_static_member_comes_back_to_its_partitions_without_a_rebalance(start_broker):
    """group.instance.id: closing sends epoch -2 (the member keeps its place and partitions for
    the session timeout); a new consumer with the same instance id takes them over, the group
    epoch unchanged and the other member untouched."""
    broker = start_broker(0, **CONSUMER_SETTINGS)
    topic, group = "static848", "g-static"
    create_topic(broker.bootstrap, topic, 6)
    log: list = []
    members = [Member(broker.bootstrap, group, topic, log, **{"group.instance.id": f"i{n}"}) for n in range(2)]
    for m in members:
        m.start()
    wait_until(lambda: sorted(len(m.assignment) for m in members) == [3, 3], "3 partitions each", 30)
    wait_until(lambda: describe_group(broker.port, group).group_state == "Stable", "stable", 30)
    before = describe_group(broker.port, group)
    kept = members[0].assignment
    members[0].leave()
    left = describe_group(broker.port, group)
    assert sorted(m.member_epoch for m in left.members)[0] == -2 and left.group_epoch == before.group_epoch
    back = Member(broker.bootstrap, group, topic, log, **{"group.instance.id": "i0"})
    back.start()
    try:
        wait_until(lambda: back.assignment == kept, "the same partitions again", 30)
        after = describe_group(broker.port, group)
        assert after.group_epoch == before.group_epoch and len(after.members) == 2
        assert members[1].assignment != [] and sorted(back.assignment + members[1].assignment) == list(range(6))
    finally:
        back.leave()
        members[1].leave()

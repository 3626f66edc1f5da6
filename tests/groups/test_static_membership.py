"""Static membership (KIP-345) on a real broker with confluent-kafka consumers: restarting a
static member - the leader included - takes its place back without a rebalance, as on Kafka.
librdkafka sends JoinGroup v5, so a restarted leader cannot be told to skip the assignment
(KIP-814, v9); Kafka answers it the old leader id and it syncs as a follower."""

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from waiting import wait_until

from .test_consumer_groups import GROUP_SETTINGS, create_topic


class Static:
    """A static consumer; `assignments` counts the assignments it was given."""

    def __init__(self, bootstrap: str, instance: str) -> None:
        self.assignments = 0
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "group.instance.id": instance,
                                  "session.timeout.ms": 30000, "heartbeat.interval.ms": 300,
                                  "enable.auto.commit": False})
        self.consumer.subscribe(["t"], on_assign=self._assigned)

    def _assigned(self, consumer, partitions) -> None:
        self.assignments += 1

    def poll(self) -> None:
        self.consumer.poll(0.05)


def test_restarting_each_static_member_causes_no_rebalance(start_broker):
    broker = start_broker(0, **{**GROUP_SETTINGS, "group.initial.rebalance.delay.ms": "1000"})  # one generation
    create_topic(broker.bootstrap, "t", 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    members = {"i-1": Static(broker.bootstrap, "i-1"), "i-2": Static(broker.bootstrap, "i-2")}

    def stable() -> bool:
        for member in members.values():
            member.poll()
        group = admin.describe_consumer_groups(["g"])["g"].result(30)
        return (str(group.state).endswith("STABLE") and len(group.members) == 2
                and all(m.assignment.topic_partitions for m in group.members)
                and all(m.consumer.assignment() for m in members.values()))

    try:
        wait_until(lambda: stable() and all(m.assignments == 1 for m in members.values()), "a stable group of 2")
        for instance, other in (("i-1", "i-2"), ("i-2", "i-1")):  # one of them is the leader
            before = members[other].assignments
            members[instance].consumer.close()  # a static member sends no LeaveGroup
            members[instance] = Static(broker.bootstrap, instance)
            wait_until(stable, f"{instance} back in the group", timeout_s=20)
            assert members[instance].assignments == 1
            assert members[other].assignments == before, f"restarting {instance} rebalanced the group"
    finally:
        for member in members.values():
            member.consumer.close()

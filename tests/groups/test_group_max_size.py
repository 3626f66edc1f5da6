"""group.max.size on a real broker with confluent-kafka consumers: when it is lowered below a
group's size and the coordinator restarts, the group rebalances and the last member to rejoin is
refused with GROUP_MAX_SIZE_REACHED and leaves the group, as Kafka's onGroupLoaded and
acceptJoiningMember do (KAFKA-9885)."""

from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient
from waiting import wait_until

from .test_consumer_groups import GROUP_SETTINGS, create_topic


def members(bootstrap: str, group: str) -> tuple[str, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(30)
    return str(described.state).split(".")[-1], len(described.members)


def test_a_group_over_a_lowered_group_max_size_sheds_a_member_after_a_restart(start_broker):
    broker = start_broker(0, **GROUP_SETTINGS)
    create_topic(broker.bootstrap, "t", 3)
    consumers = [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "session.timeout.ms": 6000,
                           "heartbeat.interval.ms": 300, "enable.auto.commit": False}) for _ in range(3)]
    errors: list = []

    def poll_all() -> None:
        for consumer in consumers:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error():
                errors.append(msg.error().code())

    try:
        for consumer in consumers:
            consumer.subscribe(["t"])

        def stable_with(count: int) -> bool:
            poll_all()
            return members(broker.bootstrap, "g") == ("STABLE", count)

        wait_until(lambda: stable_with(3), "a stable group of 3")
        broker.stop()
        broker.overrides["group.max.size"] = "2"
        broker.start()
        wait_until(lambda: stable_with(2) and KafkaError.GROUP_MAX_SIZE_REACHED in errors,
                   "the group shrinks to group.max.size", timeout_s=30)
    finally:
        for consumer in consumers:
            consumer.close()

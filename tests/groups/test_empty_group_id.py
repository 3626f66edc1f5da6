"""The empty group id on a real broker, with kafka-python: Kafka keeps it valid for OffsetCommit,
OffsetFetch, DescribeGroups and DeleteGroups (GroupCoordinator.isValidGroupId: "for backwards
compatibility"), and FindCoordinator finds its coordinator (KafkaApis.getCoordinator); the
group management APIs refuse it with INVALID_GROUP_ID."""

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import InvalidGroupIdError
from kafka.structs import OffsetAndMetadata

from .test_consumer_groups import GROUP_SETTINGS, create_topic


def test_offsets_of_the_empty_group_id_are_committed_fetched_and_deleted(start_broker):
    broker = start_broker(0, **GROUP_SETTINGS)
    create_topic(broker.bootstrap, "t", 1)
    tp = TopicPartition("t", 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="", enable_auto_commit=False)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(5, "m", -1)})
        assert consumer.committed(tp) == 5
        assert admin.list_group_offsets({"": None})[""][tp].offset == 5
        assert admin.describe_groups([""])[""]["group_state"] == "Empty"
        assert admin.delete_groups([""]) == {"": "OK"}
        assert admin.describe_groups([""])[""]["group_state"] == "Dead"
    finally:
        consumer.close()
    joining = KafkaConsumer("t", bootstrap_servers=broker.bootstrap, group_id="")
    try:
        with pytest.raises(InvalidGroupIdError):
            joining.poll(timeout_ms=10_000)
    finally:
        joining.close()
        admin.close()

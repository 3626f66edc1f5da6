"""DeleteTopics requests Kafka refuses as a whole (KafkaApis.handleDeleteTopicsRequest): a topic
named by both name and id makes the whole request INVALID_REQUEST and nothing is deleted; with
delete.topic.enable=false every topic is refused, known or not: TOPIC_DELETION_DISABLED from v3,
INVALID_REQUEST before."""

import datetime
import uuid

from kio.schema.delete_topics.v1.request import DeleteTopicsRequest as DeleteTopicsV1
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from raw_protocol import RawClient, create_topic, metadata

DELETE_TOPICS = 20
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST, TOPIC_DELETION_DISABLED = 0, 3, 42, 73
TIMEOUT = datetime.timedelta(seconds=30)
ZERO = uuid.UUID(int=0)


def delete(client: RawClient, *topics: tuple[str | None, uuid.UUID]):
    response = client.call(DELETE_TOPICS, 6, DeleteTopicsRequest(timeout=TIMEOUT, topics=tuple(
        DeleteTopicState(name=name, topic_id=topic_id) for name, topic_id in topics)))
    return [(r.name, r.topic_id or ZERO, r.error_code) for r in response.responses]  # kio reads zero as None


def topic_ids(client: RawClient, *names: str) -> list[uuid.UUID]:
    return [t.topic_id for t in metadata(client, list(names), auto_create=False).topics if t.error_code == NONE]


def test_a_topic_named_by_both_name_and_id_refuses_the_whole_request(broker):
    with RawClient(broker.port) as client:
        create_topic(client, "both")
        create_topic(client, "by-name")
        [both_id, by_name_id] = topic_ids(client, "both", "by-name")
        assert delete(client, ("both", both_id), ("by-name", ZERO)) == [
            ("both", both_id, INVALID_REQUEST), ("by-name", ZERO, INVALID_REQUEST)]
        assert topic_ids(client, "both", "by-name") == [both_id, by_name_id]  # nothing deleted


def test_with_deletion_disabled_every_topic_is_refused_by_version(start_broker):
    broker = start_broker(0, delete_topic_enable="false")
    with RawClient(broker.port) as client:
        create_topic(client, "kept")
        [kept_id] = topic_ids(client, "kept")
        unknown_id = uuid.uuid4()
        assert delete(client, ("kept", ZERO), ("never-created", ZERO), (None, unknown_id)) == [
            ("kept", ZERO, TOPIC_DELETION_DISABLED), ("never-created", ZERO, TOPIC_DELETION_DISABLED),
            (None, unknown_id, TOPIC_DELETION_DISABLED)]
        response = client.call(DELETE_TOPICS, 1, DeleteTopicsV1(topic_names=("kept", "never-created"),
                                                                timeout=TIMEOUT))
        assert [(r.name, r.error_code) for r in response.responses] == [
            ("kept", INVALID_REQUEST), ("never-created", INVALID_REQUEST)]
        assert topic_ids(client, "kept") == [kept_id]

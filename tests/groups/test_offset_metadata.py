"""A committed offset's metadata against offset.metadata.max.bytes (4096), with kafka-python on a
real broker, as Kafka measures it: Java's String.length(), UTF-16 code units, whatever its UTF-8
size (GroupMetadataManager.validateOffsetMetadataLength)."""

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka.errors import OffsetMetadataTooLargeError
from kafka.structs import OffsetAndMetadata, TopicPartition


def test_metadata_is_measured_in_utf16_code_units_as_kafka_does(broker):
    creator = AdminClient({"bootstrap.servers": broker.bootstrap})
    creator.create_topics([NewTopic("meta", 1, 1)])["meta"].result(30)
    partition = TopicPartition("meta", 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="meta-group", enable_auto_commit=False)
    try:
        def commit_and_read(offset: int, metadata: str) -> str:
            consumer.commit({partition: OffsetAndMetadata(offset, metadata, -1)})
            committed = consumer.committed(partition, metadata=True)
            assert committed.offset == offset
            return committed.metadata

        accented = "é" * 3000  # 3,000 code units, 6,000 bytes of UTF-8: Kafka takes it
        assert commit_and_read(1, accented) == accented
        emoji = "\U0001F600" * 2048  # each a surrogate pair: 4,096 code units, 16,384 bytes
        assert commit_and_read(2, emoji) == emoji
        for too_long in ("a" * 4097, "\U0001F600" * 2049):
            with pytest.raises(OffsetMetadataTooLargeError):
                consumer.commit({partition: OffsetAndMetadata(3, too_long, -1)})
        assert consumer.committed(partition) == 2
    finally:
        consumer.close()

"""The final read's watermark query: what it asks again, and what it gives up on.

A leader just elected answers ListOffsets with OFFSET_NOT_AVAILABLE until its HW reaches its
epoch's start (as Kafka's), and librdkafka's watermark query hands that back instead of retrying:
a final read that took it as the end of the run judged nothing (a CI run's preferred-leader election
landed on it). The race itself cannot be timed from a test, so the answers are scripted here.
"""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from weir.verify.workload import watermark_offsets


class ScriptedConsumer:
    """Answers get_watermark_offsets from a script: an error code to raise, or a high watermark."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.asked = 0

    def get_watermark_offsets(self, partition, timeout):
        self.asked += 1
        answer = self.answers.pop(0)
        if isinstance(answer, KafkaError):
            raise KafkaException(answer)
        return 0, answer


def test_a_new_leaders_offset_not_available_is_asked_again_until_it_answers():
    consumer = ScriptedConsumer(KafkaError(KafkaError.OFFSET_NOT_AVAILABLE), KafkaError(KafkaError._TIMED_OUT), 42)
    assert watermark_offsets(consumer, TopicPartition("t", 0), time.monotonic() + 30) == (0, 42)
    assert consumer.asked == 3


def test_an_error_that_will_not_pass_is_raised_at_once():
    consumer = ScriptedConsumer(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), 42)
    with pytest.raises(KafkaException):
        watermark_offsets(consumer, TopicPartition("t", 0), time.monotonic() + 30)
    assert consumer.asked == 1


def test_past_the_deadline_the_retriable_error_is_raised():
    consumer = ScriptedConsumer(KafkaError(KafkaError.OFFSET_NOT_AVAILABLE), 42)
    with pytest.raises(KafkaException):
        watermark_offsets(consumer, TopicPartition("t", 0), time.monotonic() - 1)
    assert consumer.asked == 1

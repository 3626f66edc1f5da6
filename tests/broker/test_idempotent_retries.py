"""An idempotent producer's retry of a batch the leader already appended, as the broker answers it."""

import uuid

from log.batches import make_batch

from weir.broker.replica_manager import ReplicaManager
from weir.config.broker_config import BrokerConfig
from weir.zk.model import BrokerInfo, ClusterView, PartitionState, TopicAssignment

TOPIC_ID = uuid.uuid4()


def leader_of_t(tmp_path, topic_config: dict) -> ReplicaManager:
    replicas = ReplicaManager(BrokerConfig({"broker.id": "1", "log.dirs": str(tmp_path)}), 0)
    replicas.can_lead = True
    replicas.apply_view(ClusterView(
        brokers={1: BrokerInfo(1, "h", 9000)}, topics={"t": TopicAssignment("t", TOPIC_ID, {0: (1,)})},
        states={("t", 0): PartitionState(1, 0, (1,), 1, 0)}, state_zxids={("t", 0): 10}, topic_configs={"t": topic_config},
        broker_epochs={1: 5}, broker_sessions={1: 77}, controller_id=1, controller_epoch=1, session_id=77), 0)
    return replicas


def test_a_retry_on_a_log_append_time_topic_is_answered_with_the_original_append_time(tmp_path):
    """Kafka answers a duplicate with its original batch's offsets and timestamp
    (UnifiedLog.append: appendInfo.setLogAppendTime(duplicate.timestamp)): the append time a
    producer reports for a retried record is the one consumers read, also after a restart."""
    batch = make_batch([b"a", b"b"], producer_id=42, producer_epoch=0, base_sequence=0, timestamp=500)
    replicas = leader_of_t(tmp_path, {"message.timestamp.type": "LogAppendTime"})
    first = replicas.append("t", 0, bytearray(batch), 1, 1_000)
    assert (first.first_offset, first.last_offset, first.log_append_time_ms) == (0, 1, 1_000)
    retry = replicas.append("t", 0, bytearray(batch), 1, 5_000)
    assert (retry.first_offset, retry.last_offset, retry.log_append_time_ms) == (0, 1, 1_000)
    replicas.checkpoint()
    replicas.close()
    again = leader_of_t(tmp_path, {"message.timestamp.type": "LogAppendTime"})
    assert again.append("t", 0, bytearray(batch), 1, 9_000).log_append_time_ms == 1_000
    again.close()


def test_a_retry_on_a_create_time_topic_has_no_append_time(tmp_path):
    batch = make_batch([b"a"], producer_id=42, producer_epoch=0, base_sequence=0, timestamp=500)
    replicas = leader_of_t(tmp_path, {})
    replicas.append("t", 0, bytearray(batch), 1, 1_000)
    assert replicas.append("t", 0, bytearray(batch), 1, 5_000).log_append_time_ms == -1
    replicas.close()

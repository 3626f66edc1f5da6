"""A broker's start-up reads the checkpoint files of its log directory: whatever a crash, a full
disk or an operator left in them, the partitions open, lead and take writes (as Kafka's)."""

import uuid

import pytest
from log.batches import make_batch

from weir.broker.replica_manager import HW_CHECKPOINT, ReplicaManager
from weir.config.broker_config import BrokerConfig
from weir.log.log_directory import LOG_START_OFFSET_CHECKPOINT
from weir.zk.model import BrokerInfo, ClusterView, PartitionState, TopicAssignment

TOPIC_ID = uuid.uuid4()


def manager(root, leader: int = 1, **settings) -> ReplicaManager:
    """What a broker's start does with its log directory: read it, then host what the controller
    says (broker 1 leads, or follows broker 2); `settings` add to the broker's."""
    replicas = ReplicaManager(BrokerConfig({"broker.id": "1", "log.dirs": str(root), "log.segment.bytes": "2000",
                                            **settings}), 0)
    replicas.can_lead = True
    replicas.apply_view(ClusterView(
        brokers={1: BrokerInfo(1, "h", 9000), 2: BrokerInfo(2, "h", 9001)},
        topics={"t": TopicAssignment("t", TOPIC_ID, {0: (leader,) if leader == 1 else (2, 1)})},
        states={("t", 0): PartitionState(leader, 0, (leader,) if leader == 1 else (2, 1), 1, 0)},
        state_zxids={("t", 0): 10},
        broker_epochs={1: 5}, broker_sessions={1: 77}, controller_id=1, controller_epoch=1, session_id=77), 0)
    return replicas


def produce(replicas: ReplicaManager, count: int) -> None:
    for i in range(count):
        replicas.append("t", 0, bytearray(make_batch([b"v%03d" % i + b"x" * 200], timestamp=1_000)), 1, 1_000)


@pytest.mark.parametrize("hw_text", ["0\n1\nt 0 -5\n", "0\n1\nt 0 3\n", "0\n1\nt 0 999\n"])
def test_a_checkpointed_high_watermark_outside_the_log_is_brought_within_it(tmp_path, hw_text):
    """Kafka's UnifiedLog.updateHighWatermark bounds the checkpointed HW by the log start and the
    log end. Before, a negative HW failed the leader's assertion at every start."""
    replicas = manager(tmp_path)
    produce(replicas, 30)
    replicas.logs.get("t", 0).delete_records_before(10)
    replicas.close()
    (tmp_path / HW_CHECKPOINT).write_text(hw_text)
    assert (tmp_path / LOG_START_OFFSET_CHECKPOINT).read_text() == "0\n1\nt 0 10\n"

    follower = manager(tmp_path, leader=2)
    partition = follower.partitions[("t", 0)]
    assert partition.high_watermark == min(max(int(hw_text.split()[-1]), 10), 30)
    follower.close()

    again = manager(tmp_path)
    partition = again.partitions[("t", 0)]
    produce(again, 1)
    assert partition.high_watermark == partition.log.log_end_offset == 31
    again.close()

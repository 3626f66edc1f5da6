"""Issue 41: a broker whose process runs out of descriptors (EMFILE) while the controller gives it
new replicas refuses those it cannot open, KAFKA_STORAGE_ERROR, and keeps its others serving; its
checkpoint survives having no descriptor at all and writes again once there are; the refused
replicas are created at the next retry. The soft RLIMIT_NOFILE is lowered in this process, under
the broker's own headroom (computed at start), so the descriptors run out for real."""

import logging
import uuid

import pytest
from log.batches import make_batch
from log.descriptor_limits import descriptors_left

from weir.broker.replica_manager import HW_CHECKPOINT, ReplicaManager
from weir.config.broker_config import BrokerConfig
from weir.log.checkpoint_file import read_offset_checkpoint
from weir.protocol.errors import ErrorCode, KafkaError
from weir.zk.model import BrokerInfo, ClusterView, PartitionState, TopicAssignment

ME = 1
SMALL, BIG = TopicAssignment("small", uuid.uuid4(), {0: (ME,)}), TopicAssignment("big", uuid.uuid4(),
                                                                                 {p: (ME,) for p in range(20)})


def view(*topics: TopicAssignment) -> ClusterView:
    keys = [(t.name, p) for t in topics for p in t.replicas]
    return ClusterView(brokers={ME: BrokerInfo(ME, "h", 9000)}, topics={t.name: t for t in topics},
                       states={key: PartitionState(ME, 0, (ME,), 1, 0) for key in keys},
                       state_zxids={key: 10 for key in keys}, broker_epochs={ME: 5}, broker_sessions={ME: 77},
                       controller_id=ME, controller_epoch=1, session_id=77)


def produce(replicas: ReplicaManager, value: bytes) -> int:
    return replicas.append("small", 0, bytearray(make_batch([value], timestamp=1_000)), 1, 1_000).last_offset


def test_replicas_that_find_no_descriptor_are_refused_and_the_others_serve(tmp_path, caplog):
    replicas = ReplicaManager(BrokerConfig({"broker.id": str(ME), "log.dirs": str(tmp_path)}), 0)
    replicas.can_lead = True
    replicas.apply_view(view(SMALL), 0)
    produce(replicas, b"before")

    with descriptors_left(6), caplog.at_level(logging.ERROR):
        replicas.apply_view(view(SMALL, BIG), 0)  # a CreateTopics of 20 partitions reaches this broker
        refused = replicas.not_created_of("big")
        assert 0 < len(refused) < 20 and replicas.settled("big", 20)
        assert "Too many open files" in replicas.not_created[("big", refused[0])]
        line = next(r.getMessage() for r in caplog.records if "could not create" in r.getMessage())
        assert f"could not create {len(refused)} replica(s)" in line and "RLIMIT_NOFILE soft" in line
        with pytest.raises(KafkaError) as answer:
            replicas.hosted("big", refused[0])  # what a Produce or a Fetch of it is answered
        assert answer.value.code == ErrorCode.kafka_storage_error

    with descriptors_left(0), caplog.at_level(logging.ERROR):  # not one to spare
        assert produce(replicas, b"at the limit") == 1  # the active segment's file is open: appends go on
        fetched = replicas.partitions[("small", 0)].log.read(0, 1 << 20, 2).read_bytes()
        assert b"before" in fetched and b"at the limit" in fetched
        replicas.checkpoint()  # writes nothing, raises nothing
        assert any("checkpoint:" in r.getMessage() and "not written" in r.getMessage() for r in caplog.records)

    replicas.maintain(2_000)  # descriptors again: the refused replicas are created
    assert replicas.not_created == {} and all(("big", p) in replicas.partitions for p in range(20))
    replicas.checkpoint()
    assert read_offset_checkpoint(tmp_path / HW_CHECKPOINT)[("small", 0)] == replicas.partitions[
        ("small", 0)].high_watermark == 2
    replicas.close()

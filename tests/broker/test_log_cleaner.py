"""The cleaner's choice of segments, on a real partition and log: never above the HW."""

import asyncio
from types import SimpleNamespace

from weir.broker.log_cleaner import LogCleaner
from weir.coordination.model import PartitionState
from weir.log import LogConfig, PartitionLog
from weir.protocol.record_batch import read_batch_header
from weir.protocol.records import encode_batch
from weir.replication import ReplicationConfig
from weir.replication.partition import Partition

NOW = 1_000


def test_segments_above_the_high_watermark_are_not_cleaned(tmp_path):
    log = PartitionLog.open(tmp_path, LogConfig(segment_bytes=200), NOW)
    partition = Partition(1, "t", 0, log, 0)
    partition.apply_state(PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1, partition_epoch=0),
                          (1, 2), ReplicationConfig(), NOW, state_zxid=2, own_broker_epoch=1)
    for i in range(12):
        records = bytearray(encode_batch([b"v%d" % i], keys=[b"k"]))
        partition.produce(records, read_batch_header(records), 1, NOW, proven=True)
    assert len(log.closed_segments) >= 3 and partition.high_watermark == 0  # the follower has fetched nothing
    settings = {"delete.retention.ms": 0, "min.cleanable.dirty.ratio": 0.0}
    replicas = SimpleNamespace(config={"log.cleaner.backoff.ms": 10}, partitions={("t", 0): partition},
                               cleanup_policy=lambda topic: "compact",
                               topic_config=lambda topic, name, broker_name: settings[name])
    loop = asyncio.new_event_loop()
    try:
        cleaner = LogCleaner(replicas, loop)
        assert cleaner._candidates() == []

        partition.on_follower_fetch(2, -1, log.closed_segments[1].next_offset, 0, NOW)  # the HW moves up to there
        ((key, _, closed, _, _),) = cleaner._candidates()
        assert key == ("t", 0) and closed == log.closed_segments[:2]
    finally:
        loop.close()
        log.close()

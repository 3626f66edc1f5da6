"""One partition hosted by this broker: its log and its high watermark.

With a single broker every partition has one replica, the leader, whose ISR is
itself, so the high watermark follows the log end offset. Replication replaces
this rule with the ISR rules of `weir.replication`.
"""

from ..log import PartitionLog
from ..protocol.record_batch import BatchHeader


class Partition:
    def __init__(self, topic: str, index: int, log: PartitionLog) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = 0
        self.high_watermark = log.log_end_offset

    def append(self, records: bytearray, header: BatchHeader, now_ms: int) -> int:
        """Append one validated batch as leader; returns its base offset."""
        info = self.log.append(records, self.leader_epoch, now_ms)
        self.high_watermark = self.log.log_end_offset
        assert self.log.log_start_offset <= self.high_watermark <= self.log.log_end_offset
        return info.first_offset

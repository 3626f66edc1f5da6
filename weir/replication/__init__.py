"""The pure replication core of a partition: leader state (follower positions, ISR, high
watermark, pending ISR change), parked acks=all produces, follower state (truncation by leader
epoch, fetch position), and leader-epoch fencing. No sockets, files, clocks or threads: callers
feed events (with `now_ms`) and act on the decisions returned. See each module's header for the
rules it owns."""

from weir.replication.epoch_fencing import NO_EPOCH_CHECK, check_current_leader_epoch, check_leader_request
from weir.replication.follower import (AppendRecords, Backoff, FollowerPartition, FollowerState, Ignore, SendFetch,
                                       SendOffsetForLeaderEpoch)
from weir.replication.leader import (AlterPartitionProposal, FollowerFetchOutcome, IsrChangeAccepted, IsrChangeOutcome,
                                     IsrChangeRejected, LeaderEpochHistory, LeaderPartition, ReplicationConfig,
                                     ReplicationStatus)
from weir.replication.produce_purgatory import ProduceCompletion, ProducePurgatory, PurgatoryFull
from weir.replication.replica import UNKNOWN_OFFSET, FollowerReplica
from weir.replication.truncation import (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEndOffset, EpochEndOffsets,
                                         Truncation, answer_offset_for_leader_epoch, truncation_for_epoch_answer)

__all__ = [
    "AlterPartitionProposal", "AppendRecords", "Backoff", "EpochEndOffset", "EpochEndOffsets", "FollowerFetchOutcome",
    "FollowerPartition", "FollowerReplica", "FollowerState", "Ignore", "IsrChangeAccepted", "IsrChangeOutcome",
    "IsrChangeRejected", "LeaderEpochHistory", "LeaderPartition", "NO_EPOCH_CHECK", "ProduceCompletion",
    "ProducePurgatory", "PurgatoryFull", "ReplicationConfig", "ReplicationStatus", "SendFetch",
    "SendOffsetForLeaderEpoch", "Truncation", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "UNKNOWN_OFFSET",
    "answer_offset_for_leader_epoch", "check_current_leader_epoch", "check_leader_request",
    "truncation_for_epoch_answer",
]

"""Leader-epoch fencing of requests that name the epoch their sender believes current (KIP-320).

Rules owned here:

- A Fetch, ListOffsets or OffsetForLeaderEpoch request may carry `current_leader_epoch`, the
  leader epoch its sender learned from metadata. -1 means "no check" (old clients).
- Older than ours: the sender is behind (it missed a leader change), and acting on its request
  could let a stale follower or consumer read a log that is about to be truncated
  -> FENCED_LEADER_EPOCH (74). The sender must refresh metadata.
- Newer than ours: we are behind (the controller's decision has not reached us yet)
  -> UNKNOWN_LEADER_EPOCH (75; the brief said 76, which is UNSUPPORTED_COMPRESSION_TYPE).
  The sender retries; we will catch up.
- Equal: the epoch is fine; the request may still need this broker to be the leader, and if it
  is not -> NOT_LEADER_OR_FOLLOWER (6). The epoch is checked first, as Kafka does, so a fenced
  sender learns that it is fenced rather than merely misdirected.

Theory of operation: two pure functions, no state; every handler that takes a
`current_leader_epoch` calls `check_leader_request` before touching the log.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

NO_EPOCH_CHECK = -1


def check_current_leader_epoch(current_leader_epoch: int, our_leader_epoch: int) -> ErrorCode:
    """KIP-320: compare the epoch the caller believes current with ours."""
    if current_leader_epoch == NO_EPOCH_CHECK:
        return ErrorCode.none
    if current_leader_epoch < our_leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if current_leader_epoch > our_leader_epoch:
        return ErrorCode.unknown_leader_epoch
    return ErrorCode.none


def check_leader_request(current_leader_epoch: int, our_leader_epoch: int, *, is_leader: bool) -> ErrorCode:
    """The epoch check, then (for requests only a leader may answer) the leadership check."""
    error = check_current_leader_epoch(current_leader_epoch, our_leader_epoch)
    if error is not ErrorCode.none:
        return error
    if not is_leader:
        return ErrorCode.not_leader_or_follower
    return ErrorCode.none

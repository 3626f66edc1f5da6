"""A replica fetcher's rounds (FetcherCore), driven directly with follower partitions on real logs:
the rules production's fetcher and weir sim's share."""

import pytest
from kio.schema.errors import ErrorCode
from log.batches import make_batch

from weir.log import LogConfig, PartitionLog
from weir.protocol.record_batch import batch_headers
from weir.replication import ReplicationConfig
from weir.replication.fetcher_core import FetcherCore, FetchRound
from weir.replication.follower import SendFetch, SendOffsetForLeaderEpoch
from weir.replication.partition import Partition
from weir.replication.truncation import EpochEndOffset
from weir.zk.model import PartitionState

NOW = 1_000
BACKOFF_MS = 1_000


def follower(tmp_path, index, leader=1, records=0):
    """A partition of broker 2 following `leader` at epoch 4, with `records` records of epoch 2."""
    log = PartitionLog.open(tmp_path / f"t-{index}", LogConfig(), NOW)
    for i in range(records):
        log.append(make_batch([b"%d" % i]), 2, NOW)
    partition = Partition(2, "t", index, log, 0)
    partition.apply_state(PartitionState(leader=leader, leader_epoch=4, isr=(1, 2, 3), controller_epoch=1,
                                         partition_epoch=0), (1, 2, 3), ReplicationConfig(), NOW,
                          state_zxid=300, own_broker_epoch=200)
    return partition


class Clock:
    """The core's backoff clock (production's is monotonic, unrelated to the partitions' wall time)."""

    def __init__(self) -> None:
        self.ms = 5.0

    def __call__(self) -> float:
        return self.ms


def core_with(*partitions, isolate_failures=True):
    core = FetcherCore(1, lambda: BACKOFF_MS, Clock(), isolate_failures=isolate_failures)
    for p in partitions:
        core.add(p)
    return core


def fetch_round(core):
    """The next round, its Fetch's session request built as the shells do."""
    round_ = core.next_round()
    core.session.build({p.key: (round_.asks[p.key].fetch_offset,) for p in round_.fetching})
    return round_


def test_truncating_partitions_ask_their_epoch_first_and_the_others_fetch(tmp_path):
    """A follower with records must first learn where its epochs end on the leader (KIP-101); an
    empty one fetches at once. After its answer it fetches from where it truncated to."""
    has_records, empty = follower(tmp_path, 0, records=5), follower(tmp_path, 1)
    core = core_with(has_records, empty)
    round_ = core.next_round()
    assert round_.truncating == [has_records] and round_.fetching == [empty]
    assert isinstance(round_.asks[has_records.key], SendOffsetForLeaderEpoch)
    core.on_epoch_answer(round_, has_records.key, EpochEndOffset(ErrorCode.none, 2, 3))
    assert has_records.log.log_end_offset == 3
    ask = core.next_round().asks[has_records.key]
    assert isinstance(ask, SendFetch) and ask.fetch_offset == 3


def test_a_partition_told_to_back_off_sits_out_rounds_until_its_backoff_is_over(tmp_path):
    """By the core's clock, not the partitions' time: production tells partitions the wall clock,
    which is no backoff clock (that mix once kept a follower backing off for good)."""
    busy, calm = follower(tmp_path, 0), follower(tmp_path, 1)
    core = core_with(busy, calm)
    round_ = fetch_round(core)
    assert core.on_fetch_answer(round_.fetching, 0, 0)
    core.on_partition_answer(round_, busy.key, ErrorCode.unknown_server_error, -1, None, (), 1_790_000_000_000, 0)
    core.clock.ms += 1
    assert core.next_round().fetching == [calm]
    core.back_off(calm.key, ErrorCode.unknown_server_error)
    core.clock.ms += 1
    assert core.next_round() == BACKOFF_MS - 2  # every partition backs off: how long until the first is done
    core.clock.ms += BACKOFF_MS - 2
    assert core.next_round().fetching == [busy]


def test_an_error_for_the_whole_request_backs_every_partition_off(tmp_path):
    partitions = [follower(tmp_path, i) for i in range(2)]
    core = core_with(*partitions)
    round_ = fetch_round(core)
    assert not core.on_fetch_answer(round_.fetching, ErrorCode.unknown_server_error, 0)
    assert core.next_round() == BACKOFF_MS


def test_a_session_error_backs_nobody_off_and_the_next_request_is_full(tmp_path):
    partition = follower(tmp_path, 0)
    core = core_with(partition)
    round_ = core.next_round()
    core.session.build({partition.key: (4, 0, 0)})
    assert core.on_fetch_answer(round_.fetching, 0, 77)  # the leader opened session 77
    round_ = core.next_round()
    assert not core.session.build({partition.key: (4, 0, 0)}).full
    assert not core.on_fetch_answer(round_.fetching, ErrorCode.invalid_fetch_session_epoch, 77)
    assert core.next_round().fetching == [partition]
    assert core.session.build({partition.key: (4, 0, 0)}).full


def test_records_fetched_are_appended_and_a_partition_that_moved_to_another_leader_leaves(tmp_path):
    stays, moves = follower(tmp_path, 0), follower(tmp_path, 1)
    core = core_with(stays, moves)
    round_ = fetch_round(core)
    moves.apply_state(PartitionState(leader=3, leader_epoch=5, isr=(1, 2, 3), controller_epoch=1, partition_epoch=1),
                      (1, 2, 3), ReplicationConfig(), NOW, state_zxid=301, own_broker_epoch=200)
    records = make_batch([b"a", b"b"], base_offset=0, leader_epoch=4)
    assert core.on_fetch_answer(round_.fetching, 0, 0)
    for p in (stays, moves):
        core.on_partition_answer(round_, p.key, ErrorCode.none, 2, records, batch_headers(records), NOW, 0)
    assert stays.log.log_end_offset == 2
    assert moves.log.log_end_offset == 0  # it follows broker 3 now: broker 1's answer is not for it
    assert [p.key for p in core.next_round().fetching] == [stays.key]
    assert moves.key not in core.partitions


@pytest.mark.parametrize("isolate", [True, False])
def test_an_answer_a_partition_cannot_act_on_stops_only_that_partition(tmp_path, isolate):
    """Kafka's failed partitions: a log that cannot take the records (here closed under it)
    stops that partition's fetching until its next role change; the others go on (weir sim
    raises instead: there it is a bug to report)."""
    broken, fine = follower(tmp_path, 0), follower(tmp_path, 1)
    core = core_with(broken, fine, isolate_failures=isolate)
    round_ = fetch_round(core)
    assert core.on_fetch_answer(round_.fetching, 0, 0)
    broken.log.close()
    records = make_batch([b"a"], base_offset=0, leader_epoch=4)
    if not isolate:
        with pytest.raises(ValueError, match="closed"):
            core.on_partition_answer(round_, broken.key, ErrorCode.none, 1, records, batch_headers(records), NOW, 0)
        return
    assert core.on_partition_answer(round_, broken.key, ErrorCode.none, 1, records, batch_headers(records),
                                    NOW, 0) is None
    core.on_partition_answer(round_, fine.key, ErrorCode.none, 1, records, batch_headers(records), NOW, 0)
    assert fine.log.log_end_offset == 1
    assert isinstance(core.next_round(), FetchRound) and list(core.partitions) == [fine.key]


def test_with_no_partition_following_the_leader_there_is_no_round(tmp_path):
    core = core_with()
    assert core.next_round() is None


def test_a_partition_removed_while_its_fetch_was_out_takes_no_backoff(tmp_path):
    """It changed role while the request was in flight, and the answer is an error for the whole
    request: its backoff, kept, would end long before the others' and make the wait negative (a
    fetcher spinning its loop for the whole backoff)."""
    gone, stays = follower(tmp_path, 0), follower(tmp_path, 1)
    core = core_with(gone, stays)
    round_ = fetch_round(core)
    core.remove(gone.key)
    assert not core.on_fetch_answer(round_.fetching, ErrorCode.unknown_server_error, 0)
    assert list(core.backoff_until) == [stays.key]
    core.clock.ms += 1
    assert core.next_round() == BACKOFF_MS - 1


def test_a_round_asks_again_only_the_partitions_added_or_answered_since_the_last(tmp_path):
    idle, busy = follower(tmp_path, 0), follower(tmp_path, 1)
    core = core_with(idle, busy)
    round_ = fetch_round(core)
    asked = []
    for p in (idle, busy):
        ask = p.next_fetch_request
        p.next_fetch_request = lambda p=p, ask=ask: (asked.append(p.key), ask())[1]
    records = make_batch([b"a", b"b"], base_offset=0, leader_epoch=4)
    assert core.on_fetch_answer(round_.fetching, 0, 0)
    core.on_partition_answer(round_, busy.key, ErrorCode.none, 2, records, batch_headers(records), NOW, 0)
    next_round = core.next_round()
    assert asked == [busy.key]  # the idle one's ask stands
    assert {p.key: next_round.asks[p.key].fetch_offset for p in next_round.fetching} == {idle.key: 0, busy.key: 2}
    core.next_round()
    assert asked == [busy.key]


def test_a_round_in_which_nothing_changed_is_the_last_round_again_until_something_does(tmp_path):
    """The shell takes the same round object as nothing to recompute (an idle follower's fetches
    cost it nothing per partition); an answer, a backoff, a moved log start or a new partition
    make the next round a new one."""
    first, second = follower(tmp_path, 0), follower(tmp_path, 1)
    core = core_with(first, second)
    round_ = fetch_round(core)
    assert core.on_fetch_answer(round_.fetching, 0, 0)  # an answer naming no partition: none has news
    assert core.next_round() is round_ and core.next_round() is round_
    core.touch(first.key)
    moved = core.next_round()
    assert moved is not round_ and core.next_round() is moved
    core.back_off(second.key, ErrorCode.unknown_server_error)
    assert core.next_round().fetching == [first] and core.next_round() is not moved
    third = follower(tmp_path, 2)
    core.add(third)
    assert third in core.next_round().fetching

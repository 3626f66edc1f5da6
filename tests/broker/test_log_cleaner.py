"""The cleaner's choice of segments and of when to clean, on a real partition and log: never above
the HW nor the LSO (aborted transactions' records removed); min.compaction.lag.ms keeps recent segments as written; max.compaction.lag.ms cleans a log
whose dirty ratio is low."""

import asyncio
import os
import threading
import time
from types import SimpleNamespace

import pytest

from weir.broker.log_cleaner import LogCleaner
from weir.log import LogConfig, PartitionLog, SegmentFileCache
from weir.log.cleaner import batches_in
from weir.protocol.record_batch import read_batch_header
from weir.protocol.records import encode_batch
from weir.protocol.varint import read_uvarint
from weir.replication import ReplicationConfig
from weir.replication.partition import Partition
from weir.zk.model import PartitionState

NOW = 1_000
HOUR = 3_600_000
CLEANING = {"delete.retention.ms": 0, "min.cleanable.dirty.ratio": 0.0, "min.compaction.lag.ms": 0,
            "max.compaction.lag.ms": 2**63 - 1}


def leader(tmp_path, isr=(1, 2), segment_bytes=200) -> Partition:
    log = PartitionLog.open(tmp_path, LogConfig(segment_bytes=segment_bytes), NOW)
    partition = Partition(1, "t", 0, log, 0)
    partition.apply_state(PartitionState(leader=1, leader_epoch=0, isr=isr, controller_epoch=1, partition_epoch=0),
                          isr, ReplicationConfig(), NOW, state_zxid=2, own_broker_epoch=1)
    return partition


def produce(partition: Partition, key: bytes, value: bytes, timestamp: int = NOW) -> None:
    records = bytearray(encode_batch([value], keys=[key], timestamp=timestamp))
    partition.produce(records, read_batch_header(records), 1, NOW, proven=True)


def _varint(buf, position: int) -> tuple[int, int]:
    raw, position = read_uvarint(buf, position)
    return (raw >> 1) ^ -(raw & 1), position


def records_in(segment) -> list[tuple[bytes, bytes]]:
    """(key, value) of each record a segment holds, in order (uncompressed batches, keyed records)."""
    out = []
    for batch in batches_in(os.pread(segment.file, segment.size, 0)):
        position = 61
        for _ in range(read_batch_header(batch).record_count):
            length, position = _varint(batch, position)
            end = position + length
            _, position = _varint(batch, position + 1)  # after the attributes: the timestamp delta
            _, position = _varint(batch, position)  # the offset delta
            key_length, position = _varint(batch, position)
            key, position = bytes(batch[position:position + key_length]), position + key_length
            value_length, position = _varint(batch, position)
            out.append((key, bytes(batch[position:position + value_length])))
            position = end
    return out


def replicas_of(partition: Partition, root, dedupe_buffer_size: int = 2**27, **settings):
    """What the cleaner sees of the broker's ReplicaManager: one compacted partition."""
    config = {**CLEANING, **settings}
    root.mkdir(exist_ok=True)
    return SimpleNamespace(config={"log.cleaner.backoff.ms": 10, "log.cleaner.dedupe.buffer.size": dedupe_buffer_size,
                                   "log.cleaner.io.buffer.load.factor": 0.9},
                           root=root, partitions={("t", 0): partition}, cleanup_policy=lambda topic: "compact",
                           topic_config=lambda topic, name: config[name])


@pytest.fixture
def cleaner_of(tmp_path):
    """A LogCleaner over one partition, its event loop run in a thread as the broker's is."""
    loops = []

    def make(partition: Partition, **settings) -> LogCleaner:
        replicas = replicas_of(partition, tmp_path / "root", **settings)
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True).start()
        loops.append(loop)
        return LogCleaner(replicas, loop)
    yield make
    for loop in loops:
        loop.call_soon_threadsafe(loop.stop)


def test_segments_above_the_high_watermark_are_not_cleaned(tmp_path):
    partition = leader(tmp_path)
    log = partition.log
    for i in range(12):
        produce(partition, b"k", b"v%d" % i)
    assert len(log.closed_segments) >= 3 and partition.high_watermark == 0  # the follower has fetched nothing
    loop = asyncio.new_event_loop()
    try:
        cleaner = LogCleaner(replicas_of(partition, tmp_path / "root"), loop)
        assert cleaner._candidates() == []

        partition.on_follower_fetch(2, -1, log.closed_segments[1].next_offset, 0, NOW)  # the HW moves up to there
        ((key, _, closed, *_),) = cleaner._candidates()
        assert key == ("t", 0) and closed == log.closed_segments[:2]
    finally:
        loop.close()
        log.close()


def test_min_compaction_lag_leaves_segments_with_recent_records_as_written(tmp_path, cleaner_of):
    partition = leader(tmp_path, isr=(1,), segment_bytes=150)  # two batches a segment
    for i in range(4):
        produce(partition, b"k", b"%d" % i, timestamp=NOW)  # old: two segments
    for i in range(4, 8):
        produce(partition, b"k", b"%d" % i, timestamp=NOW + 2 * HOUR)  # recent: two segments
    produce(partition, b"tail", b"t", timestamp=NOW + 2 * HOUR)  # the active segment
    log = partition.log
    assert [len(records_in(s)) for s in log.closed_segments] == [2, 2, 2, 2]
    cleaner = cleaner_of(partition, **{"min.compaction.lag.ms": HOUR})

    assert cleaner.clean_once(now_ms=NOW + 2 * HOUR + 1) == 2  # records younger than an hour stay
    assert [records_in(s) for s in log.closed_segments] == [[], [(b"k", b"3")], [(b"k", b"4"), (b"k", b"5")],
                                                            [(b"k", b"6"), (b"k", b"7")]]

    assert cleaner.clean_once(now_ms=NOW + 3 * HOUR + 1) == 3  # an hour later, all are cleanable
    assert [records_in(s) for s in log.closed_segments] == [[], [], [], [(b"k", b"7")]]
    log.close()


def test_max_compaction_lag_cleans_a_log_whose_dirty_ratio_is_low(tmp_path, cleaner_of):
    partition = leader(tmp_path, isr=(1,), segment_bytes=150)
    for i in range(10):
        produce(partition, b"key-%d" % i, b"a", timestamp=NOW)  # ten keys, five segments, nothing to remove
    produce(partition, b"tail", b"t", timestamp=NOW)
    log = partition.log
    cleaner = cleaner_of(partition, **{"min.cleanable.dirty.ratio": 0.5, "max.compaction.lag.ms": HOUR})
    assert cleaner.clean_once(now_ms=NOW) == 0  # the first pass: every key kept, the log now clean
    produce(partition, b"key-0", b"b", timestamp=NOW + 10)  # key-0's first value is now stale
    for value in (b"u", b"v", b"w"):
        produce(partition, b"tail", value, timestamp=NOW + 10)
    assert len(log.closed_segments) == 7  # the five clean ones, [tail t, key-0 b], [tail u, tail v]

    assert cleaner.clean_once(now_ms=NOW + HOUR) == 0, "two segments of seven are dirty: below the ratio"
    assert (b"key-0", b"a") in records_in(log.closed_segments[0])
    assert cleaner.clean_once(now_ms=NOW + HOUR + 1) == 3, "the oldest dirty record (tail t) is older than the lag"
    assert records_in(log.closed_segments[0]) == [(b"key-1", b"a")]
    assert [records_in(s) for s in log.closed_segments[5:]] == [[(b"key-0", b"b")], [(b"tail", b"v")]]
    log.close()


def test_a_small_offset_map_cleans_over_several_passes(tmp_path, cleaner_of):
    """log.cleaner.dedupe.buffer.size bounds the keys one cleaning maps (at least one segment's);
    where the cleaning ended is the log's cleaner checkpoint, so a new cleaner does not start over
    (tests/log/test_log_directory.py: it survives a restart)."""
    partition = leader(tmp_path, isr=(1,), segment_bytes=150)  # two batches a segment
    for round_ in range(2):
        for k in range(4):
            produce(partition, b"key-%d" % k, b"%d" % round_)
    produce(partition, b"tail", b"t")
    log = partition.log
    assert len(log.closed_segments) == 4
    cleaner = cleaner_of(partition, dedupe_buffer_size=3 * 24)  # room for 2 keys: one segment a pass

    assert cleaner.clean_once(now_ms=NOW) == 0  # maps [key-0, key-1]: nothing of theirs is stale yet
    assert log.cleaner_checkpoint == log.closed_segments[0].next_offset
    assert cleaner.clean_once(now_ms=NOW) == 0  # [key-2, key-3]
    assert cleaner.clean_once(now_ms=NOW) == 1  # [key-0, key-1] again: the first segment's go
    assert records_in(log.closed_segments[0]) == []

    restarted = cleaner_of(partition, dedupe_buffer_size=3 * 24)
    assert restarted.clean_once(now_ms=NOW) == 1  # goes on with [key-2, key-3], not from the start
    assert [records_in(s) for s in log.closed_segments] == [[], [], [(b"key-0", b"1"), (b"key-1", b"1")],
                                                            [(b"key-2", b"1"), (b"key-3", b"1")]]
    log.close()


def test_a_log_whose_cleaning_fails_is_marked_uncleanable_and_the_others_are_still_cleaned(tmp_path, cleaner_of,
                                                                                            caplog):
    """As Kafka's LogCleaner: an error cleaning one log (here a damaged segment) is logged and
    that partition marked uncleanable; the pass goes on with the other logs, and later passes skip
    it until it is a new log (deleted and made anew)."""
    partitions = {}
    for topic in ("damaged", "t"):
        partition = partitions[(topic, 0)] = leader(tmp_path / topic, isr=(1,), segment_bytes=150)
        for i in range(4):
            produce(partition, b"k", b"%d" % i)
        produce(partition, b"tail", b"t")
    damaged = partitions[("damaged", 0)].log
    first = damaged.closed_segments[0]
    with open(first.log_path, "r+b") as file:  # the first batch's records section: a varint that never ends
        file.seek(61)
        file.write(b"\xff" * 12)
    cleaner = cleaner_of(partitions[("t", 0)])
    cleaner.replicas.partitions = partitions

    assert cleaner.clean_once(now_ms=NOW) == 2  # k 0 to 2 go
    assert [records_in(s) for s in partitions[("t", 0)].log.closed_segments] == [[], [(b"k", b"3")]]
    assert cleaner.uncleanable == {damaged}
    assert "damaged-0: cleaning failed; the partition is marked uncleanable" in caplog.text

    caplog.clear()
    produce(partitions[("t", 0)], b"k", b"4")
    produce(partitions[("t", 0)], b"tail", b"u")
    assert cleaner.clean_once(now_ms=NOW) == 1 and "damaged" not in caplog.text  # skipped, not retried

    partitions[("damaged", 0)] = leader(tmp_path / "damaged-again", isr=(1,), segment_bytes=150)  # made anew
    cleaner.clean_once(now_ms=NOW)
    assert cleaner.uncleanable == set()
    damaged.close()
    for partition in partitions.values():
        partition.log.close()


class Committed:
    """What the cleaner sees of a partition whose whole log is committed (a caught-up follower)."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    @property
    def last_stable_offset(self) -> int:
        return self.log.log_end_offset


def append(log: PartitionLog, *records: tuple[bytes, bytes]) -> None:
    for key, value in records:
        log.append(encode_batch([value], keys=[key], timestamp=NOW), 0, NOW)


def keys_of(log: PartitionLog) -> list[tuple[bytes, bytes]]:
    return [record for segment in log.closed_segments for record in records_in(segment)]


def test_a_truncation_lowers_the_cleaner_checkpoint_so_records_appended_again_are_deduplicated(tmp_path, cleaner_of):
    """Kafka's LogManager.truncateTo lowers the cleaner checkpoint to the active segment's base
    offset: what a follower appends again after cutting its log back is dirty, so it supersedes
    the older records of its keys. Kept as cleaned, it never would: both values stay for good."""
    log = PartitionLog.open(tmp_path, LogConfig(segment_bytes=150), NOW)  # two batches a segment
    append(log, (b"k", b"0"), (b"a", b"0"), (b"j", b"0"), (b"b", b"0"), (b"tail", b"t"))
    cleaner = cleaner_of(Committed(log))
    assert cleaner.clean_once(now_ms=NOW) == 0  # no key twice: cleaned as it is, up to offset 4

    log.truncate_to(2)  # a follower cut back to its new leader's log
    append(log, (b"k", b"1"), (b"j", b"1"), (b"tail", b"u"))  # offsets 2 to 4 again
    cleaner.clean_once(now_ms=NOW)
    assert keys_of(log) == [(b"a", b"0"), (b"k", b"1"), (b"j", b"1")]
    log.close()


def test_a_cleaning_under_way_when_its_log_is_truncated_is_given_up(tmp_path, cleaner_of):
    """Kafka aborts the cleaning of a log it truncates (abortAndPauseCleaning). The offset map was
    read before the truncation: applied after it, it would remove records superseded only by
    records that are gone (an unclean leader election can cut a follower below its HW)."""
    log = PartitionLog.open(tmp_path, LogConfig(segment_bytes=150), NOW)
    append(log, (b"k", b"0"), (b"a", b"0"), (b"k", b"1"), (b"b", b"0"), (b"tail", b"t"))
    cleaner = cleaner_of(Committed(log))
    read_offset_map = cleaner._offset_map

    def offset_map_then_truncation(dirty, aborted):
        offsets, mapped = read_offset_map(dirty, aborted)
        assert offsets[b"k"] == 2
        log.truncate_to(2)  # k 1 goes while the cleaner is at work
        return offsets, mapped
    cleaner._offset_map = offset_map_then_truncation
    assert cleaner.clean_once(now_ms=NOW) == 0
    assert keys_of(log) == [(b"k", b"0"), (b"a", b"0")]  # k 0 is the latest value of k now: kept

    cleaner._offset_map = read_offset_map
    append(log, (b"k", b"2"), (b"a", b"1"), (b"tail", b"u"))
    assert cleaner.clean_once(now_ms=NOW) == 1  # the next pass cleans from the lowered checkpoint
    assert keys_of(log) == [(b"k", b"2"), (b"a", b"1")]
    log.close()


def test_a_segment_retention_removes_while_being_cleaned_gives_the_pass_up_not_the_log(tmp_path, cleaner_of):
    """The cleaner reads closed segments on its own thread: one that retention (or DeleteRecords)
    removes meanwhile can no longer be opened (issue 41: closed segments' files are opened when
    read). That pass is given up; the log stays cleanable and the next pass cleans it."""
    log = PartitionLog.open(tmp_path, LogConfig(segment_bytes=150, file_delete_delay_ms=0), NOW)
    append(log, (b"k", b"0"), (b"a", b"0"), (b"k", b"1"), (b"b", b"0"), (b"k", b"2"), (b"c", b"0"), (b"tail", b"t"))
    cleaner = cleaner_of(Committed(log))
    read_offset_map = cleaner._offset_map

    def offset_map_then_retention(dirty, aborted):
        found = read_offset_map(dirty, aborted)
        log.delete_records_before(2)  # the first segment goes while the cleaner is at work
        return found
    cleaner._offset_map = offset_map_then_retention
    assert cleaner.clean_once(now_ms=NOW) == 0
    assert cleaner.uncleanable == set() and keys_of(log) == [(b"k", b"1"), (b"b", b"0"), (b"k", b"2"), (b"c", b"0")]

    cleaner._offset_map = read_offset_map
    assert cleaner.clean_once(now_ms=NOW) == 1
    assert keys_of(log) == [(b"b", b"0"), (b"k", b"2"), (b"c", b"0")]
    log.close()


def test_cleaning_a_log_of_many_segments_holds_few_descriptors(tmp_path, cleaner_of):
    """Issue 41: the cleaner reads and swaps closed segments through the bounded cache of their
    files; the log holds its active segment's file and at most the cache's."""
    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    log = PartitionLog.open(tmp_path, LogConfig(segment_bytes=150), NOW, files=SegmentFileCache(3))
    append(log, *[(b"k%d" % (i % 5), b"%d" % i) for i in range(80)], (b"tail", b"t"))
    assert len(log.closed_segments) == 40
    cleaner = cleaner_of(Committed(log))
    before = open_descriptors()
    assert cleaner.clean_once(now_ms=NOW) == 38  # all but the two holding the latest values
    assert open_descriptors() <= before + 3
    assert keys_of(log) == [(b"k%d" % (i % 5), b"%d" % i) for i in range(75, 80)]
    log.close()


def transactional(key: bytes, value: bytes, pid: int, seq: int = 0) -> bytearray:
    import struct

    from crc32c import crc32c
    records = bytearray(encode_batch([value], keys=[key], timestamp=NOW, producer_id=pid, producer_epoch=0,
                                     base_sequence=seq))
    struct.pack_into(">h", records, 21, 0x10)
    struct.pack_into(">I", records, 17, crc32c(bytes(records[21:])))
    return records


def test_aborted_records_go_and_undecided_transactions_stay_as_written(tmp_path, cleaner_of):
    """KIP-98: the records of an aborted transaction are removed and never supersede an older
    value; a committed transaction's are compacted as any; nothing from the LSO on is cleaned; a
    marker goes after delete.retention.ms once its transaction holds no record."""
    from weir.transactions.read_committed import consume_read_uncommitted
    log = PartitionLog.open(tmp_path, LogConfig(segment_bytes=150), NOW)
    partition = Partition(1, "t", 0, log, 0, transaction_verification=False)
    partition.apply_state(PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1, partition_epoch=0),
                          (1,), ReplicationConfig(), NOW, state_zxid=2, own_broker_epoch=1)

    def txn(key, value, pid):
        records = transactional(key, value, pid)
        partition.produce(records, read_batch_header(records), 1, NOW, proven=True)

    produce(partition, b"k1", b"old")  # 0
    txn(b"k1", b"aborted", 7)  # 1
    produce(partition, b"k2", b"x")  # 2
    partition.append_marker(7, 0, False, 0, NOW, proven=True)  # 3: P aborts
    txn(b"k2", b"committed", 8)  # 4
    partition.append_marker(8, 0, True, 0, NOW, proven=True)  # 5: Q commits
    txn(b"k1", b"open", 9)  # 6: R's transaction stays open
    produce(partition, b"k1", b"after")  # 7
    for i in range(4):
        produce(partition, b"tail", b"%d" % i)  # 8-11
    assert partition.last_stable_offset == 6 and partition.high_watermark == 12

    def records():
        return [(r.offset, r.key, r.value) for s in log.segments
                for r in consume_read_uncommitted(list(batches_in(os.pread(s.file, s.size, 0))))]

    before = records()
    cleaner = cleaner_of(partition)
    cleaner.clean_once(now_ms=NOW)
    after = records()
    assert (0, b"k1", b"old") in after  # an aborted value supersedes nothing
    assert (1, b"k1", b"aborted") not in after and (2, b"k2", b"x") not in after
    assert (4, b"k2", b"committed") in after
    assert [r for r in after if r[0] >= 6] == [r for r in before if r[0] >= 6]  # from the LSO on: as written
    partition.load_producers(None)  # a replay of the cleaned log still finds every transaction's end
    assert partition.last_stable_offset == 6
    assert [(t.producer_id, t.first_offset) for t in partition.aborted_transactions(0, 12)] == [(7, 1)]

    # R aborts, which lets the LSO move on; the next cleanings (each once new records made the log
    # dirty) stamp the abort marker, whose transaction holds no record any more, with its delete
    # horizon (now + delete.retention.ms, 0 here), then remove it with its index entry; the commit
    # marker stays while its transaction's record does
    partition.append_marker(9, 0, False, 0, NOW, proven=True)  # 12
    later = int(time.time() * 1000) + 1_000
    for round_ in range(3):
        for i in range(4):
            produce(partition, b"tail", b"%d-%d" % (round_, i))
        assert partition.last_stable_offset == partition.high_watermark
        cleaner.clean_once(now_ms=later)
        if round_ == 0:
            assert [(t.producer_id, t.first_offset) for t in partition.aborted_transactions(0, 12)] == [(7, 1), (9, 6)]
    assert partition.aborted_transactions(0, 12) == []
    markers = {h.base_offset: h.record_count for s in log.segments
               for h in map(read_batch_header, batches_in(os.pread(s.file, s.size, 0))) if h.attributes & 0x20}
    assert markers == {3: 0, 5: 1, 12: 0}
    assert [r for r in records() if r[1] != b"tail"] == [(4, b"k2", b"committed"), (7, b"k1", b"after")], \
        "R's record went with its transaction, k1's old value once 'after' was cleanable"
    partition.load_producers(None)  # the emptied transactions and their emptied markers: nothing is left open
    assert partition.txns.table.ongoing_transactions() == []
    log.close()


def test_a_tombstone_stays_delete_retention_ms_after_the_cleaning_that_first_kept_it(tmp_path, cleaner_of):
    """KIP-534, as Kafka's cleaner: the first cleaning that keeps a tombstone stamps its batch with
    a delete horizon (now + delete.retention.ms, the batch's base timestamp, the records'
    timestamps unchanged); a later cleaning removes it once past that horizon. How long ago its
    segment was written does not count: a segment left dirty longer than delete.retention.ms
    still shows its deletes to consumers for delete.retention.ms after it is cleaned."""
    from weir.log.log_validator import first_record_at_or_after
    from weir.transactions.read_committed import consume_read_uncommitted
    partition = leader(tmp_path, isr=(1,), segment_bytes=150)  # two batches a segment
    log = partition.log
    produce(partition, b"k", b"a")
    produce(partition, b"k", None)  # the tombstone, at offset 1
    produce(partition, b"x", b"1")
    produce(partition, b"x", b"2")
    produce(partition, b"tail", b"t")
    assert len(log.closed_segments) == 2
    long_ago = time.time() - 2 * 24 * 3600  # written two days ago, never cleaned since
    for segment in log.closed_segments:
        os.utime(segment.log_path, (long_ago, long_ago))

    def records():
        return [(r.offset, r.key, r.value) for s in log.segments
                for r in consume_read_uncommitted(list(batches_in(os.pread(s.file, s.size, 0))))]

    def tombstone_batch():
        return next(b for s in log.segments for b in batches_in(os.pread(s.file, s.size, 0))
                    if read_batch_header(b).base_offset == 1)

    def more(round_):  # new dirty data, so that the log is cleaned again
        for value in (b"1", b"2"):
            produce(partition, b"y%d" % round_, value)

    now = int(time.time() * 1000)
    cleaner = cleaner_of(partition, **{"delete.retention.ms": HOUR})
    assert cleaner.clean_once(now_ms=now) >= 1
    assert (1, b"k", None) in records(), "the first cleaning keeps the tombstone"
    header = read_batch_header(tombstone_batch())
    assert header.attributes & 0x40 and header.base_timestamp == now + HOUR, "stamped with its delete horizon"
    assert first_record_at_or_after(tombstone_batch(), 0) == (1, NOW), "the record's timestamp is unchanged"
    assert header.max_timestamp == NOW

    more(1)
    cleaner.clean_once(now_ms=now + HOUR - 1)
    assert (1, b"k", None) in records(), "before the horizon it stays"
    more(2)
    cleaner.clean_once(now_ms=now + HOUR)
    assert [r for r in records() if r[1] == b"k"] == [], "at the horizon it goes"
    log.close()


@pytest.mark.parametrize("ratio", [0.0, 1.0])
def test_the_dirty_ratio_must_exceed_min_cleanable_dirty_ratio(tmp_path, cleaner_of, ratio):
    """Kafka cleans a log whose dirty ratio is greater than min.cleanable.dirty.ratio (or past
    max.compaction.lag.ms): 1 never cleans by the ratio, 0 cleans whenever anything is dirty and
    a log with nothing dirty is not cleaned."""
    from weir.transactions.read_committed import consume_read_uncommitted
    partition = leader(tmp_path, isr=(1,), segment_bytes=150)  # two batches a segment
    for key, value in ((b"k", b"a"), (b"k", None), (b"x", b"1"), (b"x", b"2"), (b"tail", b"t")):
        produce(partition, key, value)
    log = partition.log

    def records():
        return [(r.offset, r.key, r.value) for s in log.segments
                for r in consume_read_uncommitted(list(batches_in(os.pread(s.file, s.size, 0))))]
    before = records()
    cleaner = cleaner_of(partition, **{"min.cleanable.dirty.ratio": ratio})
    if ratio == 1.0:
        assert cleaner.clean_once(now_ms=NOW) == 0, "all dirty is a ratio of 1: not above it"
        assert records() == before
        return
    assert cleaner.clean_once(now_ms=NOW) == 2  # the tombstone kept, stamped with its horizon (NOW)
    cleaned = records()
    assert (1, b"k", None) in cleaned
    assert cleaner.clean_once(now_ms=NOW + 1) == 0, "nothing dirty: the log is not cleaned"
    assert records() == cleaned
    produce(partition, b"y", b"1")  # the active segment rolls: something dirty again
    produce(partition, b"y", b"2")
    assert cleaner.clean_once(now_ms=NOW + 1) > 0
    assert (1, b"k", None) not in records()

from weir.log import LogConfig

from .batches import make_batch
from .conftest import NOW

BATCH = len(make_batch([b"v" * 100]))


def append(log, epoch, count=1):
    for _ in range(count):
        log.append(make_batch([b"v" * 100]), epoch, NOW)


def test_epoch_starts_are_recorded_and_answer_offsets_for_leader_epoch(open_log, log_dir):
    log = open_log()
    append(log, 1, 3)
    append(log, 3, 2)
    assert log.leader_epochs.entries == [(1, 0), (3, 3)]
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(2) == (1, 3)  # epoch 2 had no leader writes: it ends where 3 starts
    assert log.end_offset_for_epoch(3) == (3, 5)  # the latest epoch ends at the LEO
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(4) == (-1, -1)
    assert (log_dir / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n3 3\n"


def test_follower_appends_learn_epochs_from_batches(open_log):
    log = open_log()
    data = make_batch([b"a", b"b"], base_offset=0, leader_epoch=2) + make_batch([b"c"], base_offset=2, leader_epoch=4)
    log.append_as_follower(data, NOW)
    assert log.leader_epochs.entries == [(2, 0), (4, 2)]


def test_truncation_forgets_epochs_that_started_above_it(open_log):
    log = open_log()
    append(log, 1, 2)
    append(log, 2, 2)
    log.truncate_to(2)
    assert log.leader_epochs.entries == [(1, 0)]
    log.truncate_to(0)
    assert log.leader_epochs.entries == []


def test_epochs_survive_reopen_and_are_rebuilt_by_recovery(open_log, log_dir):
    log = open_log()
    append(log, 5, 2)
    append(log, 7, 1)
    log.close()
    assert open_log(clean_shutdown=True).leader_epochs.entries == [(5, 0), (7, 2)]
    (log_dir / "leader-epoch-checkpoint").unlink()
    assert open_log().leader_epochs.entries == [(5, 0), (7, 2)]


def test_log_start_moving_up_trims_epochs(open_log):
    log = open_log(LogConfig(segment_bytes=BATCH * 2))
    append(log, 1, 2)
    append(log, 2, 3)
    append(log, 3, 1)
    log.delete_records_before(3)
    assert log.leader_epochs.entries == [(2, 3), (3, 5)]


def test_a_checkpoint_that_does_not_match_the_log_is_rebuilt_from_the_batches(open_log, log_dir):
    """After a clean shutdown no segment is recovered, so nothing else would relearn the epochs: a
    damaged, lost or foreign checkpoint would leave OffsetsForLeaderEpoch answering from a wrong
    cache (or none), and followers truncating by it (KIP-101)."""
    config = LogConfig(segment_bytes=BATCH * 2)
    log = open_log(config)
    append(log, 1, 3)
    append(log, 3, 2)
    log.close()
    checkpoint = log_dir / "leader-epoch-checkpoint"
    for damaged in ["0\n2\n1 0\n", "0\n2\n1 0\nthree 3\n", "1\n2\n1 0\n3 3\n", "0\n2\n3 3\n1 0\n",
                    "0\n1\n7 0\n", "0\n1\n1 0\n", ""]:
        checkpoint.write_text(damaged)
        reopened = open_log(config, clean_shutdown=True)
        assert reopened.leader_epochs.entries == [(1, 0), (3, 3)], damaged
        assert reopened.end_offset_for_epoch(1) == (1, 3), damaged
        assert checkpoint.read_text() == "0\n2\n1 0\n3 3\n", damaged
        reopened.close()
    checkpoint.unlink()
    assert open_log(config, clean_shutdown=True).leader_epochs.entries == [(1, 0), (3, 3)]



def test_a_checkpoint_epoch_inside_the_last_batch_is_rebuilt_from_the_batches(open_log, log_dir):
    """(7, 5) inside the last batch (offsets 0-9, epoch 2) survives the trim to the LEO and agrees
    with the batch's base offset, but no record of epoch 7 exists: a follower would ask its leader
    about epoch 7 and truncate by the answer."""
    log = open_log()
    log.append(make_batch([b"v"] * 10), 2, NOW)
    log.close()
    (log_dir / "leader-epoch-checkpoint").write_text("0\n2\n2 0\n7 5\n")
    reopened = open_log(clean_shutdown=True)
    assert reopened.leader_epochs.entries == [(2, 0)]
    assert reopened.end_offset_for_epoch(2) == (2, 10)


def test_a_directory_writes_new_epochs_in_its_next_second_and_a_flush_never_passes_one(tmp_path):
    """A broker's death moves thousands of leaderships at once: each leader's new epoch is written
    in the directory's next second (with the others), not one file per leadership on the spot. A
    flush (after which recovery no longer re-reads the batches) writes it first; a log deleted
    meanwhile leaves nothing to write."""
    import uuid

    from weir.log.log_directory import LogDirectory

    directory = LogDirectory(tmp_path)
    topic_id = uuid.uuid4()
    kept, flushed, deleted = (directory.open_partition("t", i, topic_id, None, NOW) for i in range(3))
    for log in (kept, flushed, deleted):
        log.leader_epochs.assign(5, 0)
    checkpoint = "leader-epoch-checkpoint"
    assert not any("5 0" in (log.directory / checkpoint).read_text() for log in (kept, flushed, deleted))
    append(flushed, 5)
    flushed.flush()
    assert (flushed.directory / checkpoint).read_text() == "0\n1\n5 0\n"
    directory.delete_partition("t", 2)
    directory.flush_if_due(NOW)
    assert (kept.directory / checkpoint).read_text() == "0\n1\n5 0\n"
    assert not directory.unwritten_epochs and not deleted.directory.exists()


def test_new_epochs_are_written_a_bounded_number_at_a_time(tmp_path):
    from weir.log.leader_epoch_cache import LeaderEpochCache, write_unwritten

    unwritten: set = set()
    caches = [LeaderEpochCache.open(tmp_path / str(i), unwritten) for i in range(5)]
    for i, cache in enumerate(caches):
        cache.path.parent.mkdir()
        cache.assign(3, i)
    write_unwritten(unwritten, limit=2)
    assert len(unwritten) == 3
    write_unwritten(unwritten, limit=2)
    write_unwritten(unwritten, limit=2)
    assert not unwritten
    assert [c.path.read_text() for c in caches] == [f"0\n1\n3 {i}\n" for i in range(5)]

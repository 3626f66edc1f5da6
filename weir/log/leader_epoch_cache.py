"""The leader-epoch cache of a partition (Kafka's LeaderEpochFileCache, KIP-101 and KIP-279):
for each leader epoch, the first offset written in it, persisted in `leader-epoch-checkpoint`.

    0            <- version
    2            <- number of entries
    3 0          <- epoch start_offset
    5 120

Rules: epochs strictly increase and so do start offsets. A follower asks its leader "where does
my latest epoch end?" (OffsetsForLeaderEpoch) and truncates there, so the answer must name the
start of the next higher epoch. The file is rewritten (atomically) on every change; epochs change
rarely, so this never touches the append hot path beyond one comparison. A new epoch (a leadership,
an epoch met in appended batches) may be written a little later, with other logs' (`unwritten`):
a broker's death moves thousands of leaderships at once, one file each; and no flush of the log
passes it (the flush writes it first), so until then recovery re-learns it from the batches.
"""

from __future__ import annotations

import itertools
import logging
from bisect import bisect_left, bisect_right
from pathlib import Path

from weir.log.checkpoint_file import write_atomically

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
EPOCH_WRITES_PER_CALL = 500  # write_unwritten's limit: its log directory calls it every second

logger = logging.getLogger(__name__)


class LeaderEpochCache:
    def __init__(self, path: Path, entries: list[tuple[int, int]], unwritten: set | None = None):
        """`unwritten`: the caches whose new epochs wait to be written (`write_unwritten`), which
        this one joins at a new epoch; None: written at once."""
        self.path = path
        self.unwritten = unwritten
        self.damaged = False
        self._epochs = [e for e, _ in entries]
        self._start_offsets = [o for _, o in entries]

    @classmethod
    def open(cls, directory: Path, unwritten: set | None = None) -> "LeaderEpochCache":
        """The cache in `directory`'s checkpoint; `damaged` is set if the file is there but is not
        one (unreadable, or entries that do not ascend): the log then rebuilds it (`rebuild`)."""
        path = directory / LEADER_EPOCH_CHECKPOINT
        entries: list[tuple[int, int]] = []
        damaged = False
        try:
            lines = path.read_text().splitlines()
            if int(lines[0]) != 0 or len(lines) != 2 + int(lines[1]):
                raise ValueError(f"version {lines[0]}, {len(lines) - 2} of {lines[1]} entries")
            for line in lines[2:]:
                epoch, offset = line.split(" ")
                entries.append((int(epoch), int(offset)))
            damaged = any(e1 >= e2 or o1 >= o2 for (e1, o1), (e2, o2) in zip(entries, entries[1:]))
        except FileNotFoundError:
            pass
        except (OSError, ValueError, IndexError):
            damaged = True
        cache = cls(path, [] if damaged else entries, unwritten)
        cache.damaged = damaged
        return cache

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._start_offsets))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`. Entries it contradicts (a higher epoch, a
        same or higher start offset) are removed, as in Kafka: an epoch lower than the latest comes
        from a leader or the log's own batches, so a cache ahead of them is the one that is wrong."""
        if epoch < 0:
            return
        if self._epochs and self._epochs[-1] == epoch and self._start_offsets[-1] <= start_offset:
            return  # already known: later offsets of the same epoch are not a new start
        removed = self._add(epoch, start_offset)
        if len(removed) > 1 or (removed and removed[0][1] != start_offset):
            # One entry at the same start is a leadership that wrote nothing: expected, not news.
            logger.warning("%s: epoch %d at offset %d removes the conflicting entries %s", self.path.parent.name,
                           epoch, start_offset, removed)
        # Not fsynced here (a leadership change may touch thousands of partitions): the log's
        # flush makes it durable, and recovery re-learns the epochs of the unflushed tail from
        # the batches themselves. Kafka flushes this file asynchronously for the same reason.
        if self.unwritten is None:
            self._persist(durable=False)
        else:
            self.unwritten.add(self)

    def _add(self, epoch: int, start_offset: int) -> list[tuple[int, int]]:
        """Append (epoch, start_offset) after removing the entries it contradicts; returns those.
        An entry of the same epoch starting earlier is kept: it is where that epoch started."""
        removed = []
        while self._epochs and (self._epochs[-1] > epoch or self._start_offsets[-1] >= start_offset):
            removed.append((self._epochs.pop(), self._start_offsets.pop()))
        if not self._epochs or self._epochs[-1] != epoch:
            self._epochs.append(epoch)
            self._start_offsets.append(start_offset)
        return removed

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose records include `offset`: the last entry starting at or before it
        (Kafka's LeaderEpochFileCache.epochForOffset); -1 if none does."""
        i = bisect_right(self._start_offsets, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def rebuild(self, batches) -> None:
        """Learn every epoch again from the log's `batches` (each with .leader_epoch and
        .base_offset), in order, and persist that."""
        self._epochs, self._start_offsets = [], []
        for batch in batches:
            if batch.leader_epoch > self.latest_epoch:
                self._add(batch.leader_epoch, batch.base_offset)
        self.damaged = False
        self._persist()

    def start_offset_of(self, epoch: int) -> int | None:
        i = bisect_left(self._epochs, epoch)
        return self._start_offsets[i] if i < len(self._epochs) and self._epochs[i] == epoch else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (the largest epoch <= requested, the offset where it ends, i.e.
        the start of the next higher epoch, or the LEO for the latest)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._start_offsets[0]
        return self._epochs[higher - 1], self._start_offsets[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to `end_offset`: epochs starting at or after it never happened."""
        keep = bisect_left(self._start_offsets, end_offset)
        if keep < len(self._epochs):
            del self._epochs[keep:], self._start_offsets[keep:]
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to `start_offset`: drop epochs wholly before it, and move the start
        of the epoch holding it up to it."""
        holding = bisect_right(self._start_offsets, start_offset) - 1
        if holding < 0 or (holding == 0 and self._start_offsets[0] == start_offset):
            return
        del self._epochs[:holding], self._start_offsets[:holding]
        self._start_offsets[0] = start_offset
        self._persist()

    def restore(self, entries: list[tuple[int, int]]) -> None:
        """Put back the entries `entries` returned earlier (an append that failed)."""
        if entries != self.entries:
            self._epochs, self._start_offsets = [e for e, _ in entries], [o for _, o in entries]
            self._persist(durable=False)

    def clear_and_flush(self) -> None:
        self._epochs, self._start_offsets = [], []
        self._persist()

    def flush(self) -> None:
        """Make the file durable (the log calls this when it flushes)."""
        self._persist()

    def forget(self) -> None:
        """Its log is deleted: nothing of it waits to be written any more."""
        if self.unwritten is not None:
            self.unwritten.discard(self)

    def _persist(self, durable: bool = True) -> None:
        self.forget()
        lines = ["0", str(len(self._epochs))] + [f"{e} {o}" for e, o in zip(self._epochs, self._start_offsets)]
        write_atomically(self.path, "\n".join(lines) + "\n", durable=durable)


def write_unwritten(unwritten: set, limit: int = EPOCH_WRITES_PER_CALL) -> None:
    """Write (not fsync) the new epochs of up to `limit` caches in `unwritten` (a file each: a
    rename, a few hundred microseconds, which thousands at once would hold the event loop for a
    second). The rest, and one that cannot be written now (out of descriptors, a full disk), wait
    for the next call; a log's flush writes its own first."""
    failed = None
    for cache in list(itertools.islice(unwritten, limit)):
        try:
            cache._persist(durable=False)
        except FileNotFoundError:
            cache.forget()  # its directory is gone with its log
        except OSError as e:
            failed = failed or e
    if failed is not None:
        logger.warning("%d leader-epoch checkpoint(s) not written, tried again in a second: %s", len(unwritten), failed)

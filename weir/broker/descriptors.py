"""The broker's file descriptors (issue 41): its soft RLIMIT_NOFILE raised to the hard limit at
start, and the room a new replica must leave for everything else.

A replica holds about one descriptor (its active segment's `.log`, weir.log.segment_files); the
closed segments' files that reads open share one bounded cache; the rest are connections,
ZooKeeper's, and short-lived files (checkpoints, producer snapshots, index writes). Running out
would stall them all: no new connection, no checkpoint. So a new replica is refused, with Kafka's
KAFKA_STORAGE_ERROR for a replica it cannot create (ReplicaManager.makeLeaders after
LogManager.getOrCreateLog failed), while fewer than `headroom` descriptors would stay free: the
cache's limit, and a tenth of the soft limit (at least SPARE_AT_LEAST) for the rest.

How many are open is judged by the lowest free descriptor, which the next open gets: POSIX hands
out the lowest, so every one below it is in use. It costs one open and close of /dev/null per new
replica (a count of /proc/self/fd would cost a directory read of thousands); it misses the open
descriptors above a hole, so an EMFILE may still come, and is met the same way.
"""

from __future__ import annotations

import errno
import logging
import os
import resource

log = logging.getLogger(__name__)

SPARE_AT_LEAST = 64  # free descriptors a new replica leaves for connections and short-lived files
CACHE_SHARE = 4  # the closed segments' file cache takes at most a quarter of the soft limit
OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (as Kafka's start scripts leave to
    `ulimit -n`); log both. Returns (soft, hard) as they are now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        log.info("RLIMIT_NOFILE: soft %d, hard %d", soft, hard)
        return soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:
        log.warning("RLIMIT_NOFILE: soft %d, hard %d; the soft limit cannot be raised: %s", soft, hard, e)
        return soft, hard
    log.info("RLIMIT_NOFILE: soft limit raised from %d to the hard limit %d", soft, hard)
    return hard, hard


def open_descriptors() -> int | None:
    """How many descriptors the process has open (None if even that cannot be counted)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # less the one listdir itself opened
    except OSError:
        return None


def lowest_free_descriptor() -> int:
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    return fd


class DescriptorBudget:
    """How many closed segments' files the cache may hold, and whether a new replica fits."""

    def __init__(self, closed_segment_files: int) -> None:
        self.soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]  # as the broker started
        self.cached_files = max(1, min(closed_segment_files, self.soft // CACHE_SHARE))
        self.headroom = self.cached_files + max(SPARE_AT_LEAST, self.soft // 10)

    def check_room_for_replica(self) -> None:
        """Raise OSError(EMFILE) if opening a replica now would leave fewer than `headroom`
        descriptors free."""
        lowest = lowest_free_descriptor()
        if lowest + self.headroom > self.soft:
            raise OSError(errno.EMFILE, f"too few descriptors free for a new replica: the lowest free one is {lowest}, "
                                        f"and {self.headroom} stay free")

    @staticmethod
    def limits() -> str:
        """The limits as they are now (`prlimit --pid` may change them under a running broker)."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return f"RLIMIT_NOFILE soft {soft}, hard {hard}"

    def usage(self) -> str:
        count = open_descriptors()
        return (f"{'all' if count is None else count} open, {self.headroom} kept free for connections, checkpoints "
                f"and {self.cached_files} closed segments' files (weir.log.closed.segment.files.max)")

    def describe(self) -> str:
        """The limits and the count, for a log line."""
        return f"{self.limits()}; {self.usage()}"

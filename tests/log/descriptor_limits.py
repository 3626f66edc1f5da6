"""Counting this process's descriptors, and running it short of them (issue 41's tests)."""

import gc
import os
import resource
from contextlib import contextmanager


def open_descriptors() -> int:
    gc.collect()  # garbage may hold files still
    return len(os.listdir("/proc/self/fd")) - 1  # less the one listdir opened


@contextmanager
def descriptors_left(free: int):
    """The soft RLIMIT_NOFILE set so that `free` more descriptors can be opened: it bounds their
    numbers (the lowest free one is handed out), so it is set to the lowest free one once `free`
    are taken."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    gc.collect()  # garbage holding files would free descriptors meanwhile
    taken = [os.open(os.devnull, os.O_RDONLY) for _ in range(free + 1)]
    limit = taken[-1]
    for fd in taken:
        os.close(fd)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

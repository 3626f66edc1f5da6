"""Small text files a log directory keeps, in Kafka's formats, written atomically
(temporary file, fsync, rename, fsync of the directory).

Offset checkpoints (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`):

    0                 <- version
    2                 <- number of entries
    orders 0 1234     <- topic partition offset
    orders 1 99

Partition metadata (`partition.metadata`):

    version: 0
    topic_id: <the 16-byte topic id in URL-safe base64 without padding>
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

from weir.log.file_io import fsync_directory, write_all

CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0
PARTITION_METADATA_FILE = "partition.metadata"


def write_atomically(path: Path, text: str, durable: bool = True) -> None:
    """Replace `path` by `text` all at once (write a temporary file, rename); `durable` fsyncs."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, text.encode())
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_directory(path.parent)


def write_offset_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    write_atomically(path, "\n".join(lines) + "\n")


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The entries of a checkpoint; an empty dict if the file is missing or malformed (then the
    caller recovers everything, which is slow but safe)."""
    try:
        lines = path.read_text().splitlines()
        if int(lines[0]) != CHECKPOINT_VERSION or len(lines) < 2:
            return {}
        count = int(lines[1])
        entries = {}
        for line in lines[2:2 + count]:
            topic, partition, offset = line.split(" ")
            entries[(topic, int(partition))] = int(offset)
        return entries if len(entries) == count else {}
    except (OSError, ValueError, IndexError):
        return {}


def encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    write_atomically(directory / PARTITION_METADATA_FILE,
                     f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {encode_topic_id(topic_id)}\n")


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id recorded for a partition, or None if there is no readable file."""
    try:
        fields = dict(line.split(": ", 1) for line in (directory / PARTITION_METADATA_FILE).read_text().splitlines() if line)
        if int(fields["version"]) != PARTITION_METADATA_VERSION:
            return None
        return decode_topic_id(fields["topic_id"].strip())
    except (OSError, ValueError, KeyError):
        return None

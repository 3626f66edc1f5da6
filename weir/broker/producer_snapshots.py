"""The idempotent producers' table of a partition, saved beside its log (producer-state.json)."""

import json
import logging
from pathlib import Path

from ..log.checkpoint_file import write_atomically
from ..replication.partition import ProducerSnapshot

log = logging.getLogger(__name__)
PRODUCER_SNAPSHOT = "producer-state.json"


def read_producer_snapshot(directory: Path) -> ProducerSnapshot | None:
    """The saved snapshot, or None if there is none or it is damaged (the log is read instead)."""
    path = directory / PRODUCER_SNAPSHOT
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text())
        return ProducerSnapshot(int(saved["offset"]), saved["state"])
    except (ValueError, KeyError, TypeError, OSError) as e:
        log.warning("%s: ignoring a damaged producer snapshot: %r", directory, e)
        return None


def write_producer_snapshot(directory: Path, snapshot: ProducerSnapshot) -> None:
    write_atomically(directory / PRODUCER_SNAPSHOT, json.dumps({"offset": snapshot.offset,
                                                                "state": snapshot.table_json}), durable=False)

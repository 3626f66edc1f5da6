"""A partition's producer state, saved beside its log (producer-state.json): the idempotent
producers' table and, under "txns", the transaction table (KIP-98; a snapshot without it was
written before transactions and loads as none ongoing)."""

import json
import logging
from pathlib import Path

from weir.log.checkpoint_file import write_atomically
from weir.replication.partition import ProducerSnapshot

log = logging.getLogger(__name__)
PRODUCER_SNAPSHOT = "producer-state.json"


def read_producer_snapshot(directory: Path) -> ProducerSnapshot | None:
    """The saved snapshot, or None if there is none or it is damaged (the log is read instead)."""
    path = directory / PRODUCER_SNAPSHOT
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text())
        txns = saved.get("txns")
        return ProducerSnapshot(int(saved["offset"]), saved["state"], txns if isinstance(txns, str) else None)
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as e:
        log.warning("%s: ignoring a damaged producer snapshot: %r", directory, e)
        return None


def write_producer_snapshot(directory: Path, snapshot: ProducerSnapshot) -> None:
    saved = {"offset": snapshot.offset, "state": snapshot.table_json}
    if snapshot.txn_json is not None:
        saved["txns"] = snapshot.txn_json
    write_atomically(directory / PRODUCER_SNAPSHOT, json.dumps(saved), durable=False)

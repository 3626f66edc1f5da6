"""The history of a run: every operation's invocation and completion, as Jepsen records them.

An operation is invoked once (`type` "invoke") and completes once: "ok" (it happened), "fail" (it
definitely did not happen), or "info" (nobody knows: a timeout, a lost connection, an error that
does not say whether the write was appended). Completions carry the `id` of their invocation.
Nemesis actions are recorded the same way, by process "nemesis".

One operation is one JSON line in history.jsonl:

    {"index": 7, "time": 1.482, "process": "producer-0", "type": "invoke", "f": "send", "id": 4,
     "value": {"partition": 1, "value": 4}}
    {"index": 9, "time": 1.497, "process": "producer-0", "type": "ok", "f": "send", "id": 4,
     "value": {"partition": 1, "value": 4, "offset": 17}}
    {"index": 12, "time": 1.503, "process": "consumer-1.0", "type": "ok", "f": "poll", "id": 6,
     "value": {"reads": [[1, 17, 4]]}}                     # [partition, offset, value], in order

`time` is seconds since the run started (monotonic clock). f is "send", "poll", "final-read", or
a nemesis action ("kill", "restart", "pause", "resume", "cut", "heal", ...).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import IO

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
COMPLETIONS = (OK, FAIL, INFO)


class History:
    """Thread-safe, append-only; streamed to a JSON-lines file as it grows (if given one)."""

    def __init__(self, path: Path | None = None, clock=time.monotonic) -> None:
        self._clock = clock
        self._start = clock()
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self.ops: list[dict] = []
        self._file: IO[str] | None = open(path, "w") if path else None

    def now(self) -> float:
        return self._clock() - self._start

    def invoke(self, process: str, f: str, value=None) -> int:
        op_id = next(self._ids)
        self._append({"process": process, "type": INVOKE, "f": f, "id": op_id, "value": value})
        return op_id

    def complete(self, op_id: int, process: str, type_: str, f: str, value=None, error: str | None = None) -> None:
        assert type_ in COMPLETIONS, type_
        op = {"process": process, "type": type_, "f": f, "id": op_id, "value": value}
        if error is not None:
            op["error"] = error
        self._append(op)

    def _append(self, op: dict) -> None:
        with self._lock:
            op = {"index": len(self.ops), "time": round(self.now(), 6), **op}
            self.ops.append(op)
            if self._file is not None:
                self._file.write(json.dumps(op, separators=(",", ":")) + "\n")

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def load_history(path: Path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]

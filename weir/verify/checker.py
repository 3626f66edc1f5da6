"""The checker: anomalies of a recorded history, in the terms of Jepsen's `kafka` workload.

Pure: a list of operations in (as `history.History` records them), a result out. No cluster, no
clock, no files; the tests feed it hand-written histories.

What counts as known:

- A value is *committed* when its send completed "ok" (the broker acknowledged it, with an offset)
  or when a consumer polled it (consumers read only below the high watermark, so what they see was
  committed by the leader that served it).
- A send is *definitely failed* only when it completed "fail". Timeouts and errors that leave the
  write's fate open complete "info": such a value may or may not be in the log, and neither is an
  anomaly.
- The *final read* (one "final-read" op, made after the faults healed, from every partition's start
  to its high watermark) is the log as it finally is. Lost writes and skips are judged only against
  a complete one.

Anomalies (safety violations unless noted):

- lost-write: a committed value absent from the final read.
- duplicate: one value at two or more offsets of the final read. A violation only in an
  idempotent run. Without idempotence a write may land twice even with retries=0: librdkafka
  resends, without counting a retry, a batch whose request failed with an error it reads as "not
  persisted" - NOT_LEADER_OR_FOLLOWER and the like (the broker answers those only for batches it
  did not append), and _DESTROY_BROKER, with which it fails every request in flight to a broker
  that has left Metadata (a paused broker whose ZooKeeper session expired: Kafka's brokers list
  only live brokers too). Seen in `weir verify --nemesis pause` with librdkafka 2.16's debug log.
- inconsistent-offsets: one (partition, offset) seen holding two different values, by any mix of
  acknowledgements, polls and the final read.
- nonmonotonic-poll: a consumer (with `assign`, no rebalancing) polls offset o of a partition after
  having polled o' >= o there.
- poll-skip: a consumer polls o after o' in a partition while the final read has records strictly
  between them: it jumped over records that exist.
- failed-write-read: a value whose send definitely failed, seen by a poll or the final read.
- unseen (informational): acknowledged values no consumer polled during the run; consumers may
  simply lag, so this is not a violation.

Transactions (`weir verify --transactional`): a "txn" op writes several values in one
transaction and completes "ok" (committed), "fail" (aborted: none of its values may ever be
read) or "info" (the outcome is unknown). Its values take its fate, so an aborted value read by
a read_committed consumer is a failed-write-read and a committed one missing is a lost-write.
Consumers read with read_committed, so they may skip the offsets of aborted records and markers;
the final read is read_committed too, and skips are judged against it. One more anomaly:

- partial-transaction: a transaction some of whose values are in the final read and some not
  (committed or of unknown outcome, it must be all or nothing).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass, field

from weir.verify.history import FAIL, INFO, INVOKE, OK

LOST_WRITE = "lost-write"
DUPLICATE = "duplicate"
INCONSISTENT_OFFSETS = "inconsistent-offsets"
NONMONOTONIC_POLL = "nonmonotonic-poll"
POLL_SKIP = "poll-skip"
FAILED_WRITE_READ = "failed-write-read"
PARTIAL_TRANSACTION = "partial-transaction"
UNSEEN = "unseen"
ANOMALIES = (LOST_WRITE, DUPLICATE, INCONSISTENT_OFFSETS, NONMONOTONIC_POLL, POLL_SKIP, FAILED_WRITE_READ,
             PARTIAL_TRANSACTION, UNSEEN)
EXAMPLES_KEPT = 20


def safety_anomalies(duplicates_allowed: bool) -> tuple[str, ...]:
    always = (LOST_WRITE, INCONSISTENT_OFFSETS, NONMONOTONIC_POLL, POLL_SKIP, FAILED_WRITE_READ, PARTIAL_TRANSACTION)
    return always + (() if duplicates_allowed else (DUPLICATE,))


@dataclass
class Observations:
    """What a history says of each value, and the final read's layout."""
    fate: dict = field(default_factory=dict)        # value → "ok" | "fail" | "info" | "invoke" (never completed)
    acked: dict = field(default_factory=dict)       # value → (partition, offset, time)
    seen_at: dict = field(default_factory=lambda: defaultdict(set))  # (partition, offset) → values seen there
    polled: dict = field(default_factory=dict)      # value → (partition, offset, process) of its first poll
    polls_by_process: dict = field(default_factory=lambda: defaultdict(list))  # process → [(p, o, value)] in order
    transactions: list = field(default_factory=list)  # completed "txn" ops that may have committed: [(op id, values)]
    final: dict | None = None                       # the last final read's value
    final_offsets: dict = field(default_factory=lambda: defaultdict(list))  # partition → sorted offsets
    final_places: dict = field(default_factory=lambda: defaultdict(list))   # value → [(partition, offset)]

    @property
    def complete(self) -> bool:
        """An incomplete final read cannot tell a lost value from one not read yet."""
        return bool(self.final and self.final.get("complete", True))


def observe(ops: list[dict]) -> Observations:
    seen = Observations()
    final_ops = []
    for op in ops:
        f, type_, value = op.get("f"), op["type"], op.get("value")
        if f == "send":
            v = value["value"]
            if type_ == INVOKE:
                seen.fate.setdefault(v, INVOKE)
            else:
                seen.fate[v] = type_
                if type_ == OK:
                    seen.acked[v] = (value["partition"], value["offset"], op["time"])
                    seen.seen_at[(value["partition"], value["offset"])].add(v)
        elif f == "txn":
            if type_ == INVOKE:
                for _, v in value["writes"]:
                    seen.fate.setdefault(v, INVOKE)
                continue
            for p, v in value["writes"]:
                seen.fate[v] = type_
            for p, o, v in value.get("offsets", ()):
                seen.seen_at[(p, o)].add(v)
                if type_ == OK:
                    seen.acked[v] = (p, o, op["time"])
            if type_ != FAIL:
                seen.transactions.append((op["id"], [v for _, v in value["writes"]]))
        elif f == "poll" and type_ == OK:
            for p, o, v in value["reads"]:
                seen.seen_at[(p, o)].add(v)
                seen.polled.setdefault(v, (p, o, op["process"]))
                seen.polls_by_process[op["process"]].append((p, o, v))
        elif f == "final-read" and type_ == OK:
            final_ops.append(op)
    seen.final = final_ops[-1]["value"] if final_ops else None
    if seen.final is not None:
        for p, o, v in seen.final["reads"]:
            seen.seen_at[(p, o)].add(v)
            seen.final_offsets[p].append(o)
            seen.final_places[v].append((p, o))
        for offsets in seen.final_offsets.values():
            offsets.sort()
    return seen


def lost_writes(seen: Observations) -> list[dict]:
    committed = {v: ("ack", p, o) for v, (p, o, _) in seen.acked.items()}
    for v, (p, o, process) in seen.polled.items():
        committed.setdefault(v, ("read", p, o))
    return [{"value": v, "partition": p, "offset": o, "known_by": how,
             "acked_at": seen.acked[v][2] if v in seen.acked else None}
            for v, (how, p, o) in sorted(committed.items(), key=lambda item: (item[1][1], item[1][2], str(item[0])))
            if v not in seen.final_places]


def duplicates(seen: Observations) -> list[dict]:
    return [{"value": v, "partition": places[0][0], "offsets": sorted(o for _, o in places)}
            for v, places in seen.final_places.items() if len(places) > 1]


def partial_transactions(seen: Observations) -> list[dict]:
    found = []
    for op_id, values in seen.transactions:
        present = [v for v in values if v in seen.final_places]
        if present and len(present) < len(values):
            found.append({"op": op_id, "values": values, "in_final_read": present})
    return found


def inconsistent_offsets(seen: Observations) -> list[dict]:
    return [{"partition": p, "offset": o, "values": sorted(values, key=str)}
            for (p, o), values in sorted(seen.seen_at.items()) if len(values) > 1]


def poll_order(seen: Observations) -> tuple[list[dict], list[dict]]:
    """Each consumer's polls of a partition: going back (nonmonotonic) or over records (skip)."""
    nonmonotonic, skips = [], []
    for process, reads in seen.polls_by_process.items():
        last: dict[int, tuple[int, object]] = {}
        for p, o, v in reads:
            if p in last:
                previous, previous_value = last[p]
                if o <= previous:
                    nonmonotonic.append({"process": process, "partition": p, "offset": o, "value": v,
                                         "previous_offset": previous, "previous_value": previous_value})
                elif seen.complete:
                    offsets = seen.final_offsets.get(p, [])
                    skipped = bisect_left(offsets, o) - bisect_right(offsets, previous)
                    if skipped > 0:
                        skips.append({"process": process, "partition": p, "from_offset": previous,
                                      "to_offset": o, "skipped": skipped})
            last[p] = (o, v)
    return nonmonotonic, skips


def failed_writes_read(seen: Observations) -> list[dict]:
    found = []
    for v, how in seen.fate.items():
        if how != FAIL:
            continue
        if v in seen.polled:
            p, o, process = seen.polled[v]
            found.append({"value": v, "partition": p, "offset": o, "seen_by": process})
        elif v in seen.final_places:
            p, o = seen.final_places[v][0]
            found.append({"value": v, "partition": p, "offset": o, "seen_by": "final-read"})
    return found


def unseen(seen: Observations) -> list[dict]:
    return [{"value": v, "partition": p, "offset": o, "acked_at": t}
            for v, (p, o, t) in sorted(seen.acked.items(), key=lambda item: item[1][2]) if v not in seen.polled]


def statistics(seen: Observations) -> dict:
    fate = seen.fate
    indefinite = [v for v, how in fate.items() if how in (INFO, INVOKE)]
    return {
        "sends": len(fate),
        "ok": sum(1 for how in fate.values() if how == OK),
        "fail": sum(1 for how in fate.values() if how == FAIL),
        "info": len(indefinite),
        "indefinite_in_final_read": sum(1 for v in indefinite if v in seen.final_places),
        "polled_values": len(seen.polled),
        "final_read_records": len(seen.final["reads"]) if seen.final else 0,
        "final_read_complete": seen.complete,
    }


def check(ops: list[dict], idempotent: bool = False) -> dict:
    """Every anomaly of the history, with counts, examples and statistics.

    Duplicates are violations when the producer was idempotent: then nothing but the broker can have
    written a value twice (see the module's notes for why retries=0 is not enough).

    `valid` is True or False; None when there is no complete final read to judge lost writes and
    skips against.
    """
    seen = observe(ops)
    anomalies: dict[str, list] = {name: [] for name in ANOMALIES}
    if seen.complete:
        anomalies[LOST_WRITE] = lost_writes(seen)
        anomalies[PARTIAL_TRANSACTION] = partial_transactions(seen)
    if seen.final is not None:
        anomalies[DUPLICATE] = duplicates(seen)
    anomalies[INCONSISTENT_OFFSETS] = inconsistent_offsets(seen)
    anomalies[NONMONOTONIC_POLL], anomalies[POLL_SKIP] = poll_order(seen)
    anomalies[FAILED_WRITE_READ] = failed_writes_read(seen)
    anomalies[UNSEEN] = unseen(seen)
    duplicates_allowed = not idempotent
    violations = [name for name in safety_anomalies(duplicates_allowed) if anomalies[name]]
    return {
        "valid": False if violations else (True if seen.complete else None),
        "violations": violations,
        "counts": {name: len(found) for name, found in anomalies.items()},
        "anomalies": {name: found[:EXAMPLES_KEPT] for name, found in anomalies.items()},
        "stats": statistics(seen),
        "idempotent": idempotent,
        "duplicates_allowed": duplicates_allowed,
    }

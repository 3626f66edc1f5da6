"""The checker on hand-written histories: each anomaly found, nothing found where there is none."""

from weir.verify.checker import check
from weir.verify.history import FAIL, INFO, OK
from weir.verify.workload import send_fate


class Script:
    """Builds a history the way History records one, with a step of time per op."""

    def __init__(self) -> None:
        self.ops = []
        self.ids = 0

    def _op(self, process, type_, f, op_id, value, error=None):
        op = {"index": len(self.ops), "time": len(self.ops) * 0.01, "process": process, "type": type_, "f": f,
              "id": op_id, "value": value}
        if error:
            op["error"] = error
        self.ops.append(op)

    def send(self, value, partition=0, outcome=OK, offset=None, error=None):
        op_id, self.ids = self.ids, self.ids + 1
        self._op("producer-0", "invoke", "send", op_id, {"partition": partition, "value": value})
        done = {"partition": partition, "value": value}
        if outcome == OK:
            done["offset"] = offset
        self._op("producer-0", outcome, "send", op_id, done, error)
        return self

    def txn(self, writes, outcome=OK, offsets=(), error=None):
        """One transaction: writes [(partition, value)], offsets [(partition, offset, value)]."""
        op_id, self.ids = self.ids, self.ids + 1
        writes = [list(w) for w in writes]
        self._op("producer-0", "invoke", "txn", op_id, {"writes": writes, "commit": outcome != FAIL})
        self._op("producer-0", outcome, "txn", op_id,
                 {"writes": writes, "commit": outcome != FAIL, "offsets": [list(o) for o in offsets]}, error)
        return self

    def poll(self, reads, process="consumer-0.0"):
        op_id, self.ids = self.ids, self.ids + 1
        self._op(process, "invoke", "poll", op_id, None)
        self._op(process, OK, "poll", op_id, {"reads": [list(r) for r in reads]})
        return self

    def final(self, reads, complete=True):
        op_id, self.ids = self.ids, self.ids + 1
        self._op("final", "invoke", "final-read", op_id, None)
        self._op("final", OK, "final-read", op_id, {"reads": [list(r) for r in reads], "complete": complete})
        return self


def healthy() -> Script:
    s = Script().send(10, 0, OK, 0).send(11, 1, OK, 0).send(12, 0, OK, 1)
    s.poll([(0, 0, 10), (1, 0, 11)]).poll([(0, 1, 12)])
    return s.final([(0, 0, 10), (0, 1, 12), (1, 0, 11)])


def test_a_healthy_history_is_valid():
    result = check(healthy().ops)
    assert result["valid"] is True and result["violations"] == []
    assert all(count == 0 for count in result["counts"].values())
    assert result["stats"]["ok"] == 3


def test_acknowledged_write_missing_from_the_final_read_is_lost():
    s = Script().send(1, 0, OK, 0).send(2, 0, OK, 1).send(3, 0, OK, 2)
    result = check(s.final([(0, 0, 1), (0, 1, 3)]).ops)
    assert result["counts"]["lost-write"] == 1
    assert result["anomalies"]["lost-write"][0]["value"] == 2
    assert result["anomalies"]["lost-write"][0]["known_by"] == "ack"
    assert "lost-write" in result["violations"] and result["valid"] is False


def test_a_polled_value_later_missing_is_lost_even_if_its_send_was_indefinite():
    s = Script().send(1, 0, INFO, error="REQUEST_TIMED_OUT").poll([(0, 0, 1)])
    result = check(s.final([]).ops)
    assert [(a["value"], a["known_by"]) for a in result["anomalies"]["lost-write"]] == [(1, "read")]


def test_indefinite_writes_are_not_lost_whether_present_or_not():
    s = Script().send(1, 0, OK, 0).send(2, 0, INFO, error="REQUEST_TIMED_OUT")
    s.send(3, 0, INFO, error="NOT_ENOUGH_REPLICAS_AFTER_APPEND").send(4, 0, INFO, error="_MSG_TIMED_OUT")
    result = check(s.final([(0, 0, 1), (0, 1, 3)]).ops)
    assert result["valid"] is True and result["counts"]["lost-write"] == 0
    assert result["stats"]["info"] == 3 and result["stats"]["indefinite_in_final_read"] == 1


def test_a_send_never_completed_counts_as_indefinite():
    s = Script()
    s._op("producer-0", "invoke", "send", 0, {"partition": 0, "value": 5})
    result = check(s.final([]).ops)
    assert result["valid"] is True and result["stats"]["info"] == 1


def test_duplicates_are_reported_but_violate_only_idempotent_runs():
    s = Script().send(1, 0, OK, 0).final([(0, 0, 1), (0, 1, 1)])
    plain, idempotent = check(s.ops), check(s.ops, idempotent=True)
    assert plain["counts"]["duplicate"] == 1 and plain["valid"] is True
    assert plain["anomalies"]["duplicate"][0]["offsets"] == [0, 1]
    assert idempotent["valid"] is False and idempotent["violations"] == ["duplicate"]
    # even with retries=0: librdkafka resends some failed batches without counting a retry


def test_one_offset_with_two_values_is_inconsistent():
    # Acknowledged at offset 0 by an old leader; the new leader holds another value there.
    s = Script().send(1, 0, OK, 0).send(2, 0, OK, 0)
    result = check(s.final([(0, 0, 2)]).ops)
    assert result["anomalies"]["inconsistent-offsets"] == [{"partition": 0, "offset": 0, "values": [1, 2]}]
    assert set(result["violations"]) == {"inconsistent-offsets", "lost-write"}


def test_inconsistency_between_a_poll_and_the_final_read():
    s = Script().send(1, 0, INFO).send(2, 0, INFO).poll([(0, 0, 1)])
    result = check(s.final([(0, 0, 2)]).ops)
    assert result["counts"]["inconsistent-offsets"] == 1


def test_a_consumer_going_back_is_a_nonmonotonic_poll():
    s = Script().send(1, 0, OK, 0).send(2, 0, OK, 1)
    s.poll([(0, 0, 1), (0, 1, 2)]).poll([(0, 1, 2)])
    result = check(s.final([(0, 0, 1), (0, 1, 2)]).ops)
    assert result["counts"]["nonmonotonic-poll"] == 1
    found = result["anomalies"]["nonmonotonic-poll"][0]
    assert (found["offset"], found["previous_offset"]) == (1, 1)


def test_separate_consumers_and_partitions_are_judged_apart():
    s = Script().send(1, 0, OK, 0).send(2, 1, OK, 0)
    s.poll([(0, 0, 1), (1, 0, 2)], "consumer-0.0").poll([(0, 0, 1)], "consumer-0.1")
    result = check(s.final([(0, 0, 1), (1, 0, 2)]).ops)
    assert result["valid"] is True


def test_jumping_over_existing_records_is_a_poll_skip():
    s = Script()
    for i in range(4):
        s.send(i, 0, OK, i)
    s.poll([(0, 0, 0)]).poll([(0, 3, 3)])
    result = check(s.final([(0, i, i) for i in range(4)]).ops)
    assert result["counts"]["poll-skip"] == 1
    assert result["anomalies"]["poll-skip"][0]["skipped"] == 2
    assert result["counts"]["unseen"] == 2  # values 1 and 2: acknowledged, never polled


def test_gaps_that_hold_no_records_are_not_skips():
    s = Script().send(1, 0, OK, 0).send(2, 0, OK, 5).poll([(0, 0, 1), (0, 5, 2)])
    assert check(s.final([(0, 0, 1), (0, 5, 2)]).ops)["counts"]["poll-skip"] == 0


def test_reading_a_definitely_failed_write_is_an_anomaly():
    s = Script().send(1, 0, OK, 0).send(2, 0, FAIL, error="NOT_ENOUGH_REPLICAS").send(3, 0, FAIL, error="X")
    s.poll([(0, 0, 1), (0, 1, 2)])
    result = check(s.final([(0, 0, 1), (0, 1, 2), (0, 2, 3)]).ops)
    found = {a["value"]: a["seen_by"] for a in result["anomalies"]["failed-write-read"]}
    assert found == {2: "consumer-0.0", 3: "final-read"}


def test_unseen_is_informational():
    s = Script().send(1, 0, OK, 0)
    result = check(s.final([(0, 0, 1)]).ops)
    assert result["counts"]["unseen"] == 1 and result["valid"] is True


def test_without_a_complete_final_read_the_verdict_is_unknown():
    assert check(Script().send(1, 0, OK, 0).ops)["valid"] is None
    s = Script().send(1, 0, OK, 0).final([], complete=False)
    assert check(s.ops)["valid"] is None


def test_nemesis_ops_are_ignored_by_the_checker():
    s = healthy()
    s._op("nemesis", "invoke", "kill", 99, {"fault": "kill", "phase": "start", "broker": 1})
    s._op("nemesis", INFO, "kill", 99, {"fault": "kill", "phase": "start", "broker": 1})
    assert check(s.ops)["valid"] is True


def test_send_fates():
    assert send_fate("NOT_ENOUGH_REPLICAS", retries=0) == FAIL
    assert send_fate("NOT_ENOUGH_REPLICAS", retries=3) == INFO  # an earlier attempt may have landed
    assert send_fate("_QUEUE_FULL", retries=3) == FAIL          # never left the client
    for indefinite in ("REQUEST_TIMED_OUT", "NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                       "_MSG_TIMED_OUT", "_TRANSPORT", "NETWORK_EXCEPTION", "SOMETHING_NEW"):
        assert send_fate(indefinite, retries=0) == INFO


def transactions() -> Script:
    """Committed (1, 2), aborted (3, 4: offsets 1 and 1, markers at 2 and 2), committed (5, 6)."""
    s = Script().txn([(0, 1), (1, 2)], OK, [(0, 0, 1), (1, 0, 2)])
    s.txn([(0, 3), (1, 4)], FAIL, [(0, 1, 3), (1, 1, 4)], error="aborted on purpose")
    return s.txn([(0, 5), (1, 6)], OK, [(0, 3, 5), (1, 3, 6)])


def test_read_committed_history_that_skips_aborted_records_and_markers_is_valid():
    s = transactions().poll([(0, 0, 1), (0, 3, 5)]).poll([(1, 0, 2), (1, 3, 6)], process="consumer-1.0")
    result = check(s.final([(0, 0, 1), (0, 3, 5), (1, 0, 2), (1, 3, 6)]).ops, idempotent=True)
    assert result["valid"] is True, result["violations"]
    assert result["stats"]["ok"] == 4 and result["stats"]["fail"] == 2


def test_a_value_of_an_aborted_transaction_read_is_a_violation():
    s = transactions().poll([(0, 0, 1), (0, 1, 3)])
    result = check(s.final([(0, 0, 1), (0, 1, 3), (0, 3, 5), (1, 0, 2), (1, 3, 6)]).ops, idempotent=True)
    assert result["counts"]["failed-write-read"] == 1 and "failed-write-read" in result["violations"]


def test_a_transaction_half_in_the_log_is_partial_even_when_its_outcome_is_unknown():
    s = Script().txn([(0, 1), (1, 2)], INFO, [(0, 0, 1)], error="_TIMED_OUT")
    result = check(s.final([(0, 0, 1)]).ops, idempotent=True)
    assert result["counts"]["partial-transaction"] == 1 and result["valid"] is False
    whole = Script().txn([(0, 1), (1, 2)], INFO, error="_TIMED_OUT")
    assert check(whole.final([(0, 0, 1), (1, 0, 2)]).ops, idempotent=True)["valid"] is True
    assert check(whole.final([]).ops, idempotent=True)["valid"] is True


def test_a_committed_transaction_missing_from_the_final_read_is_lost():
    s = transactions()
    result = check(s.final([(0, 0, 1), (1, 0, 2)]).ops, idempotent=True)
    assert result["counts"]["lost-write"] == 2 and result["valid"] is False

"""The fetch purgatory driven without an event loop: who is woken by which news, and a parked
Fetch's life (read again on news, answered once: with records, an error, or at max_wait)."""

from weir.broker.fetch_waiters import FetchWaiters, ParkedFetch, keeps_waiting
from weir.protocol.errors import ErrorCode
from weir.protocol.hot_responses import FetchPartitionResult

A, B = ("t", 0), ("t", 1)


class Waiter:
    def __init__(self) -> None:
        self.woken = 0

    def set(self) -> None:
        self.woken += 1


def test_new_records_wake_readers_and_followers_a_new_hw_only_readers():
    waiters = FetchWaiters()
    reader, follower = Waiter(), Waiter()
    waiters.park([A], reader)
    waiters.park([A], follower, follower=True)
    waiters.notify(A, followers=False)  # the HW moved
    assert (reader.woken, follower.woken) == (1, 0)
    waiters.notify(A)  # records
    assert (reader.woken, follower.woken) == (2, 1)
    waiters.notify(B)
    assert (reader.woken, follower.woken) == (2, 1)


def test_an_unparked_fetch_is_not_woken():
    waiters = FetchWaiters()
    follower = Waiter()
    waiters.park([A, B], follower, follower=True)
    waiters.unpark([A, B], follower, follower=True)
    waiters.notify(A)
    assert follower.woken == 0


def test_fetches_are_woken_in_the_order_they_parked():
    waiters = FetchWaiters()
    order = []

    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

        def set(self) -> None:
            order.append(self.name)

    for name in "cab":
        waiters.park([A], Named(name), follower=True)
    waiters.notify(A)
    assert order == ["c", "a", "b"]


class Slice:
    def __init__(self, size: int) -> None:
        self.size = size


def results(*parts):
    return [("t", None, list(parts))]


EMPTY = FetchPartitionResult(0, ErrorCode.none, 5, 5, 0)
RECORDS = FetchPartitionResult(0, ErrorCode.none, 6, 6, 0, records=[Slice(70)])
NOT_LEADER = FetchPartitionResult(0, ErrorCode.not_leader_or_follower)


def test_a_fetch_waits_while_it_has_less_than_min_bytes_no_error_and_time():
    assert keeps_waiting(results(EMPTY, None), 1, 0.5)
    assert not keeps_waiting(results(EMPTY), 1, 0)  # max_wait is over
    assert not keeps_waiting(results(RECORDS), 1, 0.5)
    assert keeps_waiting(results(RECORDS), 100, 0.5)
    assert not keeps_waiting(results(EMPTY, NOT_LEADER), 1, 0.5)


class Shell:
    """A clock and a queue of callbacks, as a broker's loop or weir sim's would run them."""

    def __init__(self) -> None:
        self.now, self.soon, self.timers = 0, [], []

    def call_at(self, when, fn):
        self.timers.append((when, fn))

    def run_soon(self) -> None:
        while self.soon:
            self.soon.pop(0)()

    def advance(self, to) -> None:
        self.now = to
        for when, fn in [t for t in self.timers if t[0] <= to]:
            self.timers.remove((when, fn))
            fn()


def parked(waiters: FetchWaiters, shell: Shell, reads: list, answers: list, keys=(A,)) -> ParkedFetch:
    """A parked follower fetch whose reads give `reads` in turn (the last one again after)."""
    def read(first: bool):
        assert not first, "a parked fetch is read again, never first: the follower is timed once"
        return results(reads.pop(0) if len(reads) > 1 else reads[0])
    def answer(results, error):
        answers.append(results if error is None else error)
    return ParkedFetch(waiters, list(keys), follower=True, min_bytes=1, deadline=500, read=read,
                       answer=answer, clock=lambda: shell.now, call_soon=shell.soon.append,
                       call_at=shell.call_at)


def test_a_parked_fetch_is_answered_with_the_records_that_wake_it():
    waiters, shell, answers = FetchWaiters(), Shell(), []
    fetch = parked(waiters, shell, [RECORDS], answers)
    waiters.notify(A, followers=False)  # only the HW: a follower's fetch sleeps on
    shell.run_soon()
    assert answers == []
    waiters.notify(A)
    waiters.notify(A)  # news twice before it runs: one read
    shell.advance(10)
    shell.run_soon()
    assert answers == [results(RECORDS)] and fetch.answered
    waiters.notify(A)  # answered: no longer parked
    assert shell.soon == []


def test_a_parked_fetch_read_again_to_nothing_stays_parked_until_max_wait():
    waiters, shell, answers = FetchWaiters(), Shell(), []
    parked(waiters, shell, [EMPTY], answers)
    waiters.notify(A)  # e.g. records for another follower's offset
    shell.run_soon()
    assert answers == []
    shell.advance(499)
    assert answers == []
    shell.advance(500)
    assert answers == [results(EMPTY)]
    waiters.notify(A)
    assert shell.soon == []


def test_an_error_ends_the_wait():
    waiters, shell, answers = FetchWaiters(), Shell(), []
    parked(waiters, shell, [NOT_LEADER], answers)
    waiters.notify(A)  # a role change
    shell.run_soon()
    assert answers == [results(NOT_LEADER)]
    shell.advance(500)  # the timer finds it answered
    assert answers == [results(NOT_LEADER)]


def test_a_read_that_raises_fails_the_request_and_unparks_it():
    waiters, shell, answers = FetchWaiters(), Shell(), []

    def read(first: bool):
        raise OSError("the log's disk failed")
    ParkedFetch(waiters, [A], follower=False, min_bytes=1, deadline=500, read=read,
                answer=lambda results, error: answers.append(error), clock=lambda: shell.now,
                call_soon=shell.soon.append, call_at=shell.call_at)
    waiters.notify(A)
    shell.run_soon()
    assert [type(e) for e in answers] == [OSError]
    waiters.notify(A)
    assert shell.soon == []

"""FetchWaiters' bookkeeping, driven without an event loop: who is woken by which news, and when a
fetch that read before some news must not park at all."""

from weir.broker.fetch_waiters import FetchWaiters, keeps_waiting
from weir.protocol.hot_responses import FetchPartitionResult
from weir.protocol.errors import ErrorCode

A, B = ("t", 0), ("t", 1)


class Waiter:
    def __init__(self) -> None:
        self.woken = 0

    def set(self) -> None:
        self.woken += 1


def test_new_records_wake_readers_and_followers_a_new_hw_only_readers():
    waiters = FetchWaiters()
    reader, follower = Waiter(), Waiter()
    assert waiters.park([A], reader) and waiters.park([A], follower, follower=True)
    waiters.notify(A, followers=False)  # the HW moved
    assert (reader.woken, follower.woken) == (1, 0)
    waiters.notify(A)  # records
    assert (reader.woken, follower.woken) == (2, 1)


def test_news_of_another_partition_wakes_nobody():
    waiters = FetchWaiters()
    reader = Waiter()
    waiters.park([A], reader)
    waiters.notify(B)
    assert reader.woken == 0


def test_an_unparked_fetch_is_not_woken():
    waiters = FetchWaiters()
    follower = Waiter()
    waiters.park([A, B], follower, follower=True)
    waiters.unpark([A, B], follower, follower=True)
    waiters.notify(A)
    assert follower.woken == 0


def test_news_after_the_read_keeps_a_fetch_from_parking():
    waiters = FetchWaiters()
    seen = waiters.news  # the fetch reads here ...
    waiters.notify(A)  # ... a record comes before it parks
    assert not waiters.park([A], Waiter(), follower=True, since=seen)
    assert waiters.park([B], Waiter(), follower=True, since=seen)  # news of another partition: parks


def test_a_new_hw_after_the_read_parks_a_follower_but_not_a_reader():
    waiters = FetchWaiters()
    seen = waiters.news
    waiters.notify(A, followers=False)
    assert waiters.park([A], Waiter(), follower=True, since=seen)
    assert not waiters.park([A], Waiter(), since=seen)


def test_a_forgotten_partition_has_no_news():
    waiters = FetchWaiters()
    seen = waiters.news
    waiters.notify(A)
    waiters.forget(A)
    assert waiters.park([A], Waiter(), follower=True, since=seen)


def test_fetches_are_woken_in_the_order_they_parked():
    waiters = FetchWaiters()
    order = []

    class Named(Waiter):
        def __init__(self, name: str) -> None:
            super().__init__()
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


def test_a_fetch_waits_while_it_has_less_than_min_bytes_no_error_and_time():
    empty = FetchPartitionResult(0, ErrorCode.none, 5, 5, 0)
    assert keeps_waiting(results(empty, None), 1, 0.5)
    assert not keeps_waiting(results(empty), 1, 0)  # max_wait is over
    assert not keeps_waiting(results(FetchPartitionResult(0, ErrorCode.none, 5, 5, 0, records=[Slice(70)])), 1, 0.5)
    assert keeps_waiting(results(FetchPartitionResult(0, ErrorCode.none, 5, 5, 0, records=[Slice(70)])), 100, 0.5)
    assert not keeps_waiting(results(empty, FetchPartitionResult(1, ErrorCode.not_leader_or_follower)), 1, 0.5)

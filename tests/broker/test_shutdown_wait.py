"""Controlled shutdown's wait, the rule server.py and weir sim both follow."""

from types import SimpleNamespace

from weir.replication.shutdown_wait import ASK, GAVE_UP, MOVED, TIMED_OUT, WAIT, ShutdownWait


def led(awaits: bool):
    return SimpleNamespace(awaits_leadership_handover=lambda: awaits)


def asked_in(registration: int) -> ShutdownWait:
    wait = ShutdownWait(deadline=30.0, retry_backoff=5.0)
    wait.asked(registration)
    return wait


def test_a_stopping_broker_waits_for_its_handovers_until_the_deadline():
    wait = asked_in(7)
    assert wait.next_step([led(False), led(True)], 7, now=1.0) == WAIT
    assert wait.next_check(1.0) == 30.0
    assert wait.next_step([led(False), led(False)], 7, now=1.0) == MOVED
    assert wait.next_step([], 7, now=1.0) == MOVED
    assert wait.next_step([led(True)], 7, now=30.0) == TIMED_OUT
    assert wait.next_step([led(False)], 7, now=30.0) == MOVED, "moved at the deadline is moved"


def test_it_asks_again_once_registered_in_a_session_its_request_did_not_outlive():
    wait = asked_in(7)
    assert wait.next_step([led(True)], None, now=1.0) == WAIT, "not registered now: nobody to ask as"
    assert wait.next_step([led(True)], 9, now=1.0) == ASK
    wait.asked(9)
    assert wait.next_step([led(True)], 9, now=2.0) == WAIT


def test_a_request_that_failed_is_made_again_after_the_retry_backoff():
    """Kafka's broker retries a failed ControlledShutdown after controlled.shutdown.retry.backoff.ms;
    a broker whose request failed (its ZooKeeper connection down at that moment) once stopped at
    once, still leading."""
    wait = ShutdownWait(deadline=30.0, retry_backoff=5.0)
    assert wait.next_step([led(True)], 7, now=0.0) == ASK
    wait.asked(7)
    wait.ask_failed(now=1.0)
    assert wait.next_step([led(True)], 7, now=2.0) == WAIT
    assert wait.next_check(2.0) == 6.0, "woken for the retry without news"
    assert wait.next_step([led(True)], 7, now=6.0) == ASK
    wait.asked(7)
    assert wait.next_step([led(True)], 7, now=6.5) == WAIT and wait.next_check(6.5) == 30.0
    wait.ask_failed(now=28.0)
    assert wait.next_check(28.0) == 30.0, "never past the deadline"


def test_it_stops_trying_once_max_retries_requests_have_failed():
    """controlled.shutdown.max.retries: Kafka's broker makes that many attempts, then shuts down
    without a controlled shutdown; the setting once had no effect, and the broker tried until its
    deadline. A request made again in a new session is not a failure, and moved still wins."""
    wait = ShutdownWait(deadline=30.0, retry_backoff=1.0, max_attempts=2)
    wait.asked(7)
    wait.ask_failed(now=1.0)
    assert wait.next_step([led(True)], 7, now=2.0) == ASK
    wait.asked(7)
    assert wait.next_step([led(True)], 9, now=2.5) == ASK, "a new session: asked again"
    wait.asked(9)
    wait.ask_failed(now=3.0)
    assert wait.next_step([led(True)], 9, now=3.0) == GAVE_UP
    assert wait.next_step([led(False)], 9, now=3.0) == MOVED
    assert ShutdownWait(deadline=30.0, retry_backoff=1.0, max_attempts=0).max_attempts == 1, "one attempt at least"

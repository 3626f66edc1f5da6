"""Waiting on a real cluster: poll a condition (each poll a real round trip), never a bare sleep."""

import time

WAIT_S = 60


def wait_until(condition, what: str, timeout_s: float = WAIT_S, poll_s: float = 0.2):
    """Poll `condition` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll_s)

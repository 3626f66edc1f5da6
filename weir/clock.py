"""The shells' wall clock: the one place they read the time of day from (cores take `now` as a
parameter and read no clock)."""

import time


def now_ms() -> int:
    """Milliseconds since the epoch, as Kafka's timestamps count them."""
    return int(time.time() * 1000)

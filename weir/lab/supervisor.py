"""`weir up`'s supervision, without processes: what happened to a broker and when to start it again.

A broker that dies (any exit `weir up` did not ask for) is started again after a back-off: 1 s,
doubled for each death within a minute of its last start (a broker that keeps failing is not
restarted in a hot loop), at most 30 s. One that `weir lab stop` stopped stays down until
`weir lab start`. `--no-restart` leaves dead brokers down too.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

ALIVE = ("starting", "running", "paused")  # BrokerLife.state of a broker with a process
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
STABLE_AFTER_S = 60.0


def describe_exit(returncode: int) -> str:
    """A Popen return code as an operator reads it: 'exit code 1', 'killed by SIGKILL'."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


@dataclass
class BrokerLife:
    """One broker's state as `weir up` sees it."""
    broker_id: int
    state: str = "starting"  # starting | running | paused | stopped | dead
    restart_at: float | None = None
    backoff_s: float | None = None  # the next restart's delay; None: the policy's first
    started_at: float = 0.0
    deaths: list[str] = field(default_factory=list)


class RestartPolicy:
    def __init__(self, restart: bool = True, first_backoff_s: float = FIRST_BACKOFF_S,
                 max_backoff_s: float = MAX_BACKOFF_S, stable_after_s: float = STABLE_AFTER_S) -> None:
        self.restart = restart
        self.first_backoff_s = first_backoff_s
        self.max_backoff_s = max_backoff_s
        self.stable_after_s = stable_after_s

    def started(self, life: BrokerLife, now: float) -> None:
        life.state, life.restart_at, life.started_at = "starting", None, now

    def died(self, life: BrokerLife, returncode: int, now: float) -> str:
        """The process ended without being asked to: returns what to print."""
        how = describe_exit(returncode)
        life.deaths.append(how)
        life.state = "dead"
        if not self.restart:
            return f"broker {life.broker_id} died ({how}); left down (--no-restart)"
        if life.backoff_s is None or now - life.started_at >= self.stable_after_s:
            life.backoff_s = self.first_backoff_s
        delay = life.backoff_s
        life.backoff_s = min(self.max_backoff_s, life.backoff_s * 2)
        life.restart_at = now + delay
        return f"broker {life.broker_id} died ({how}); restarting it in {delay:g} s"

    def stopped(self, life: BrokerLife) -> None:
        life.state, life.restart_at = "stopped", None

    def due(self, life: BrokerLife, now: float) -> bool:
        return life.state == "dead" and life.restart_at is not None and now >= life.restart_at

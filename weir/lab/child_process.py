"""Child processes that die with the process that started them, even when it is SIGKILLed:
`weir up`'s, the bench's and the tests' ZooKeeper and brokers leave no orphans behind.

The child asks the kernel for a SIGKILL when its parent dies (Linux's prctl PR_SET_PDEATHSIG,
through ctypes), then execs the program; the setting survives the exec of any program that is not
set-user-ID, as python and java are not. The asking is a small Python program the child runs
first (DIES_WITH_PARENT), not a preexec_fn: a preexec_fn makes CPython run every at-fork handler
in the parent, and a PySpark session in the same process (a test's, a bench's) then no longer
finds its registered Python data sources. Two traps:

- The kernel's "parent" is the *thread* that forked the child, not its process: a broker that a
  `weir verify` nemesis thread restarted would be killed the moment that thread ended. So every
  child is forked by one thread kept for the purpose, which lives as long as the process does,
  whichever thread asks for the child.
- A parent that dies between the fork and the prctl leaves its child an orphan already, which no
  signal will ever reach: the child checks that its parent is still the process that forked it,
  and exits at once if not.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from concurrent.futures import Future

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
START_TIMEOUT_S = 60  # for the forking thread to have started a child (a fork and an exec)

# argv: the parent's pid, then the program and its arguments
DIES_WITH_PARENT = f"""
import ctypes, os, sys
if ctypes.CDLL(None, use_errno=True).prctl({PR_SET_PDEATHSIG}, {int(signal.SIGKILL)}, 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_PDEATHSIG) failed: " + os.strerror(ctypes.get_errno()))
if os.getppid() != int(sys.argv[1]):  # the parent died before the prctl
    os._exit(1)
os.execvp(sys.argv[2], sys.argv[2:])
"""

_requests: queue.Queue = queue.Queue()
_forker: threading.Thread | None = None
_forker_started = threading.Lock()


def start_child(args: list[str], **popen_arguments) -> subprocess.Popen:
    """`subprocess.Popen(args, **popen_arguments)`, for a child SIGKILLed when this process dies."""
    global _forker
    with _forker_started:
        if _forker is None:
            _forker = threading.Thread(target=_fork_children, daemon=True, name="weir-child-forker")
            _forker.start()
    started: Future = Future()
    _requests.put((args, popen_arguments, started))
    return started.result(timeout=START_TIMEOUT_S)


def _fork_children() -> None:
    while True:
        args, popen_arguments, started = _requests.get()
        try:
            started.set_result(subprocess.Popen(
                [sys.executable, "-S", "-c", DIES_WITH_PARENT, str(os.getpid()), *args], **popen_arguments))
        except BaseException as e:  # the caller's to see, in its own thread
            started.set_exception(e)

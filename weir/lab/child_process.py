"""Child processes that die with the process that started them, even when it is SIGKILLed:
`weir up`'s, the bench's and the tests' ZooKeeper and brokers leave no orphans behind.

The child asks the kernel for a SIGKILL when its parent dies (Linux's prctl PR_SET_PDEATHSIG,
through ctypes, after the fork and before the exec; the setting survives the exec of any program
that is not set-user-ID, as python and java are not). Two traps:

- The kernel's "parent" is the *thread* that forked the child, not its process: a broker that a
  `weir verify` nemesis thread restarted would be killed the moment that thread ended. So every
  child is forked by one thread kept for the purpose, which lives as long as the process does,
  whichever thread asks for the child.
- A parent that dies between the fork and the prctl leaves its child an orphan already, which no
  signal will ever reach: the child checks that its parent is still the process that forked it,
  and exits at once if not.
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import threading
from concurrent.futures import Future

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
START_TIMEOUT_S = 60  # for the forking thread to have started a child (a fork and an exec)

_prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the forked child
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_prctl.restype = ctypes.c_int

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
            started.set_result(subprocess.Popen(args, preexec_fn=_dies_with(os.getpid()), **popen_arguments))
        except BaseException as e:  # the caller's to see, in its own thread
            started.set_exception(e)


def _dies_with(parent: int):
    def ask_for_sigkill_when_parent_dies() -> None:  # in the child, between fork and exec
        if _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:  # it died before the prctl
            os._exit(1)
    return ask_for_sigkill_when_parent_dies

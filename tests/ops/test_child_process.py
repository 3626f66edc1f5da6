"""Children that die with their parent (weir/lab/child_process.py), whichever thread started them."""

import os
import signal
import subprocess
import sys

from processes import gone, wait_until_gone

PARENT = """
import os, sys, threading, time
from weir.lab.child_process import start_child

children = []
starter = threading.Thread(target=lambda: children.append(start_child(["sleep", "600"])))
starter.start()
starter.join()
deadline = time.monotonic() + 10
while os.path.exists(f"/proc/self/task/{starter.native_id}"):  # the thread's end, as the kernel sees it
    assert time.monotonic() < deadline, "the starting thread did not end"
    time.sleep(0.01)
print(children[0].pid, flush=True)
sys.stdin.read()  # until the test kills us
"""


def test_a_child_started_by_a_thread_that_ended_lives_on_and_dies_with_its_parent():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        child = int(parent.stdout.readline())
        assert not gone(child), "killed when the thread that started it ended"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        wait_until_gone([child], "the child of a SIGKILLed parent")
    finally:
        parent.kill()
        parent.wait(10)

"""A real broker process for integration tests, on a free loopback port."""

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

READY_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProcess:
    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.overrides = {"log.dirs": str(data_dir), "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                          **(overrides or {})}
        self.proc: subprocess.Popen | None = None
        self.log_lines: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "BrokerProcess":
        args = [sys.executable, "-m", "weir.cli", "broker"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     stdin=subprocess.DEVNULL)
        ready = threading.Event()

        def pump(stream):
            for line in stream:
                self.log_lines.append(line)
                if "ready on" in line:
                    ready.set()
            ready.set()  # process ended

        threading.Thread(target=pump, args=(self.proc.stdout,), daemon=True).start()
        if not ready.wait(READY_TIMEOUT_S) or self.proc.poll() is not None:
            self.kill()
            raise RuntimeError("broker did not start:\n" + "".join(self.log_lines))
        return self

    def stop(self) -> None:
        """Clean shutdown (SIGTERM), as an operator would."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)

    def kill(self) -> None:
        """kill -9: no shutdown work at all."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def output(self) -> str:
        return "".join(self.log_lines)

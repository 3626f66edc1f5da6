"""A standalone ZooKeeper server that Weir runs itself, as a plain java process on loopback.

ZooKeeper comes from Debian's `zookeeper` package (3.8; not `zookeeperd`, which starts a system
service). Its jars land in /usr/share/java; we start
`java -cp <jars> org.apache.zookeeper.server.ZooKeeperServerMain <our zoo.cfg>` directly, with our
own config and log4j settings, so that everything — snapshots, transaction logs, the server log and
the JVM's own output — lives in one directory we choose:

    <data_dir>/zoo.cfg              generated configuration
    <data_dir>/log4j.properties     generated logging configuration
    <data_dir>/data/                snapshots and transaction logs (ZooKeeper's dataDir)
    <data_dir>/zookeeper.log        the server log
    <data_dir>/zookeeper.out        the JVM's stdout/stderr (start-up failures land here)
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from weir.lab.child_process import start_child

log = logging.getLogger(__name__)

ZOOKEEPER_PACKAGE = "zookeeper"
DEBIAN_JAVA_DIR = Path("/usr/share/java")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

# zookeeper.jar's manifest Class-Path names its other dependencies (netty, jute, jackson, ...), but
# not an slf4j binding: Debian's package logs through log4j 1.2, so we add the binding ourselves.
_CLASSPATH_JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-log4j12.jar",
                   "log4j-1.2.jar")

_JVM_OPTIONS = (
    "-Xms16m", "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",  # C1 only: a noticeably faster start, plenty for a coordination store
    "-XX:-UsePerfData",         # no /tmp/hsperfdata_* files
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.admin.enableServer=false",
    "-Dzookeeper.jmx.log4j.disable=true",
)

_STARTUP_ATTEMPTS = 3  # only when we chose the port and someone else took it in the meantime


class ZooKeeperNotInstalled(RuntimeError):
    """The Debian zookeeper package (or java) is missing."""


class ZooKeeperStartError(RuntimeError):
    """The server process exited or did not start serving in time."""


def zookeeper_classpath(java_dir: Path = DEBIAN_JAVA_DIR) -> str:
    """The java classpath for running the ZooKeeper server from Debian's `zookeeper` package."""
    jars = [java_dir / name for name in _CLASSPATH_JARS]
    missing = [str(jar) for jar in jars if not jar.is_file()]
    if missing:
        raise ZooKeeperNotInstalled(
            f"ZooKeeper is not installed (missing {', '.join(missing)}): install the Debian package "
            f"with `apt-get install --no-install-recommends {ZOOKEEPER_PACKAGE}` (not zookeeperd), "
            f"or run scripts/bootstrap")
    return os.pathsep.join(str(jar) for jar in jars)


_random = random.SystemRandom()
_handed_out: set[int] = set()  # never twice from one process: the first may not be bound yet


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on, for a server started next. Taken below the kernel's ephemeral
    range: a port from that range (what binding port 0 gives) can become the local port of any
    outgoing connection before its server binds it ("address already in use")."""
    low = _ephemeral_range_start()
    for _ in range(200):
        port = _random.randrange(max(1024, low - 16384), low)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_ports(count: int, host: str = "127.0.0.1") -> int:
    """The first of `count` consecutive ports nothing listens on (a cluster's brokers, say), each
    handed out as `free_port`'s are: a later free_port must not give one of them to another server."""
    for _ in range(100):
        base = free_port(host)
        rest = range(base + 1, base + count)
        if base + count > 65536 or any(port in _handed_out for port in rest):
            continue
        try:
            for port in rest:
                with socket.socket() as s:
                    s.bind((host, port))
        except OSError:
            continue
        _handed_out.update(rest)
        return base
    raise RuntimeError(f"no {count} consecutive free ports")


def _ephemeral_range_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def four_letter_word(host: str, port: int, command: str, timeout_s: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command (ruok, srvr, stat) and return the whole answer."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(command.encode("ascii"))
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer:
    """One standalone ZooKeeper on 127.0.0.1, run as a child java process in its own process group,
    which dies with the process that started it (child_process.py).

    `port=None` picks a free port at the first start; the port is kept across restarts so clients
    can reconnect. `tick_time_ms` is small by default so that short session timeouts are honoured:
    ZooKeeper clamps a client's requested timeout to [2, 20] ticks unless told otherwise, and we
    set the bounds explicitly (`min_session_timeout_ms`, `max_session_timeout_ms`).
    """

    host = "127.0.0.1"

    def __init__(self, data_dir: Path, port: int | None = None, tick_time_ms: int = 500, *,
                 min_session_timeout_ms: int | None = None, max_session_timeout_ms: int = 60_000,
                 java: str = "java") -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self._port_chosen_by_us = port is None
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms or 2 * tick_time_ms
        self.max_session_timeout_ms = max(max_session_timeout_ms, self.min_session_timeout_ms)
        self.java = java
        self._proc: subprocess.Popen | None = None
        self._paused = False
        self._log_offsets: dict[Path, int] = {}  # where this launch's output starts in each file

    # -- paths and properties ---------------------------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def output_path(self) -> Path:
        return self.data_dir / "zookeeper.out"

    @property
    def connect_string(self) -> str:
        if self.port is None:
            raise RuntimeError("ZooKeeper has no port yet: start it first")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The pid of the java process last started (it may have ended since)."""
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def paused(self) -> bool:
        return self._paused and self.running

    # -- lifecycle --------------------------------------------------------------------------

    def command(self) -> list[str]:
        """The java command line that runs this server."""
        java = shutil.which(self.java)
        if java is None:
            raise ZooKeeperNotInstalled(
                f"`{self.java}` not found on PATH: ZooKeeper needs a Java runtime (the Debian "
                f"{ZOOKEEPER_PACKAGE} package pulls one in)")
        return [java, *_JVM_OPTIONS,
                f"-Dlog4j.configuration=file:{self.data_dir.resolve() / 'log4j.properties'}",
                "-cp", zookeeper_classpath(), MAIN_CLASS, str(self.config_path.resolve())]

    def start(self, timeout_s: float = 30) -> "ZooKeeperServer":
        """Launch the server and return once it really serves requests."""
        if self.running:
            raise RuntimeError(f"ZooKeeper already running (pid {self.pid})")
        zookeeper_classpath()  # fail early, naming the package, before creating anything
        for attempt in range(1, _STARTUP_ATTEMPTS + 1):
            if self.port is None:
                self.port = free_port(self.host)
            try:
                self._launch_and_wait(timeout_s)
                self._port_chosen_by_us = False  # keep this port across restarts from now on
                return self
            except ZooKeeperStartError as e:
                if (self._port_chosen_by_us and attempt < _STARTUP_ATTEMPTS
                        and "Address already in use" in str(e)):
                    log.warning("ZooKeeper port %d was taken; trying another", self.port)
                    self.port = None
                    continue
                raise
        raise AssertionError("unreachable")

    def _launch_and_wait(self, timeout_s: float) -> None:
        self._write_config()
        command = self.command()
        self._log_offsets = {path: path.stat().st_size if path.exists() else 0
                             for path in (self.output_path, self.log_path)}
        log.info("starting ZooKeeper on %s: %s", self.connect_string, " ".join(command))
        with open(self.output_path, "ab") as out:
            self._proc = start_child(command, cwd=self.data_dir, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self._paused = False
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc.poll() is not None:
                raise ZooKeeperStartError(
                    f"ZooKeeper exited with status {self._proc.returncode} while starting"
                    f"{self._diagnostics()}")
            if self._serving():
                log.info("ZooKeeper serving on %s (pid %d)", self.connect_string, self.pid)
                return
            if time.monotonic() >= deadline:
                self.kill()
                raise ZooKeeperStartError(
                    f"ZooKeeper did not serve on {self.connect_string} within {timeout_s}s"
                    f"{self._diagnostics()}")
            time.sleep(0.05)  # poll interval, not a readiness guess

    def _serving(self) -> bool:
        # `ruok` answers imok as soon as the socket is up; `srvr` reports the mode only once the
        # database is loaded and the server is really running.
        try:
            return "Mode: standalone" in self.four_letter_word("srvr", timeout_s=1.0)
        except OSError:
            return False

    def four_letter_word(self, command: str, timeout_s: float = 2.0) -> str:
        return four_letter_word(self.host, self.port, command, timeout_s)

    def stop(self, timeout_s: float = 10) -> None:
        """Clean shutdown: SIGTERM, then SIGKILL if still alive after `timeout_s`. Idempotent."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        self._signal(signal.SIGTERM)
        self._signal(signal.SIGCONT)  # a paused JVM would never act on the SIGTERM
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("ZooKeeper (pid %d) ignored SIGTERM for %ss; killing it", proc.pid, timeout_s)
            self.kill()
        self._paused = False

    def kill(self) -> None:
        """SIGKILL: no shutdown work at all. Idempotent."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        self._signal(signal.SIGKILL)
        proc.wait()
        self._paused = False

    def pause(self) -> None:
        """SIGSTOP the server: connections stay open but nothing is answered."""
        self._require_running()
        self._signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONT a paused server."""
        self._require_running()
        self._signal(signal.SIGCONT)
        self._paused = False

    def __enter__(self) -> "ZooKeeperServer":
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperServer({str(self.data_dir)!r}, port={self.port}, pid={self.pid})"

    # -- internals --------------------------------------------------------------------------

    def _require_running(self) -> None:
        if not self.running:
            raise RuntimeError("ZooKeeper is not running")

    def _signal(self, sig: int) -> None:
        # Only while the child is unreaped (poll() is None), so its pid — which is also its
        # process group id, thanks to start_new_session — cannot have been reused.
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, sig)
            except ProcessLookupError:
                pass

    def _write_config(self) -> None:
        data = self.data_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = {
            "tickTime": self.tick_time_ms,
            "minSessionTimeout": self.min_session_timeout_ms,
            "maxSessionTimeout": self.max_session_timeout_ms,
            "dataDir": data.resolve(),
            "clientPortAddress": self.host,
            "clientPort": self.port,
            "maxClientCnxns": 0,  # no per-address limit: every client here comes from 127.0.0.1
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat",
        }
        self.config_path.write_text("".join(f"{key}={value}\n" for key, value in config.items()))
        (self.data_dir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.RollingFileAppender\n"
            f"log4j.appender.FILE.File={self.log_path.resolve()}\n"
            "log4j.appender.FILE.MaxFileSize=10MB\n"
            "log4j.appender.FILE.MaxBackupIndex=3\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n\n")

    def _diagnostics(self) -> str:
        parts = []
        for path, offset in self._log_offsets.items():
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    tail = f.read().decode("utf-8", "replace").splitlines()[-20:]
            except OSError:
                continue
            if tail:
                parts.append(f"\n--- {path} (last lines) ---\n" + "\n".join(tail))
        return "".join(parts)

"""Apache Kafka's Java client (kafka-clients 3.9.1) for tests: its jars come from the PyPI wheel
that redistributes them (shigawire-apache-flink-libraries, pyflink/lib/*.jar), fetched with pip
on first use and kept, with the compiled test programs of tests/java, under .venv/java-clients
(one fetch per machine; a lock keeps parallel test workers from fetching twice)."""

import fcntl
import json
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

WHEEL = "shigawire-apache-flink-libraries==2.0.0.post1"
JARS = ("kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar")
SOURCES = Path(__file__).parent / "java"
CACHE = Path(__file__).parent.parent / ".venv" / "java-clients"  # the checkout's .venv (scripts/bootstrap)


def classpath() -> str:
    """The jars and the compiled programs, fetched and built if need be."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all((CACHE / jar).exists() for jar in JARS):
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--disable-pip-version-check",
                            WHEEL, "-d", str(CACHE / "wheel")], check=True, timeout=600)
            [wheel] = (CACHE / "wheel").glob("*.whl")
            with zipfile.ZipFile(wheel) as archive:
                for jar in JARS:
                    (CACHE / jar).write_bytes(archive.read(f"pyflink/lib/{jar}"))
            wheel.unlink()
        jars = ":".join(str(CACHE / jar) for jar in JARS)
        classes = CACHE / "classes"
        for source in SOURCES.glob("*.java"):
            built = classes / (source.stem + ".class")
            if not built.exists() or built.stat().st_mtime < source.stat().st_mtime:
                subprocess.run(["javac", "-d", str(classes), "-cp", jars, str(source)], check=True, timeout=120)
    return f"{jars}:{classes}"


def quota_clients(bootstrap: str, *steps: list[str], timeout_s: float = 120) -> list[dict]:
    """Run QuotaClients' steps in one JVM; each step's JSON line."""
    args = []
    for step in steps:
        args += ([] if not args else ["--"]) + list(step)
    done = subprocess.run(["java", "-cp", classpath(), "QuotaClients", bootstrap, *args], capture_output=True,
                          text=True, timeout=timeout_s)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


class JavaMember:
    """A Kip848Member process: `log` gets (partition, offset, committed), `assignment` its partitions."""

    def __init__(self, bootstrap: str, group: str, topic: str, log: list) -> None:
        self.log = log
        self.assignment: list[int] = []
        self.lines: list[str] = []
        self.process = subprocess.Popen(["java", "-cp", classpath(), "Kip848Member", bootstrap, group, topic],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            words = line.split()
            if words[:1] == ["assignment"]:
                self.assignment = [int(w) for w in words[1:]]
            elif words[:1] == ["record"] and len(words) == 4:
                self.log.append((int(words[1]), int(words[2]), words[3] == "true"))
            else:
                self.lines.append(line.rstrip())

    def leave(self) -> None:
        """Close the consumer (it leaves the group) and wait for the process."""
        self.process.stdin.write("stop\n")
        self.process.stdin.flush()
        self.process.wait(60)
        self.reader.join(10)
        assert "closed" in self.lines, self.lines[-20:]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

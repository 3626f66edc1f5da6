"""Apache kafka-clients 3.9.1, the Java client, for tests: its jars come in the PyPI wheel
shigawire-apache-flink-libraries (pyflink/lib), which the first test to need them downloads with
pip and unpacks into tests/java/.jars; tests/java/*.java are compiled once per test process."""

import functools
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

JAVA_DIR = Path(__file__).resolve().parent.parent / "java"
JARS_DIR = JAVA_DIR / ".jars"
WHEEL = "shigawire-apache-flink-libraries"
JARS = ("kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar")
KAFKA_VERSION = "3.9.1"


def _kafka_version(jar: Path) -> str:
    with zipfile.ZipFile(jar) as z:
        text = z.read("kafka/kafka-version.properties").decode()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)["version"].strip()


def _fetch_jars() -> None:
    with tempfile.TemporaryDirectory(prefix="weir-kafka-java-") as download:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--disable-pip-version-check",
                        "--dest", download, WHEEL], check=True, timeout=600)
        [wheel] = Path(download).glob("*.whl")
        JARS_DIR.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as z:
            for name in JARS:  # each in place at once: test processes may fetch side by side
                partial = JARS_DIR / f".{name}.{os.getpid()}"
                partial.write_bytes(z.read(f"pyflink/lib/{name}"))
                partial.replace(JARS_DIR / name)


@functools.cache
def classpath() -> str:
    """The jars and tests/java's classes, compiled into a fresh directory."""
    if not all((JARS_DIR / name).exists() for name in JARS):
        _fetch_jars()
    version = _kafka_version(JARS_DIR / "kafka-clients.jar")
    assert version == KAFKA_VERSION, f"{WHEEL} carries kafka-clients {version}, not {KAFKA_VERSION}"
    classes = tempfile.mkdtemp(prefix="weir-java-classes-")
    jars = ":".join(str(JARS_DIR / name) for name in JARS)
    subprocess.run(["javac", "-nowarn", "-cp", jars, "-d", classes, *map(str, JAVA_DIR.glob("*.java"))],
                   check=True, capture_output=True, timeout=300)
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

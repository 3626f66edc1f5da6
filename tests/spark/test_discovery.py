"""`format("weir")` is found wherever Spark runs, with the set-up scripts/bootstrap makes (the
project installed editable in compat mode, so the venv's .pth puts pyspark_weir on sys.path,
where pkgutil.iter_modules sees it): a pipeline run from a directory outside the repository,
with no register call, in local mode and on a standalone cluster of a master and two workers
started from PySpark's own jars."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_until

PIPELINE = Path(__file__).parent / "discovery_pipeline.py"


def activated_venv() -> dict:
    """The environment of a shell that sourced the venv's bin/activate: its python is `python3`
    on the PATH, which Spark runs its Python workers (and the data source lookup) with unless
    PYSPARK_PYTHON names another; no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "PYSPARK_PYTHON")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["VIRTUAL_ENV"] = sys.prefix
    return env


def run_pipeline(cwd: Path, master: str, bootstrap: str, topic: str) -> str:
    env = activated_venv()
    result = subprocess.run([sys.executable, str(PIPELINE), master, bootstrap, topic], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, "\n".join(line for line in result.stderr.splitlines() if "ERROR" in line or "Caused" in line)[-4000:] or result.stderr[-4000:]
    return result.stdout.strip().splitlines()[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home_of_pyspark(tmp_path: Path) -> Path:
    """A SPARK_HOME a worker launches executors from: PySpark's jars, and the RELEASE file that
    tells Spark's launcher a distribution's layout (the pip package ships neither a RELEASE nor
    the build tree the launcher otherwise looks for)."""
    import pyspark
    home = tmp_path / "spark-home"
    home.mkdir()
    (home / "RELEASE").write_text(f"Spark {pyspark.__version__} (PySpark's jars)\n")
    (home / "jars").symlink_to(Path(pyspark.__file__).parent / "jars")
    return home


@pytest.fixture
def standalone_cluster(tmp_path):
    """spark://127.0.0.1:PORT: a master and two one-core workers, each a JVM on PySpark's jars."""
    home = spark_home_of_pyspark(tmp_path)
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    env = {**activated_venv(), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(home), "SPARK_SCALA_VERSION": "2.13"}
    commands = [["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                 "--webui-port", str(free_port())]]
    commands += [["org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1", "--cores", "1",
                  "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(tmp_path / f"work-{i}")]
                 for i in range(2)]
    logs = [tmp_path / f"spark-{i}.log" for i in range(len(commands))]
    processes = []
    try:
        for command, log in zip(commands, logs):
            with open(log, "w") as out:
                processes.append(subprocess.Popen(["java", "-Xmx512m", "-cp", str(home / "jars" / "*"), *command],
                                                  cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT))
        wait_until(lambda: logs[0].read_text().count("Registering worker") == 2, "two workers registered",
                   timeout_s=120)
        yield master_url
    finally:
        for process in processes:
            process.kill()
            process.wait()


# CI runs local mode; WEIR_FULL=1 adds the standalone cluster (three JVMs more, ~2 min on two busy cores)
MASTERS = ["local[2]"] + (["standalone"] if os.environ.get("WEIR_FULL") else [])


@pytest.mark.parametrize("master", MASTERS)
def test_a_pipeline_outside_the_repository_finds_the_source(broker, tmp_path, request, master):
    """On the cluster, both workers' executors run the venv's python (python3 on their PATH),
    each writing and reading a partition."""
    url = request.getfixturevalue("standalone_cluster") if master == "standalone" else master
    assert run_pipeline(tmp_path, url, broker.bootstrap, "found") == "10 True"

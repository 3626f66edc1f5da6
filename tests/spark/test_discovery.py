"""`format("weir")` is found wherever Spark runs, with the set-up scripts/bootstrap makes (the
project installed editable in compat mode, so the venv's .pth puts pyspark_weir on sys.path,
where pkgutil.iter_modules sees it): a pipeline run from a directory outside the repository,
with no register call, in local mode."""

import os
import subprocess
import sys
from pathlib import Path

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


def test_a_pipeline_outside_the_repository_finds_the_source_in_local_mode(broker, tmp_path):
    assert run_pipeline(tmp_path, "local[2]", broker.bootstrap, "found-locally") == "10 True"

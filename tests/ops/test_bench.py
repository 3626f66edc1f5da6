"""`weir bench` as a user runs it: a real cluster, real confluent-kafka, and nothing left behind."""

import os
import subprocess
import sys


def test_a_bench_run_prints_its_figures_and_leaves_no_cluster_data_in_the_temp_dir(tmp_path):
    run = subprocess.run([sys.executable, "-m", "weir.cli", "bench", "produce", "--records", "2000", "--rounds", "1"],
                         env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=180,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "records/s" in run.stdout
    assert list(tmp_path.iterdir()) == []


def test_the_leader_bench_drives_the_brokers_handlers_and_leaves_nothing_in_the_temp_dir(tmp_path):
    """Its cycles assert that they went the way a broker's do (the HW follows every record), so a
    change that broke the path would fail here rather than print a fast figure."""
    run = subprocess.run([sys.executable, "-m", "weir.cli", "bench", "leader", "--records", "300", "--rounds", "1"],
                         env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "leader CPU per record: RF=3 acks=all" in run.stdout
    assert list(tmp_path.iterdir()) == []

"""`weir bench` as a user runs it: real Weir code, real confluent-kafka, and nothing left behind."""

import os
import subprocess
import sys


def bench(tmp_path, *args: str) -> str:
    """`weir bench ARGS`'s output, having checked that it left nothing in the temp dir."""
    run = subprocess.run([sys.executable, "-m", "weir.cli", "bench", *args, "--rounds", "1"],
                         env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=180,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout + run.stderr
    assert list(tmp_path.iterdir()) == []
    return run.stdout


def test_a_bench_run_prints_its_figures_and_leaves_no_cluster_data_in_the_temp_dir(tmp_path):
    assert "records/s" in bench(tmp_path, "produce", "--records", "2000")


def test_the_leader_bench_drives_the_brokers_handlers_and_leaves_nothing_in_the_temp_dir(tmp_path):
    """Its cycles assert that they went the way a broker's do (the HW follows every record: with the
    followers' own fetchers too, that they fetched and appended it), so a change that broke the path
    would fail here rather than print a fast figure."""
    printed = bench(tmp_path, "leader", "--records", "300")
    assert "leader CPU per record: RF=3 acks=all" in printed
    assert "three brokers' CPU per RF=3 acks=all record, the followers' fetchers included" in printed
    assert "its caches evicted before each request" in printed

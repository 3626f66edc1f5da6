"""`weir bench` as a user runs it: real Weir code, real confluent-kafka, and nothing left behind."""

import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest


def bench(tmp_path, *args: str) -> str:
    """`weir bench ARGS`'s output, having checked that it left nothing in the temp dir."""
    run = subprocess.run([sys.executable, "-m", "weir.cli.main", "bench", *args, "--rounds", "1"],
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
    assert "in 6 partitions of 76" in printed


def test_the_sink_with_followers_answers_acks_all_only_once_both_followers_echoed_the_records():
    """The latency floor `weir bench all` prints beside RF=3 acks=all is a real round trip through
    two follower processes: with one of them stopped, an acks=all record is not acknowledged."""
    from confluent_kafka import KafkaException, Producer

    from weir.bench.clusters import BENCH_TOPIC, _start_sink
    from weir.lab.zookeeper_server import free_port

    port = free_port()
    sink = _start_sink(port, 1, 100, followers=2)
    try:
        followers = [int(pid) for pid in open(f"/proc/{sink.pid}/task/{sink.pid}/children").read().split()]
        assert len(followers) == 2

        def produce_one() -> None:
            producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all",
                                 "message.timeout.ms": 3000, "retries": 0})
            outcome = []
            producer.produce(BENCH_TOPIC, b"v", partition=0, on_delivery=lambda err, msg: outcome.append(err))
            producer.flush(10)
            assert outcome, "the delivery report never came"
            if outcome[0] is not None:
                raise KafkaException(outcome[0])

        produce_one()
        os.kill(followers[1], signal.SIGSTOP)
        try:
            with pytest.raises(KafkaException, match="timed out"):
                produce_one()
        finally:
            os.kill(followers[1], signal.SIGCONT)
    finally:
        sink.terminate()
        sink.wait(30)
    for pid in followers:  # each exits when the sink's end of its connection closes
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{pid}") and "zombie" not in open(f"/proc/{pid}/status").read().lower():
            assert time.monotonic() < deadline, f"follower {pid} outlived the sink"
            time.sleep(0.05)


def test_the_scale_bench_prints_every_figure_of_a_size(tmp_path):
    printed = bench(tmp_path, "scale", "--partitions", "30", "--batch", "10", "--idle-seconds", "1")
    assert "30 partitions, RF=3, 3 brokers, created 10 at a time" in printed, printed
    first, last = re.search(r"first batch ([\d.]+) s, last \(batch 3\) ([\d.]+) s", printed).groups()
    assert float(first) > 0 and float(last) > 0
    cores = float(re.search(r"idle after creation: ([\d.]+) CPU cores", printed).group(1))
    assert 0 <= cores <= os.cpu_count()
    rows = re.findall(r"^  (\d)" + r" +([-\d.,]+)" * 9 + "$", printed, re.MULTILINE)
    assert [row[0] for row in rows] == ["0", "1", "2"], printed
    for row in rows:
        replicas, fds, fds_empty, fds_per_replica, fds_added, rss, rss_empty, kib_per_replica, kib_added = (
            float(figure.replace(",", "")) for figure in row[1:])
        assert replicas == 30  # RF=3 on three brokers: each hosts every partition
        assert fds > fds_empty > 0 and fds_per_replica > 0 and fds_added > 0
        assert rss > 0 and rss_empty > 0 and kib_per_replica > 0 and math.isfinite(kib_added)
    failover = re.search(r"kill -9 of broker \d \(leader of (\d+) partitions.*\); every partition led again after "
                         r"([\d.]+) s", printed)
    assert failover is not None, printed
    assert int(failover.group(1)) > 0 and math.isfinite(float(failover.group(2)))
    rejoin = re.search(r"rejoin: broker (\d) restarted; in every ISR again after ([\d.]+) s", printed)
    assert rejoin is not None and rejoin.group(1) in failover.group(0), printed


def test_the_scale_bench_gives_up_on_a_wedged_cluster_saying_what_timed_out():
    """ZooKeeper paused: CreateTopics cannot be carried out, and the batch's bound ends the wait."""
    from confluent_kafka.admin import AdminClient

    from weir.bench.clusters import BenchTimedOut, _discard, _scratch_cluster
    from weir.bench.scale import create_batch

    cluster = _scratch_cluster(3)
    try:
        cluster.start()
        cluster.zookeeper.pause()
        with pytest.raises(BenchTimedOut, match="CreateTopics of scale-wedged: .* no response within 2s"):
            create_batch(cluster.bootstrap, AdminClient({"bootstrap.servers": cluster.bootstrap}), "scale-wedged",
                         10, timeout_s=2)
    finally:
        _discard(cluster)

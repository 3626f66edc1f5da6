"""Fuzzed produce traffic (tests/integration/produce_fuzzer.py) costs no partition, no record and
no broker: afterwards the broker serves, every partition takes writes, every stored record reads
back through a real consumer, what was acknowledged before the fuzzing is unchanged, and a kill -9
and restart recovers exactly what was there, dropping nothing.

Bounded for CI (8 s of fuzzing, seed 1); a longer run with new inputs: WEIR_FUZZ_SECONDS=600
WEIR_FUZZ_SEED=random (the seed is printed; WEIR_FUZZ_SEED=N replays one), e.g.
`WEIR_FUZZ_SECONDS=600 WEIR_FUZZ_SEED=random .venv/bin/python -m pytest -s tests/integration/test_produce_fuzz.py`.
"""

import time

from clients import confluent_consume, confluent_produce
from fuzz_budget import fuzz_budget
from produce_fuzzer import fuzz
from raw_protocol import RawClient, assert_healthy, create_topic, fetch, list_offset

SECONDS, SEED = fuzz_budget("WEIR_FUZZ", 8)
PARTITIONS = 4


def end_offsets(port: int, topic: str) -> list[int]:
    with RawClient(port) as client:
        return [list_offset(client, topic, p).offset for p in range(PARTITIONS)]


def stored(bootstrap: str, topic: str, count: int) -> dict:
    """What a consumer reads (without headers: see confluent_consume)."""
    return {(m.partition, m.offset): m for m in confluent_consume(bootstrap, topic, PARTITIONS, count, False)}


def stored_bytes(port: int, topic: str) -> list[bytes]:
    with RawClient(port) as client:
        return [fetch(client, topic, 0, p).records for p in range(PARTITIONS)]


def test_fuzzed_produce_traffic_costs_no_partition_no_record_and_no_broker(broker):
    now = int(time.time() * 1000)
    with RawClient(broker.port) as client:
        create_topic(client, "fuzzed", PARTITIONS)
    baseline = [(i % PARTITIONS, b"key-%d" % i, b"acknowledged-%d" % i, (("i", b"%d" % i),), now + i)
                for i in range(400)]
    confluent_produce(broker.bootstrap, "fuzzed", baseline)
    acknowledged = stored_bytes(broker.port, "fuzzed")

    report = fuzz(broker.port, "fuzzed", PARTITIONS, SECONDS, SEED)
    print(f"seed {SEED}, {SECONDS:.0f} s: {report.summary()}")
    assert report.accepted and len(report.refused) >= 3, "the fuzzer exercised too little: " + report.summary()
    assert_healthy(broker)

    confluent_produce(broker.bootstrap, "fuzzed", [(p, b"k", b"after the fuzzing", (), int(time.time() * 1000))
                                                   for p in range(PARTITIONS)])
    ends = end_offsets(broker.port, "fuzzed")
    everything = stored(broker.bootstrap, "fuzzed", sum(ends))
    assert len(everything) == sum(ends), "a stored record did not read back"
    after = stored_bytes(broker.port, "fuzzed")
    assert [now[:len(then)] for now, then in zip(after, acknowledged)] == acknowledged, "acknowledged bytes changed"

    broker.kill()
    lines_before_restart = len(broker.log_lines)
    broker.start()
    assert end_offsets(broker.port, "fuzzed") == ends
    restart_log = "".join(broker.log_lines[lines_before_restart:])
    assert "recovery dropped" not in restart_log, restart_log
    assert stored(broker.bootstrap, "fuzzed", sum(ends)) == everything
    assert stored_bytes(broker.port, "fuzzed") == after
    assert_healthy(broker)

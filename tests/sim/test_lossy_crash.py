"""A machine crash loses a broker's unflushed tail only inside Kafka's durability envelope
(weir/sim/nemesis.py): outside it Kafka itself loses acknowledged writes, and weir sim would report
Kafka's own limits as Weir's violations."""

from weir.sim import scenarios
from weir.sim.runner import run_seed


def test_a_machine_crash_while_a_network_partition_holds_is_a_process_crash():
    """Seed 831444 of reassign, shrunk: two of t-1's three ISR members are cut off ZooKeeper; the
    third's machine crashes, losing its last record, while its session lingers. The others' sessions
    expire first, so the controller keeps the crashed one as the ISR's last member and elects it
    when it returns: Kafka's ZooKeeper mode does the same and loses the record (KIP-966's case).
    With another copy cut off, the crash keeps its tail."""
    settings, schedule, _ = scenarios.build("reassign", 831444)
    partition, crash = schedule[1], schedule[3]
    assert (partition.kind, partition.option, crash.kind, crash.option) == ("partition", "halves", "crash", True)
    result = run_seed(831444, settings, [partition, crash])
    assert result.ok, result.violations
    assert any("b5: lossy crash downgraded" in line for line in result.trace)

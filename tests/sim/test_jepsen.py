"""Jepsen's Kafka scenario (seeds/004): ISR shrinks to the leader, the leader loses ZooKeeper, and
a follower that is behind is elected."""

import pytest

from weir.sim.runner import run_seed


@pytest.mark.parametrize("seed", range(4))
def test_unclean_election_loses_acknowledged_writes(seed):
    result = run_seed(seed, scenario="jepsen-unclean")
    assert result.ok, result.violations
    assert any("unclean election" in line for line in result.trace)
    assert result.lost_writes > 0, "the writes the isolated leader acknowledged alone are gone"


@pytest.mark.parametrize("seed", range(4))
def test_safe_configuration_loses_nothing(seed):
    result = run_seed(seed, scenario="jepsen-safe")
    assert result.ok, result.violations
    assert result.lost_writes == 0
    assert not any("unclean election" in line for line in result.trace)
    assert any("healthy" in line for line in result.trace), "the partition recovers after healing"

"""When `weir up` restarts a broker (weir/lab/supervisor.py), without processes."""

import signal

from weir.lab.supervisor import BrokerLife, RestartPolicy, describe_exit


def test_a_death_is_told_as_an_operator_reads_it():
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL"
    assert describe_exit(-signal.SIGSEGV) == "killed by SIGSEGV"
    assert describe_exit(1) == "exit code 1"


def test_a_broker_that_keeps_dying_waits_longer_each_time_and_a_stable_one_starts_over():
    policy = RestartPolicy(first_backoff_s=1, max_backoff_s=4, stable_after_s=60)
    life = BrokerLife(0)
    policy.started(life, now=0)
    delays = []
    now = 0.0
    for _ in range(4):
        message = policy.died(life, -9, now)
        delays.append(life.restart_at - now)
        assert not policy.due(life, life.restart_at - 0.01) and policy.due(life, life.restart_at)
        now = life.restart_at
        policy.started(life, now)
        now += 5  # dies again 5 s after each start
    assert delays == [1, 2, 4, 4]
    assert message == "broker 0 died (killed by SIGKILL); restarting it in 4 s"
    policy.died(life, 1, now + 120)  # after two minutes up: the back-off starts over
    assert life.restart_at - (now + 120) == 1
    assert life.deaths[-1] == "exit code 1"


def test_a_stopped_broker_and_no_restart_stay_down():
    policy = RestartPolicy()
    life = BrokerLife(2)
    policy.started(life, now=0)
    policy.stopped(life)
    assert life.state == "stopped" and not policy.due(life, 10**6)
    keep_down = RestartPolicy(restart=False)
    keep_down.started(life, now=0)
    assert keep_down.died(life, -9, 1) == "broker 2 died (killed by SIGKILL); left down (--no-restart)"
    assert not keep_down.due(life, 10**6)

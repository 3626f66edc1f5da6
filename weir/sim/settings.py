"""The knobs of one simulated cluster, in simulated milliseconds. Kafka's names where Kafka has
one; the values are Kafka's defaults scaled down so that one run covers many failovers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SimSettings:
    brokers: int = 3
    partitions: int = 2
    replication_factor: int = 3
    topic: str = "t"
    min_insync_replicas: int = 2  # min.insync.replicas (topic config)
    unclean_leader_election_enable: bool = False  # unclean.leader.election.enable (topic config)
    zookeeper_session_timeout_ms: int = 1500  # zookeeper.session.timeout.ms
    replica_lag_time_max_ms: int = 600  # replica.lag.time.max.ms
    replica_fetch_backoff_ms: int = 60  # replica.fetch.backoff.ms
    replica_fetch_wait_ms: int = 40  # replica.fetch.wait.max.ms: a fetch finding no records waits this long
    replica_fetch_max_records: int = 20
    fetch_max_wait_ms: int = 40  # fetch.max.wait.ms: a reader's fetch finding nothing new waits this long
    fetch_timeout_ms: int = 250  # a fetch or OffsetForLeaderEpoch without an answer is retried
    alter_partition_timeout_ms: int = 250
    request_timeout_ms: int = 500  # produce: acks=all waits this long in purgatory
    flush_interval_ms: int = 400  # the OS writes dirty pages back at least this often
    log_retention_check_interval_ms: int = 500  # log.retention.check.interval.ms: producer expiry runs then
    producer_id_expiration_ms: int = 2000  # producer.id.expiration.ms: short, so runs forget producers
    leader_imbalance_check_interval_ms: int = 2500  # leader.imbalance.check.interval.seconds
    first_leader_balance_check_ms: int = 40  # FIRST_LEADER_BALANCE_CHECK_S, scaled as the interval
    auto_leader_rebalance_enable: bool = True
    controlled_shutdown_timeout_ms: int = 2500  # server.py's CONTROLLED_SHUTDOWN_TIMEOUT_S, scaled as the session
    controlled_shutdown_retry_backoff_ms: int = 400  # controlled.shutdown.retry.backoff.ms, scaled likewise
    controlled_shutdown_max_retries: int = 3  # controlled.shutdown.max.retries
    max_delay_ms: int = 8
    drop_rate: float = 0.01
    duplicate_rate: float = 0.01
    fault_window_ms: tuple[int, int] = (400, 7000)  # faults start within this window
    heal_at_ms: int = 8000  # every fault is healed by then
    liveness_bound_ms: int = 6000  # after healing, every partition has a leader and a full ISR within this
    produce_gap_ms: tuple[int, int] = (8, 40)
    read_interval_ms: int = 70
    controller_outside_replicas: bool = False  # start a broker hosting no replica first, so it wins /controller

    @property
    def zk_request_timeout_ms(self) -> int:
        return self.zookeeper_session_timeout_ms // 3

    @property
    def zk_heartbeat_ms(self) -> int:
        return self.zookeeper_session_timeout_ms // 3

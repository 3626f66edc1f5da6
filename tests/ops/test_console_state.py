"""The console's picture of a cluster (weir/console/state.py), from made-up Metadata and metrics."""

from weir.client import Node, PartitionInfo, TopicInfo
from weir.console.state import ConsoleState

BROKERS = {b: Node(b, "127.0.0.1", 9092 + b) for b in (0, 1, 2)}


def topic(*partitions: PartitionInfo) -> dict:
    return {"t": TopicInfo("t", None, False, {p.partition: p for p in partitions})}


def metrics(leos: dict[tuple[int, int], int], under_min=()) -> dict:
    """The leader's metrics: (partition, replica) → LEO."""
    return {"weir_partition_replica_log_end_offset": [
        ({"topic": "t", "partition": str(p), "replica": str(r)}, leo) for (p, r), leo in leos.items()],
        "kafka_cluster_partition_underminisr": [({"topic": "t", "partition": str(p)}, 1) for p in under_min]}


def test_a_partition_shows_each_replica_and_its_worst_status():
    state = ConsoleState()
    picture = state.picture(1000, BROKERS, 0, topic(
        PartitionInfo("t", 0, 0, 3, (0, 1, 2), (0, 1, 2), ()),
        PartitionInfo("t", 1, 1, 3, (1, 2, 0), (1, 0), ()),
        PartitionInfo("t", 2, 2, 3, (2, 0, 1), (2,), ()),
        PartitionInfo("t", 3, -1, 3, (0, 1, 2), (0,), ())),
        {0: metrics({(0, 0): 10, (0, 1): 10, (0, 2): 7}), 1: metrics({(1, 1): 5, (1, 2): 3}),
         2: metrics({}, under_min=[2])})
    partitions = picture["topics"][0]["partitions"]
    assert [p["status"] for p in partitions] == ["ok", "under-replicated", "under-min-isr", "offline"]
    assert partitions[0]["replicas"][2] == {"id": 2, "in_isr": True, "alive": True, "leo": 7, "lag": 3}
    assert partitions[1]["replicas"][2] == {"id": 0, "in_isr": True, "alive": True, "leo": None, "lag": None}
    assert picture["brokers"][0]["controller"] and not picture["timeline"]


def test_a_broker_that_leaves_stays_on_the_page_and_the_changes_make_a_timeline():
    state = ConsoleState()
    state.picture(1000, BROKERS, 0, topic(PartitionInfo("t", 0, 1, 3, (1, 2, 0), (1, 2, 0), ())), {})
    without_1 = {b: info for b, info in BROKERS.items() if b != 1}
    picture = state.picture(2000, without_1, 2, topic(PartitionInfo("t", 0, 2, 4, (1, 2, 0), (2, 0), ())), {})
    assert [b["alive"] for b in picture["brokers"]] == [True, False, True]
    assert picture["topics"][0]["partitions"][0]["replicas"][0]["alive"] is False
    assert [e["text"] for e in picture["timeline"]] == [
        "t-0: ISR shrinks [1, 2, 0] → [2, 0]", "t-0: leader 1 → 2 (epoch 4)", "broker 1 is gone",
        "controller: broker 0 → broker 2"]


def test_clients_held_by_a_quota_are_shown_with_their_rate():
    held = {"kafka_server_produce_byte_rate": [({"user": "", "client_id": "slow"}, 1048576.0),
                                               ({"user": "", "client_id": "fast"}, 10.0)],
            "kafka_server_produce_throttle_time": [({"user": "", "client_id": "slow"}, 250.0),
                                                   ({"user": "", "client_id": "fast"}, 0.0)]}
    picture = ConsoleState().picture(1000, BROKERS, 0, {}, {1: held})
    assert picture["throttled"] == [{"broker": 1, "quota": "produce", "user": "", "client_id": "slow",
                                     "throttle_ms": 250.0, "rate": 1048576.0}]

"""What the console shows, without I/O: one picture of the cluster from Metadata and the brokers'
metrics, and the timeline of changes between pictures.

A partition's status is the worst that applies: offline (no leader), under-min-ISR, under-
replicated (ISR smaller than the replica set), ok. Each replica's LEO and lag come from its
leader's metrics (`weir_partition_replica_log_end_offset`); without them they are unknown (None).
Brokers once seen and now missing from Metadata are shown as down, not forgotten. Clients held by
a quota are those whose throttle time (`kafka_server_<quota>_throttle_time`) is above zero on a
broker, with the rate that broker measures for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TIMELINE_LENGTH = 60
QUOTA_GROUPS = {"produce": "byte_rate", "fetch": "byte_rate", "request": "request_time",
                "controllermutation": "tokens"}  # kafka.server:type=<group>: its rate's name


def series(metrics: dict[str, list], name: str, *keys: str) -> dict[tuple, float]:
    """{(label values...): value} of one metric (metrics: name → [(labels, value)])."""
    return {tuple(labels.get(k, "") for k in keys): value for labels, value in metrics.get(name, [])}


@dataclass
class ConsoleState:
    known_brokers: dict[int, str] = field(default_factory=dict)  # id → address, every broker ever seen
    timeline: list[dict] = field(default_factory=list)
    last: dict | None = None

    def picture(self, now_ms: int, brokers: dict, controller_id: int, topics: dict,
                metrics_by_broker: dict[int, dict[str, list]]) -> dict:
        """brokers: id → client.Node (live ones); topics: name → client.TopicInfo."""
        for b in brokers.values():
            self.known_brokers[b.node_id] = f"{b.host}:{b.port}"
        leo, hw, under_min, lag = {}, {}, {}, []
        for metrics in metrics_by_broker.values():
            leo.update(series(metrics, "weir_partition_replica_log_end_offset", "topic", "partition", "replica"))
            under_min.update(series(metrics, "kafka_cluster_partition_underminisr", "topic", "partition"))
            for (topic, partition), value in series(metrics, "weir_partition_high_watermark", "topic",
                                                    "partition").items():
                hw[(topic, partition)] = max(value, hw.get((topic, partition), -1))
            lag += [{"group": g, "topic": t, "partition": int(p), "lag": int(v)} for (g, t, p), v in
                    series(metrics, "kafka_consumergroup_lag", "consumergroup", "topic", "partition").items()]
        throttled = [{"broker": broker, "quota": group, "user": user, "client_id": client_id,
                      "throttle_ms": round(throttle, 1), "rate": round(rates.get((user, client_id), 0.0), 1)}
                     for broker, metrics in sorted(metrics_by_broker.items())
                     for group, rate_name in QUOTA_GROUPS.items()
                     for rates in [series(metrics, f"kafka_server_{group}_{rate_name}", "user", "client_id")]
                     for (user, client_id), throttle in sorted(
                         series(metrics, f"kafka_server_{group}_throttle_time", "user", "client_id").items())
                     if throttle > 0]
        picture = {
            "time": now_ms,
            "controller": controller_id,
            "brokers": [{"id": b, "address": address, "alive": b in brokers, "controller": b == controller_id,
                         "rack": brokers[b].rack if b in brokers else None, "metrics": b in metrics_by_broker}
                        for b, address in sorted(self.known_brokers.items())],
            "topics": [self._topic(t, brokers, leo, hw, under_min) for name, t in sorted(topics.items())
                       if not t.is_internal],
            "groups": sorted(lag, key=lambda g: (g["group"], g["topic"], g["partition"])),
            "throttled": throttled,
        }
        self._record_changes(picture)
        picture["timeline"] = list(reversed(self.timeline))
        return picture

    @staticmethod
    def _topic(topic, brokers, leo, hw, under_min) -> dict:
        partitions = []
        for index, p in sorted(topic.partitions.items()):
            key = (topic.name, str(index))
            leader_leo = leo.get((*key, str(p.leader)))
            replicas = []
            for r in p.replicas:
                r_leo = leo.get((*key, str(r))) if p.leader >= 0 else None
                replicas.append({"id": r, "in_isr": r in p.isr, "alive": r in brokers,
                                 "leo": None if r_leo is None else int(r_leo),
                                 "lag": None if r_leo is None or leader_leo is None else int(leader_leo - r_leo)})
            if p.leader < 0:
                status = "offline"
            elif under_min.get(key):
                status = "under-min-isr"
            elif len(p.isr) < len(p.replicas):
                status = "under-replicated"
            else:
                status = "ok"
            partitions.append({"partition": index, "leader": p.leader, "leader_epoch": p.leader_epoch,
                               "isr": list(p.isr), "replicas": replicas, "status": status,
                               "hw": None if key not in hw else int(hw[key])})
        return {"name": topic.name, "partitions": partitions}

    def _record_changes(self, picture: dict) -> None:
        last, self.last = self.last, picture
        if last is None:
            return
        events = []
        if last["controller"] != picture["controller"]:
            events.append(f"controller: broker {last['controller']} → broker {picture['controller']}")
        was_alive = {b["id"]: b["alive"] for b in last["brokers"]}
        for b in picture["brokers"]:
            if was_alive.get(b["id"], False) != b["alive"]:
                events.append(f"broker {b['id']} {'is back' if b['alive'] else 'is gone'}")
        before = {(t["name"], p["partition"]): p for t in last["topics"] for p in t["partitions"]}
        for t in picture["topics"]:
            for p in t["partitions"]:
                old = before.get((t["name"], p["partition"]))
                if old is None:
                    continue
                name = f"{t['name']}-{p['partition']}"
                if old["leader"] != p["leader"] or old["leader_epoch"] != p["leader_epoch"]:
                    events.append(f"{name}: leader {old['leader']} → {p['leader']} (epoch {p['leader_epoch']})")
                if old["isr"] != p["isr"]:
                    change = "shrinks" if len(p["isr"]) < len(old["isr"]) else "expands" if len(p["isr"]) > len(
                        old["isr"]) else "changes"
                    events.append(f"{name}: ISR {change} {old['isr']} → {p['isr']}")
        self.timeline += [{"time": picture["time"], "text": text} for text in events]
        del self.timeline[:-TIMELINE_LENGTH]

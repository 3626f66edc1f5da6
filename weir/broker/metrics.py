"""One broker's metrics in Prometheus' text format, named as Kafka's JMX metrics come out of the
usual JMX-exporter rules (`kafka.server<type=ReplicaManager, name=UnderReplicatedPartitions>` →
`kafka_server_replicamanager_underreplicatedpartitions`, `...PerSec` meters → `..._total`
counters). What Kafka does not measure on a broker (each replica's LEO as its leader sees it, the
HW) is under `weir_`; consumer-group lag uses kafka_exporter's `kafka_consumergroup_lag`.

Counters and histograms are updated where things happen; gauges are read from the broker's state
when Prometheus scrapes, on the event loop (GET /metrics on `metrics.port`, served by `serve`).
prometheus_client does the exposition format.
"""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily

from weir.broker.loop_metrics import LoopCounter, LoopHistogram
from weir.protocol.versions import ApiKey
from weir.replication.partition import OFFLINE
from weir.transport.http_server import serve_http

MS_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
PHASES = ("requestqueue", "local", "remote", "total")
# The classic text format, which every Prometheus version reads (generate_latest writes it for these names).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def request_name(api_key: int) -> str:
    """Kafka's request names: PRODUCE → Produce, OFFSET_FOR_LEADER_EPOCH → OffsetForLeaderEpoch."""
    try:
        return "".join(word.capitalize() for word in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


class BrokerMetrics:
    """The counters and histograms; `collect_state` adds the gauges read at scrape time."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        # per request and per batch: lock-free, written on the event loop only
        self.requests = LoopCounter("kafka_network_requestmetrics_requests", "Requests answered, by API.",
                                    ["request"], r)
        self.times = {phase: LoopHistogram(f"kafka_network_requestmetrics_{phase}timems",
                                           f"Request {phase} time in milliseconds, by API.", ["request"],
                                           MS_BUCKETS, r) for phase in PHASES}
        self.bytes_in = LoopCounter("kafka_server_brokertopicmetrics_bytesin", "Bytes produced, by topic.", ["topic"],
                                    r)
        self.messages_in = LoopCounter("kafka_server_brokertopicmetrics_messagesin", "Records produced, by topic.",
                                       ["topic"], r)
        self.bytes_out = LoopCounter("kafka_server_brokertopicmetrics_bytesout",
                                     "Bytes fetched by consumers, by topic.", ["topic"], r)
        self.replication_bytes_out = LoopCounter("kafka_server_brokertopicmetrics_replicationbytesout",
                                                 "Bytes fetched by followers, by topic.", ["topic"], r)
        self.isr_shrinks = Counter("kafka_server_replicamanager_isrshrinks", "ISR shrinks of partitions led here.",
                                   registry=r)
        self.isr_expands = Counter("kafka_server_replicamanager_isrexpands", "ISR expansions of partitions led here.",
                                   registry=r)
        self.controller_events = Counter("kafka_controller_controllereventmanager_events",
                                         "Controller events handled, by kind.", ["event"], registry=r)
        self.leader_elections = Counter("kafka_controller_controllerstats_leaderelections",
                                        "Leader changes written by this controller.", registry=r)
        self.unclean_elections = Counter("kafka_controller_controllerstats_uncleanleaderelections",
                                         "Leaders elected from outside the ISR by this controller.", registry=r)
        # Kafka's socket-server-metrics {successful,failed}-{authentication,reauthentication}-total
        self.authentications = Counter("kafka_server_socket_server_metrics_authentication",
                                       "SASL authentications finished, by listener and outcome.",
                                       ["listener", "outcome"], registry=r)
        self._per_api: dict[int, tuple] = {}
        self._per_topic: dict[str, tuple] = {}

    def observe_request(self, api_key: int, queue_s: float, local_s: float, total_s: float) -> None:
        children = self._per_api.get(api_key)
        if children is None:  # labels() costs a lookup: once per API, not per request
            name = request_name(api_key)
            children = self._per_api[api_key] = (self.requests.labels(name),
                                                 *(self.times[phase].labels(name) for phase in PHASES))
        count, queue, local, remote, total = children
        count.inc()
        queue.observe(queue_s * 1000)
        local.observe(local_s * 1000)
        remote.observe(max(0.0, total_s - queue_s - local_s) * 1000)
        total.observe(total_s * 1000)

    def _topic(self, topic: str) -> tuple:
        """The topic's counters (labels() costs a lookup: once per topic)."""
        children = self._per_topic.get(topic)
        if children is None:
            children = self._per_topic[topic] = (self.bytes_in.labels(topic), self.messages_in.labels(topic),
                                                 self.bytes_out.labels(topic), self.replication_bytes_out.labels(topic))
        return children

    def produced(self, topic: str, size: int, records: int) -> None:
        bytes_in, messages_in, _, _ = self._topic(topic)
        bytes_in.inc(size)
        messages_in.inc(records)

    def fetched(self, topic: str, size: int, follower: bool) -> None:
        self._topic(topic)[3 if follower else 2].inc(size)

    def on_state_written(self, old, new) -> None:
        """The controller wrote a partition state: count leader elections as Kafka's ControllerStats."""
        if old is not None and new.leader >= 0 and new.leader != old.leader:
            self.leader_elections.inc()
            if new.leader not in old.isr:
                self.unclean_elections.inc()

    def on_isr_change(self, old_isr, new_isr) -> None:
        if len(new_isr) < len(old_isr):
            self.isr_shrinks.inc()
        elif len(new_isr) > len(old_isr):
            self.isr_expands.inc()

    def collect_state(self, broker) -> None:
        self.registry.register(BrokerState(broker))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class BrokerState:
    """Gauges read from a running broker (weir.broker.server.Broker) when scraped."""

    def __init__(self, broker) -> None:
        self.broker = broker

    def collect(self):
        broker = self.broker
        gauges: dict[str, GaugeMetricFamily] = {}

        def gauge(name: str, doc: str, labels=()):
            if name not in gauges:
                gauges[name] = GaugeMetricFamily(name, doc, labels=list(labels))
            return gauges[name]

        hosted = [p for p in broker.replicas.partitions.values() if p.role != OFFLINE]
        leaders = [p for p in hosted if p.leader is not None]
        under = {p.key for p in leaders if len(p.leader.committed_isr) < len(p.replicas)}
        gauge("kafka_server_replicamanager_partitioncount", "Partitions hosted here.").add_metric([], len(hosted))
        gauge("kafka_server_replicamanager_leadercount", "Partitions led here.").add_metric([], len(leaders))
        gauge("kafka_server_replicamanager_underreplicatedpartitions",
              "Partitions led here whose ISR is smaller than their replica set.").add_metric([], len(under))
        gauge("kafka_server_replicamanager_underminisrpartitioncount",
              "Partitions led here whose ISR is below min.insync.replicas.").add_metric(
            [], sum(p.leader.is_under_min_isr for p in leaders))
        gauge("kafka_server_delayedoperationpurgatory_purgatorysize", "acks=all produce requests waiting.",
              ["delayedOperation"]).add_metric(["Produce"], sum(len(p.purgatory) for p in leaders))
        controller = broker.controller
        gauge("kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller.").add_metric(
            [], 1 if controller.active else 0)
        offline = 0
        if controller.active:
            offline = sum(state.leader < 0 for state in controller.core.view.states.values())
        gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
              "Partitions without a leader (on the active controller).").add_metric([], offline)
        sessions = broker.fetch_sessions.sessions.values()
        gauge("kafka_server_fetchsessioncache_numincrementalfetchsessions",
              "Fetch sessions (KIP-227) kept here.").add_metric([], len(sessions))
        gauge("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
              "Partitions in the fetch sessions kept here.").add_metric([], sum(len(s.partitions) for s in sessions))
        gauge("kafka_server_sessionexpirelistener_sessionstate", "The ZooKeeper session's state (1: current).",
              ["state"]).add_metric([str(broker.zk.state)], 1)
        if broker.cleaner is not None:
            gauge("kafka_log_logcleanermanager_uncleanable_partitions_count",
                  "Partitions whose cleaning failed, not cleaned again until made anew or a restart.",
                  ["logDirectory"]).add_metric([str(broker.replicas.root)], len(broker.cleaner.uncleanable))
        max_lag = 0
        for p in hosted:
            labels = [p.topic, str(p.index)]
            plog = p.log
            gauge("kafka_log_log_size", "Bytes of the partition's log here.", ["topic", "partition"]).add_metric(
                labels, plog.size_in_bytes())
            gauge("kafka_log_log_logendoffset", "The log end offset here.", ["topic", "partition"]).add_metric(
                labels, plog.log_end_offset)
            gauge("kafka_log_log_logstartoffset", "The log start offset here.", ["topic", "partition"]).add_metric(
                labels, plog.log_start_offset)
            gauge("weir_partition_high_watermark", "The high watermark as this replica knows it.",
                  ["topic", "partition"]).add_metric(labels, p.high_watermark)
            if p.follower is not None:
                lag = max(0, p.follower.high_watermark - plog.log_end_offset)
                max_lag = max(max_lag, lag)
                gauge("kafka_server_fetcherlagmetrics_consumerlag", "This follower's lag behind its leader's HW.",
                      ["clientId", "topic", "partition"]).add_metric(["ReplicaFetcherThread", *labels], lag)
                continue
            leader = p.leader
            gauge("kafka_cluster_partition_underreplicated", "1 if the ISR is smaller than the replica set.",
                  ["topic", "partition"]).add_metric(labels, int(p.key in under))
            gauge("kafka_cluster_partition_underminisr", "1 if the ISR is below min.insync.replicas.",
                  ["topic", "partition"]).add_metric(labels, int(leader.is_under_min_isr))
            gauge("kafka_cluster_partition_insyncreplicascount", "ISR size.", ["topic", "partition"]).add_metric(
                labels, len(leader.committed_isr))
            gauge("kafka_cluster_partition_replicascount", "Replica set size.", ["topic", "partition"]).add_metric(
                labels, len(p.replicas))
            for replica in p.replicas:
                leo = plog.log_end_offset if replica == broker.broker_id else leader.followers[replica].log_end_offset
                replica_labels = [*labels, str(replica)]
                gauge("weir_partition_replica_in_isr", "1 if the replica is in the ISR.",
                      ["topic", "partition", "replica"]).add_metric(replica_labels,
                                                                    int(replica in leader.committed_isr))
                if leo < 0:  # a follower this leader has not heard from yet
                    continue
                gauge("weir_partition_replica_log_end_offset", "Each replica's LEO as its leader knows it.",
                      ["topic", "partition", "replica"]).add_metric(replica_labels, leo)
                gauge("weir_partition_replica_lag", "How far each replica's LEO is behind the leader's.",
                      ["topic", "partition", "replica"]).add_metric(replica_labels,
                                                                    max(0, plog.log_end_offset - leo))
        gauge("kafka_server_replicafetchermanager_maxlag", "The largest lag of this broker's followers.",
              ["clientId"]).add_metric(["Replica"], max_lag)
        now = broker.throttles.clock()
        for group, rate_name, quotas in broker.throttles.metric_groups:  # kafka.server:type=Produce,user=,client-id=
            prefix = f"kafka_server_{group.lower()}"
            for (user, client_id), rate, throttle in quotas.metrics(now):
                gauge(f"{prefix}_{rate_name.replace('-', '_')}", f"{group} quota: the {rate_name} per user and client "
                      "id sharing a quota.", ["user", "client_id"]).add_metric([user, client_id], rate)
                gauge(f"{prefix}_throttle_time", f"{group} quota: the average throttle time (ms).",
                      ["user", "client_id"]).add_metric([user, client_id], throttle)
        end_offsets = {p.key: p.high_watermark for p in leaders}
        for group in [*broker.groups.groups.values(), *broker.groups.consumer_groups.values()]:  # both protocols
            for (topic, index), committed in group.offsets.items():
                end = end_offsets.get((topic, index))
                if end is not None:
                    gauge("kafka_consumergroup_lag", "Records a group has not committed yet, for partitions led here.",
                          ["consumergroup", "topic", "partition"]).add_metric(
                        [group.group_id, topic, str(index)], max(0, end - committed.offset))
        yield from gauges.values()


async def serve(metrics: BrokerMetrics, host: str, port: int) -> asyncio.Server:
    """GET /metrics → the exposition."""
    return await serve_http({"/metrics": lambda: (CONTENT_TYPE, metrics.exposition())}, host, port)

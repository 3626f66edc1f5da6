"""Request handlers: one method per API, turning a decoded request into a response.

Every handler returns the response body: `bytes`, a list of buffers (Fetch,
with FileRegion items for record data), or None when no response is owed
(Produce with acks=0). Fetch is a coroutine because it may long-poll.
Cold responses are built from dicts by `codec.encode_response`; Produce and
Fetch by hand in `hot_responses`.
"""

import logging
import time
import uuid

from ..protocol import codec
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.header import RequestHeader
from ..protocol.hot_responses import (FetchPartitionResult, ProducePartitionResult,
                                      encode_fetch_response, encode_produce_response)
from ..protocol.versions import SUPPORTED_VERSIONS, ApiKey
from .replica_manager import ReplicaManager
from .topics import TOPIC_CONFIGS, Topic, validate_topic_configs, validate_topic_name

log = logging.getLogger(__name__)

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -2, -1, -3, -4
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
CONFIG_SOURCE_TOPIC, CONFIG_SOURCE_STATIC_BROKER, CONFIG_SOURCE_DEFAULT = 1, 4, 5


def now_ms() -> int:
    return int(time.time() * 1000)


class CloseConnection(Exception):
    """The client must learn of an error it gets no response for (acks=0)."""


class KafkaApis:
    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas
        self.config = replicas.config
        self.broker_id = self.config["broker.id"]
        self._metadata_cache: dict[tuple, bytes] = {}
        self.handlers = {
            ApiKey.PRODUCE: self.produce,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.METADATA: self.metadata,
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.CREATE_PARTITIONS: self.create_partitions,
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
        }

    def metadata_changed(self) -> None:
        self._metadata_cache.clear()

    # -- ApiVersions -------------------------------------------------------

    def api_versions(self, header: RequestHeader, request) -> dict:
        return self.api_versions_body(ErrorCode.none)

    @staticmethod
    def api_versions_body(error: ErrorCode) -> dict:
        return {
            "error_code": error,
            "api_keys": [{"api_key": int(k), "min_version": lo, "max_version": hi}
                         for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())],
            "throttle_time": 0,
        }

    # -- Produce -----------------------------------------------------------

    def produce(self, header: RequestHeader, request) -> bytes | None:
        by_id = header.api_version >= 13
        now = now_ms()
        topics_out = []
        failed = False
        for topic_data in request.topic_data:
            topic = self._topic(topic_data.topic_id if by_id else topic_data.name, by_id)
            results = []
            for data in topic_data.partition_data:
                result = ProducePartitionResult(data.index)
                try:
                    if topic is None:
                        raise KafkaError(ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition)
                    result.base_offset, result.log_start_offset = self.replicas.append(
                        topic, data.index, data.records, now)
                except KafkaError as e:
                    failed = True
                    result.error_code = e.code
                    result.error_message = e.message
                    log.warning("produce to %s-%d refused: %s", topic_data.name, data.index, e)
                results.append(result)
            topics_out.append((topic_data.name if not by_id else "", topic_data.topic_id if by_id else None, results))
        if request.acks == 0:
            if failed:
                raise CloseConnection("acks=0 produce failed")
            return None
        return encode_produce_response(header.api_version, topics_out)

    def _topic(self, key, by_id: bool) -> Topic | None:
        return (self.replicas.topics.by_id if by_id else self.replicas.topics.by_name).get(key)

    # -- Fetch -------------------------------------------------------------

    async def fetch(self, header: RequestHeader, request) -> list:
        by_id = header.api_version >= 13
        wanted = []  # (topic name, topic id, [(partition index, offset, max bytes)])
        for fetch_topic in request.topics:
            topic = self._topic(fetch_topic.topic_id if by_id else fetch_topic.topic, by_id)
            wanted.append((topic, fetch_topic, [(p.partition, p.fetch_offset, p.partition_max_bytes)
                                                for p in fetch_topic.partitions]))
        results = self._read_all(wanted, request.max_bytes, by_id)
        deadline = time.monotonic() + request.max_wait.total_seconds()
        while (self._bytes(results) < request.min_bytes and not self._has_error(results)
               and (remaining := deadline - time.monotonic()) > 0):
            keys = [(t.name, p[0]) for t, _, parts in wanted if t is not None for p in parts]
            if not keys:
                break
            await self.replicas.waiters.wait(keys, remaining)
            results = self._read_all(wanted, request.max_bytes, by_id)
        return encode_fetch_response(header.api_version, 0, results)

    def _read_all(self, wanted, max_bytes: int, by_id: bool) -> list:
        out = []
        budget = max_bytes
        for topic, fetch_topic, partitions in wanted:
            results = []
            for index, offset, partition_max in partitions:
                if topic is None:
                    code = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
                    results.append(FetchPartitionResult(index, code))
                    continue
                try:
                    # The log returns at least one whole batch (KIP-74), so a
                    # consumer progresses past a batch larger than its limits.
                    result = self.replicas.read(topic.name, index, offset, min(partition_max, budget))
                except KafkaError as e:
                    result = FetchPartitionResult(index, e.code)
                budget -= _records_size(result)
                results.append(result)
            name = topic.name if topic is not None else (fetch_topic.topic if not by_id else "")
            out.append((name, fetch_topic.topic_id if by_id else None, results))
        return out

    @staticmethod
    def _bytes(results) -> int:
        return sum(_records_size(p) for _, _, parts in results for p in parts)

    @staticmethod
    def _has_error(results) -> bool:
        return any(p.error_code for _, _, parts in results for p in parts)

    # -- ListOffsets -------------------------------------------------------

    def list_offsets(self, header: RequestHeader, request) -> dict:
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                out = {"partition_index": p.partition_index, "error_code": 0, "timestamp": -1,
                       "offset": -1, "leader_epoch": -1, "old_style_offsets": []}
                try:
                    partition = self.replicas.partition(t.name, p.partition_index)
                    out["leader_epoch"] = partition.leader_epoch
                    out["offset"], out["timestamp"] = self._offset_for(partition, p.timestamp)
                except KafkaError as e:
                    out["error_code"] = e.code
                partitions.append(out)
            topics.append({"name": t.name, "partitions": partitions})
        return {"throttle_time": 0, "topics": topics}

    @staticmethod
    def _offset_for(partition, timestamp: int) -> tuple[int, int]:
        plog = partition.log
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return plog.log_start_offset, -1
        if timestamp == LATEST:
            return partition.high_watermark, -1
        if timestamp == MAX_TIMESTAMP:
            found = plog.max_timestamp_offset()
        elif timestamp >= 0:
            found = plog.offset_for_timestamp(timestamp)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"unknown special timestamp {timestamp}")
        if found is None or found[0] >= partition.high_watermark:
            return -1, -1
        return found

    # -- Metadata ----------------------------------------------------------

    def metadata(self, header: RequestHeader, request) -> bytes:
        version = header.api_version
        names = None
        if request.topics is not None and (request.topics or version > 0):
            names = tuple(t.name if t.name is not None else t.topic_id for t in request.topics)
        auto_create = self.config["auto.create.topics.enable"] and getattr(request, "allow_auto_topic_creation", True)
        if names and auto_create:
            for name in names:
                if isinstance(name, str) and name not in self.replicas.topics.by_name:
                    self._auto_create(name)
        key = (version, names)
        body = self._metadata_cache.get(key)
        if body is None:
            body = self._encode_body(ApiKey.METADATA, version, self._metadata_body(names))
            self._metadata_cache[key] = body
        return body

    def _auto_create(self, name: str) -> None:
        try:
            validate_topic_name(name)
        except KafkaError:
            return  # answered as an invalid topic below
        self.replicas.create_topic(name, self.config["num.partitions"], {}, now_ms())
        self.metadata_changed()

    def _metadata_body(self, names) -> dict:
        topics_table = self.replicas.topics
        if names is None:
            selected = list(topics_table.by_name.values())
        else:
            selected = [topics_table.by_name.get(n) if isinstance(n, str) else topics_table.by_id.get(n)
                        for n in names]
        topics = []
        for key, topic in zip(names or [t.name for t in selected], selected):
            if topic is None:
                code = ErrorCode.unknown_topic_or_partition
                if isinstance(key, str):
                    try:
                        validate_topic_name(key)
                    except KafkaError as e:
                        code = e.code
                topics.append({"error_code": code, "name": key if isinstance(key, str) else None,
                               "topic_id": key if isinstance(key, uuid.UUID) else uuid.UUID(int=0),
                               "is_internal": False, "partitions": []})
                continue
            topics.append({
                "error_code": 0, "name": topic.name, "topic_id": topic.topic_id, "is_internal": False,
                "partitions": [{
                    "error_code": 0, "partition_index": i, "leader_id": self.broker_id,
                    "leader_epoch": self.replicas.partitions[(topic.name, i)].leader_epoch,
                    "replica_nodes": [self.broker_id], "isr_nodes": [self.broker_id], "offline_replicas": [],
                } for i in range(topic.partitions)],
                "topic_authorized_operations": -2147483648,
            })
        return {"throttle_time": 0, "brokers": [self._broker_entry("node_id")],
                "cluster_id": self.config["cluster.id"], "controller_id": self.broker_id,
                "topics": topics, "cluster_authorized_operations": -2147483648, "error_code": 0}

    def _broker_entry(self, id_field: str) -> dict:
        host, port = self.config.advertised
        return {id_field: self.broker_id, "host": host, "port": port, "rack": None}

    @staticmethod
    def _encode_body(api_key: int, version: int, body: dict) -> bytes:
        # encode_response includes a header; strip it so the body can be cached
        encoded = codec.encode_response(api_key, version, 0, body)
        header_size = 5 if codec.response_schema(api_key, version).__flexible__ and api_key != ApiKey.API_VERSIONS else 4
        return encoded[header_size:]

    # -- CreateTopics / DeleteTopics / CreatePartitions ---------------------

    def create_topics(self, header: RequestHeader, request) -> dict:
        results = []
        for t in request.topics:
            out = {"name": t.name, "topic_id": uuid.UUID(int=0), "error_code": 0, "error_message": None,
                   "topic_config_error_code": 0, "num_partitions": -1, "replication_factor": -1, "configs": []}
            try:
                topic = self._create_topic(t, request.validate_only)
                if topic is not None:
                    out["topic_id"] = topic.topic_id
                out["num_partitions"] = t.num_partitions if t.num_partitions != -1 else self.config["num.partitions"]
                out["replication_factor"] = 1
                out["configs"] = [
                    {"name": name, "value": value, "read_only": False, "config_source": source,
                     "is_sensitive": False}
                    for name, value, source in self._topic_config_entries(dict((c.name, c.value) for c in t.configs))]
            except KafkaError as e:
                out["error_code"], out["error_message"] = e.code, e.message
            results.append(out)
        return {"throttle_time": 0, "topics": results}

    def _create_topic(self, t, validate_only: bool) -> Topic | None:
        validate_topic_name(t.name)
        if t.name in self.replicas.topics.by_name:
            raise KafkaError(ErrorCode.topic_already_exists, f"topic {t.name!r} already exists")
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise KafkaError(ErrorCode.invalid_request,
                                 "give either assignments or num_partitions/replication_factor")
            self._check_assignment([a.broker_ids for a in t.assignments])
            partitions = len(t.assignments)
        else:
            partitions = t.num_partitions if t.num_partitions != -1 else self.config["num.partitions"]
            factor = t.replication_factor if t.replication_factor != -1 else self.config["default.replication.factor"]
            if partitions <= 0:
                raise KafkaError(ErrorCode.invalid_partitions, "number of partitions must be positive")
            if factor <= 0:
                raise KafkaError(ErrorCode.invalid_replication_factor, "replication factor must be positive")
            if factor > 1:
                raise KafkaError(ErrorCode.invalid_replication_factor,
                                 f"replication factor {factor} is larger than the 1 available broker")
        configs = {c.name: c.value for c in t.configs}
        validate_topic_configs(configs)
        if validate_only:
            return None
        topic = self.replicas.create_topic(t.name, partitions, configs, now_ms())
        self.metadata_changed()
        return topic

    def _check_assignment(self, replica_lists) -> None:
        for replicas in replica_lists:
            if list(replicas) != [self.broker_id]:
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"replicas {list(replicas)}: only broker {self.broker_id} exists")

    def delete_topics(self, header: RequestHeader, request) -> dict:
        version = header.api_version
        states = request.topics if version >= 6 else [None] * len(request.topic_names)
        names = [None] * len(states) if version >= 6 else request.topic_names
        responses = []
        for state, name in zip(states, names):
            if state is not None:
                topic = (self.replicas.topics.by_name.get(state.name) if state.name is not None
                         else self.replicas.topics.by_id.get(state.topic_id))
                name = state.name
            else:
                topic = self.replicas.topics.by_name.get(name)
            out = {"name": topic.name if topic else name,
                   "topic_id": topic.topic_id if topic else uuid.UUID(int=0),
                   "error_code": 0, "error_message": None}
            if topic is None:
                out["error_code"] = ErrorCode.unknown_topic_id if (state and state.name is None) else ErrorCode.unknown_topic_or_partition
            elif not self.config["delete.topic.enable"]:
                out["error_code"] = ErrorCode.topic_deletion_disabled
            else:
                self.replicas.delete_topic(topic)
                self.metadata_changed()
            responses.append(out)
        return {"throttle_time": 0, "responses": responses}

    def create_partitions(self, header: RequestHeader, request) -> dict:
        results = []
        for t in request.topics:
            out = {"name": t.name, "error_code": 0, "error_message": None}
            try:
                topic = self.replicas.topics.by_name.get(t.name)
                if topic is None:
                    raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no topic {t.name!r}")
                if t.count <= topic.partitions:
                    raise KafkaError(ErrorCode.invalid_partitions,
                                     f"topic has {topic.partitions} partitions; {t.count} would not add any")
                if t.assignments is not None:
                    if len(t.assignments) != t.count - topic.partitions:
                        raise KafkaError(ErrorCode.invalid_replica_assignment,
                                         "one assignment per new partition is needed")
                    self._check_assignment([a.broker_ids for a in t.assignments])
                if not request.validate_only:
                    self.replicas.add_partitions(topic, t.count, now_ms())
                    self.metadata_changed()
            except KafkaError as e:
                out["error_code"], out["error_message"] = e.code, e.message
            results.append(out)
        return {"throttle_time": 0, "results": results}

    # -- DescribeConfigs / DescribeCluster ----------------------------------

    def _topic_config_entries(self, configs: dict[str, str]):
        for name, broker_name in TOPIC_CONFIGS.items():
            if name in configs:
                yield name, configs[name], CONFIG_SOURCE_TOPIC
            elif broker_name is None:
                yield name, "delete", CONFIG_SOURCE_DEFAULT
            else:
                yield name, _config_str(self.config[broker_name]), CONFIG_SOURCE_DEFAULT

    def describe_configs(self, header: RequestHeader, request) -> dict:
        from ..config import SETTINGS
        results = []
        for r in request.resources:
            out = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
                   "resource_name": r.resource_name, "configs": []}
            if r.resource_type == RESOURCE_TOPIC:
                topic = self.replicas.topics.by_name.get(r.resource_name)
                if topic is None:
                    out["error_code"] = ErrorCode.unknown_topic_or_partition
                    results.append(out)
                    continue
                entries = list(self._topic_config_entries(topic.configs))
            elif r.resource_type == RESOURCE_BROKER:
                if r.resource_name not in ("", str(self.broker_id)):
                    out["error_code"] = ErrorCode.invalid_request
                    out["error_message"] = f"this is broker {self.broker_id}"
                    results.append(out)
                    continue
                entries = [(name, _config_str(self.config[name]),
                            CONFIG_SOURCE_DEFAULT if self.config[name] == s.default else CONFIG_SOURCE_STATIC_BROKER)
                           for name, s in SETTINGS.items()]
            else:
                out["error_code"] = ErrorCode.invalid_request
                out["error_message"] = f"resource type {r.resource_type} is not supported"
                results.append(out)
                continue
            wanted = set(r.configuration_keys) if r.configuration_keys is not None else None
            out["configs"] = [{"name": n, "value": v, "read_only": r.resource_type == RESOURCE_BROKER,
                               "is_default": source == CONFIG_SOURCE_DEFAULT, "config_source": source,
                               "is_sensitive": False, "synonyms": [], "config_type": 0, "documentation": None}
                              for n, v, source in entries if wanted is None or n in wanted]
            results.append(out)
        return {"throttle_time": 0, "results": results}

    def describe_cluster(self, header: RequestHeader, request) -> dict:
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
                "cluster_id": self.config["cluster.id"], "controller_id": self.broker_id,
                "brokers": [self._broker_entry("broker_id")], "cluster_authorized_operations": -2147483648}


def _config_str(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _records_size(result: FetchPartitionResult) -> int:
    return sum(r.size for r in result.records) if result.records else 0

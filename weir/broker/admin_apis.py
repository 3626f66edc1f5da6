"""Control-plane request handlers: Metadata, topics, partitions, configs, cluster, elections, ISR changes.

Topic changes are written to ZooKeeper (by any broker, as Kafka's ZooKeeper-mode admin path
does); the controller notices them and elects leaders, and the handler waits until this broker's
view shows the new partitions with leaders before it answers. AlterPartition and ElectLeaders are
answered by the active controller only (NOT_CONTROLLER elsewhere).
"""

import asyncio
import logging
import random
import uuid
from collections import Counter

from weir.broker.controller_service import ControllerService
from weir.broker.replica_manager import ReplicaManager
from weir.broker.throttles import ClientThrottles
from weir.broker.topics import INTERNAL_TOPICS, check_no_collision, validate_topic_name
from weir.config import topic_configs
from weir.config.broker_config import dynamic_settings, parse_dynamic
from weir.config.kafka_only_settings import NO_EFFECT
from weir.config.settings import (DEFAULT_CONFIG, DEFAULT_ENTITY, DYNAMIC_DEFAULT_BROKER_CONFIG, SETTINGS,
                                  STATIC_BROKER_CONFIG, ConfigError)
from weir.config.topic_configs import LIST_CONFIGS, MAX_INT, MIN_INT, ConfigType, validate_topic_configs
from weir.controller.assignment import (AssignmentError, assign_added_partitions, assign_replicas,
                                        validate_manual_assignment)
from weir.controller.partition_change import ElectionType
from weir.coordination.zk_metadata import (ConcurrentUpdate, ReassignmentInProgress, TopicExists, UnknownTopic,
                                           ZkMetadataStore)
from weir.protocol import codec
from weir.protocol.config_resources import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, RESOURCE_BROKER, RESOURCE_TOPIC
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.header import RequestHeader
from weir.protocol.metadata_response import BrokerEntry, PartitionEntry, encode_metadata_response, encode_topic
from weir.protocol.versions import ApiKey
from weir.security.acls import CLUSTER_NAME
from weir.security.authorization import (CLUSTER, DENIED_ERROR, NO_OPERATIONS, TOPIC, RequestAuthorizer, allowed,
                                         authorized_operations, cluster_error, denied, denied_creation, refusal)
from weir.zk.model import NO_LEADER, TopicAssignment

log = logging.getLogger(__name__)

_BROKER_SETTING_TYPES = {bool: ConfigType.BOOLEAN, str: ConfigType.STRING, float: ConfigType.DOUBLE}
ZERO_UUID = uuid.UUID(int=0)
CLUSTER_METADATA_TOPIC = "__cluster_metadata"  # KRaft's log: never a topic (Kafka's Topic.CLUSTER_METADATA_TOPIC_NAME)
METADATA_WAIT_S = 10
STORE_ATTEMPTS = 5  # of a read-check-write of ZooKeeper that other writers keep changing under it


async def serialized(step):
    """`step()`: a read of ZooKeeper, the request's checks against it and a compare-and-set write.
    Run again whenever another writer (another admin client, another broker, the controller) changed
    what it read before its write landed (ConcurrentUpdate): each run checks the request against
    what the other write left, as Kafka's controller, applying admin requests one after another,
    would. After STORE_ATTEMPTS such collisions in a row, UNKNOWN_SERVER_ERROR (try again)."""
    for attempt in range(1, STORE_ATTEMPTS + 1):
        try:
            return await step()
        except ConcurrentUpdate as e:
            if attempt == STORE_ATTEMPTS:
                raise KafkaError(ErrorCode.unknown_server_error,
                                 f"{e} ({STORE_ATTEMPTS} times in a row, other writers first): try again") from None


class AdminApis:
    def __init__(self, replicas: ReplicaManager, store: ZkMetadataStore, controller: ControllerService,
                 authz: RequestAuthorizer | None = None, throttles: ClientThrottles | None = None) -> None:
        self.replicas = replicas
        self.authz = authz
        self.throttles = throttles  # controller_mutation_rate (KIP-599) for topic and partition changes
        self.config = replicas.config
        self.broker_id = self.config["broker.id"]
        self.store = store
        self.controller = controller
        self.rng = random.Random()
        self._metadata_cache: dict[tuple, bytes] = {}
        # a topic's name -> (version, listener, operations) -> its part of a Metadata answer
        self._topic_metadata_cache: dict[str, dict[tuple, bytes]] = {}
        # name -> the coordinator's InternalTopic (set by the server): auto-created as it plans
        self.internal_topics: dict = {}
        self.handlers = {
            ApiKey.METADATA: self.metadata,
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.CREATE_PARTITIONS: self.create_partitions,
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
            ApiKey.ALTER_CONFIGS: self.alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
            ApiKey.ELECT_LEADERS: self.elect_leaders,
            ApiKey.ALTER_PARTITION: self.alter_partition,
        }

    @property
    def view(self):
        return self.replicas.view

    def metadata_changed(self, kind: str = "", key=None) -> None:
        """The watcher's `kind` of change (zk_watcher.py): a partition's or a topic's drops only that
        topic's cached Metadata part; any other (brokers, say) all of them."""
        self._metadata_cache.clear()
        topic = key[0] if kind == "partition" else key if kind in ("topic", "topic_deleted") else None
        if topic is None:
            self._topic_metadata_cache.clear()
        else:
            self._topic_metadata_cache.pop(topic, None)

    # -- Metadata ------------------------------------------------------------------------

    def metadata(self, header: RequestHeader, request):
        version = header.api_version
        names = None
        if request.topics is not None and (request.topics or version > 0):
            if version in (10, 11) and any(t.name is None or t.topic_id is not None for t in request.topics):
                return _metadata_refused(version, request.topics)
            names = tuple(t.name if t.name is not None else t.topic_id for t in request.topics)
        auto_create = self.config["auto.create.topics.enable"] and getattr(request, "allow_auto_topic_creation", True)
        missing = [n for n in names or () if isinstance(n, str) and n not in self.view.topics and _legal(n)]
        refused = frozenset()  # topics the principal may not describe: hidden from a listing, else refused
        if self.authz is not None:
            refused = frozenset(denied(self.authz, header, TOPIC, self._topic_names(names)))
            if missing and auto_create:
                refused |= denied_creation(self.authz, header, [n for n in missing if n not in refused])
                missing = [n for n in missing if n not in refused]
        asked = {}  # the principal's own operations, when the client asks (v8+; the cluster's up to v10)
        if getattr(request, "include_topic_authorized_operations", False):
            asked["topic_operations"] = lambda name: authorized_operations(self.authz, header, TOPIC, name)
        if getattr(request, "include_cluster_authorized_operations", False):
            asked["cluster_operations"] = authorized_operations(self.authz, header, CLUSTER)
        if missing and auto_create:
            return self._metadata_after_create(version, names, missing, header.listener, refused, asked)
        return self._metadata_body(version, names, header.listener, refused, asked)

    def _topic_names(self, keys) -> list[str]:
        """The names of the topics a request names (by name or id), or of all when it names none."""
        if keys is None:
            return list(self.view.topics)
        named = (k if isinstance(k, str) else self.view.topic_name(k) for k in keys)
        return [name for name in named if name is not None]

    async def _metadata_after_create(self, version: int, names, missing: list[str], listener: str,
                                     refused: frozenset, asked: dict) -> bytes:
        for name in missing:
            try:
                if name in self.internal_topics:  # Kafka's AutoTopicCreationManager.creatableTopic
                    await self.internal_topics[name].ensure()
                else:
                    await self.create_topic(name, self.config["num.partitions"],
                                            self.config["default.replication.factor"], None, {})
            except KafkaError as e:
                log.info("auto-creating topic %s failed: %s", name, e)
        return self._metadata_body(version, names, listener, refused, asked)

    def _metadata_body(self, version: int, names, listener: str = "", refused: frozenset = frozenset(),
                       asked: dict | None = None) -> bytes:
        """Encoded: whole, cached unless it holds a principal's operations (`asked`:
        topic_operations(name), a topic's, and cluster_operations, the cluster's); and each topic's
        part cached until the topic or the live brokers change."""
        key = None if asked else (version, names, listener, refused)
        body = self._metadata_cache.get(key) if key else None
        if body is None:
            asked = asked or {}
            body = encode_metadata_response(
                version, self._metadata_brokers(listener), self.config["cluster.id"], self.view.controller_id,
                self._metadata_topics(version, names, listener, refused, asked.get("topic_operations")),
                asked.get("cluster_operations", NO_OPERATIONS))
            if key:
                self._metadata_cache[key] = body
        return body

    def _metadata_topics(self, version: int, names, listener: str, refused: frozenset, topic_operations) -> list[bytes]:
        """`topic_operations(name)`: a topic's authorized operations, when asked for."""
        view = self.view
        keys = names if names is not None else tuple(sorted(t for t in view.topics if t not in refused))
        topics = []
        for key in keys:
            assignment = view.topics.get(key) if isinstance(key, str) else view.topic_by_id(key)
            name = key if isinstance(key, str) else None
            topic_id = key if isinstance(key, uuid.UUID) else None
            if (name or getattr(assignment, "name", None)) in refused:
                topics.append(encode_topic(version, ErrorCode.topic_authorization_failed, name, topic_id, False, (),
                                           NO_OPERATIONS))
            elif assignment is None:  # by id (v12+): UNKNOWN_TOPIC_ID, as Kafka's unknownTopicIdsTopicMetadata
                code = ErrorCode.unknown_topic_id if topic_id else ErrorCode.unknown_topic_or_partition
                if name is not None and not _legal(name):
                    code = ErrorCode.invalid_topic_exception
                topics.append(encode_topic(version, code, name, topic_id, False, (), NO_OPERATIONS))
            else:
                operations = topic_operations(assignment.name) if topic_operations else NO_OPERATIONS
                cached = self._topic_metadata_cache.setdefault(assignment.name, {})
                topic = cached.get((version, listener, operations))
                if topic is None:
                    # a leader without the client's listener: LISTENER_NOT_FOUND from v6, before
                    # LEADER_NOT_AVAILABLE (Kafka)
                    no_listener = ErrorCode.listener_not_found if version >= 6 else ErrorCode.leader_not_available
                    topic = cached[version, listener, operations] = encode_topic(
                        version, 0, assignment.name, assignment.topic_id, assignment.name in INTERNAL_TOPICS,
                        (self._partition_metadata(assignment, p, listener, no_listener)
                         for p in sorted(assignment.replicas)), operations)
                topics.append(topic)
        return topics

    def _partition_metadata(self, assignment: TopicAssignment, index: int, listener: str = "",
                            no_listener: ErrorCode = ErrorCode.listener_not_found) -> PartitionEntry:
        """As Kafka's ZkMetadataCache.getPartitionMetadata: a leader that is not live, or has no
        endpoint on the client's `listener`, is none (-1) with LEADER_NOT_AVAILABLE or `no_listener`."""
        replicas = assignment.replicas[index]
        state = self.view.states.get((assignment.name, index))
        offline = [r for r in replicas if r not in self.view.brokers]
        leader = None if state is None else self.view.brokers.get(state.leader)
        if leader is None or leader.address(listener) is None:
            error = ErrorCode.leader_not_available if leader is None else no_listener
            return PartitionEntry(error, index, NO_LEADER, state.leader_epoch if state else -1, replicas,
                                  state.isr if state else (), offline)
        return PartitionEntry(0, index, state.leader, state.leader_epoch, replicas, state.isr, offline)

    def _metadata_brokers(self, listener: str) -> list[BrokerEntry]:
        return [BrokerEntry(b["node_id"], b["host"], b["port"], b["rack"])
                for b in self._broker_entries("node_id", listener)]

    def _broker_entries(self, id_field: str, listener: str) -> list[dict]:
        """The live brokers at their endpoint of `listener` (the one the client came on); as
        Kafka, a broker without that listener is left out."""
        entries = []
        for broker in self.view.brokers.values():
            address = broker.address(listener)
            if address is not None:
                entries.append({id_field: broker.broker_id, "host": address[0], "port": address[1],
                                "rack": broker.rack})
        return entries

    # -- topics --------------------------------------------------------------------------

    async def create_topic(self, name: str, partitions: int, factor: int, manual, configs: dict,
                            validate_only: bool = False) -> TopicAssignment:
        validate_topic_name(name)
        if name in self.view.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        check_no_collision(name, self.view.topics)
        validate_topic_configs(configs, self.config)
        brokers = list(self.view.brokers.values())
        try:
            if manual:
                replicas = validate_manual_assignment(manual, set(self.view.brokers))
            else:
                replicas = assign_replicas(brokers, partitions, factor, self.rng)
        except AssignmentError as e:
            raise KafkaError(e.code, str(e)) from None
        min_isr = int(configs.get("min.insync.replicas", self.config["min.insync.replicas"]))
        if min_isr > len(next(iter(replicas.values()))):
            log.warning("topic %s: min.insync.replicas %d exceeds its replication factor", name, min_isr)
        assignment = TopicAssignment(name, uuid.uuid4(), replicas)
        if validate_only:
            return assignment
        try:
            await serialized(lambda: self.store.create_topic(assignment, configs))
        except TopicExists:
            raise KafkaError(ErrorCode.topic_already_exists, f"topic {name!r} already exists") from None
        log.info("created topic %s: %s", name, replicas)
        await self._wait_for_leaders(name, len(replicas))
        return self.view.topics.get(name, assignment)

    async def _wait_for_leaders(self, name: str, partitions: int) -> None:
        """Until this broker's view shows every partition with a state (the controller wrote it)
        and has taken them up: its own replicas of them hosted, or refused. A replica refused
        here (out of descriptors or memory: ReplicaManager.not_created) fails the request with
        KAFKA_STORAGE_ERROR, as Kafka's broker answers the LeaderAndIsr that would create it; the
        topic stays, its other partitions serving. (A replica refused on another broker is not
        seen here: that broker answers requests for it KAFKA_STORAGE_ERROR.)"""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + METADATA_WAIT_S
        while loop.time() < deadline:
            if (all((name, p) in self.view.states for p in range(partitions))
                    and self.replicas.settled(name, partitions)):
                break
            await self.replicas.waiters.wait([self.replicas.VIEW_CHANGED], deadline - loop.time())
        refused = self.replicas.not_created_of(name)
        if refused:
            raise KafkaError(ErrorCode.kafka_storage_error,
                             f"broker {self.broker_id} could not create {len(refused)} replica(s) of {name} "
                             f"(partitions {', '.join(map(str, refused[:10]))}{', ...' if len(refused) > 10 else ''}): "
                             f"{self.replicas.not_created[(name, refused[0])]}; the topic exists, its other "
                             f"partitions serve, and these are tried again")

    def _mutations(self, header: RequestHeader):
        return self.throttles.mutations(header) if self.throttles is not None else None

    def create_topics(self, header: RequestHeader, request):
        names = [t.name for t in request.topics]
        return self._create_topics(request, denied_creation(self.authz, header, names),
                                   denied(self.authz, header, TOPIC, names, ApiKey.DESCRIBE_CONFIGS),
                                   self._mutations(header))

    async def _create_topics(self, request, refused: set[str], configs_hidden: set[str], mutations=None):
        """configs_hidden: no DESCRIBE_CONFIGS, so no configs in the answer (Kafka's topic_config_error_code)."""
        results = []
        named = Counter(t.name for t in request.topics)
        for t in request.topics:
            out = {"name": t.name, "topic_id": ZERO_UUID, "error_code": 0, "error_message": None,
                   "topic_config_error_code": 0, "num_partitions": -1, "replication_factor": -1, "configs": []}
            if t.name in configs_hidden and t.name != CLUSTER_METADATA_TOPIC:
                out["topic_config_error_code"] = ErrorCode.topic_authorization_failed
            try:  # as Kafka's KafkaApis.handleCreateTopicsRequest, in its order
                if t.name == CLUSTER_METADATA_TOPIC:
                    raise KafkaError(ErrorCode.invalid_request,
                                     f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.")
                if named[t.name] > 1:
                    raise KafkaError(ErrorCode.invalid_request, "Found multiple entries for this topic.")
                if t.name in refused:
                    raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
                configs = {c.name: c.value for c in t.configs}
                manual = {a.partition_index: tuple(a.broker_ids) for a in t.assignments} or None
                if manual and (t.num_partitions != -1 or t.replication_factor != -1):
                    raise KafkaError(ErrorCode.invalid_request,
                                     "give either assignments or num_partitions/replication_factor")
                partitions = t.num_partitions if t.num_partitions != -1 else self.config["num.partitions"]
                factor = t.replication_factor if t.replication_factor != -1 else self.config["default.replication.factor"]
                validate_only = getattr(request, "validate_only", False)  # v1+
                if mutations is not None and not validate_only and t.name not in self.view.topics:
                    mutations.record(len(manual) if manual else partitions)
                assignment = await self.create_topic(t.name, partitions, factor, manual, configs, validate_only)
                out.update(topic_id=assignment.topic_id, num_partitions=len(assignment.replicas),
                           replication_factor=len(assignment.replicas[0]))
                if t.name not in configs_hidden:
                    out["configs"] = [{"name": e.name, "value": e.value, "read_only": False,
                                       "config_source": e.source, "is_sensitive": False}
                                      for e in topic_configs.describe(configs, self.config)]
            except KafkaError as e:
                out["error_code"], out["error_message"] = e.code, e.message
            results.append(out)
        body = {"throttle_time": 0, "topics": results}
        return mutations.answer(body) if mutations is not None else body

    def delete_topics(self, header: RequestHeader, request):
        return self._delete_topics(header, request)

    async def _delete_topics(self, header: RequestHeader, request) -> dict:
        """As Kafka: a topic id names its topic, else UNKNOWN_TOPIC_ID; a topic named by id that the
        principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED without its name. A topic given by
        both name and id, or delete.topic.enable=false, refuses every topic of the request
        (KafkaApis.handleDeleteTopicsRequest)."""
        given = ([(t.name, t.topic_id or ZERO_UUID) for t in request.topics] if header.api_version >= 6
                 else [(n, ZERO_UUID) for n in request.topic_names])
        refusal = None  # as Kafka, for the whole request and before anything else
        if any(name is not None and topic_id != ZERO_UUID for name, topic_id in given):
            refusal = ErrorCode.invalid_request  # "Topic name and topic ID can not both be specified."
        elif not self.config["delete.topic.enable"]:
            refusal = ErrorCode.invalid_request if header.api_version < 3 else ErrorCode.topic_deletion_disabled
        if refusal is not None:
            return {"throttle_time": 0, "responses": [{"name": name, "topic_id": topic_id, "error_code": refusal,
                                                       "error_message": None} for name, topic_id in given]}
        wanted = [(name, topic_id) if name is not None else (self.view.topic_name(topic_id), topic_id)
                  for name, topic_id in given]
        names = [name for name, _ in wanted if name is not None]
        refused = denied(self.authz, header, TOPIC, names)
        hidden = denied(self.authz, header, TOPIC, names, ApiKey.METADATA)  # Metadata's check: DESCRIBE
        responses = []
        mutations = self._mutations(header)
        for name, topic_id in wanted:
            assignment = self.view.topics.get(name)
            out = {"name": name, "topic_id": assignment.topic_id if assignment else topic_id,
                   "error_code": 0, "error_message": None}
            if name is None:
                out["error_code"] = ErrorCode.unknown_topic_id
            elif topic_id != ZERO_UUID and name in hidden:
                out["name"], out["error_code"] = None, ErrorCode.topic_authorization_failed
            elif name in refused:
                out["error_code"] = ErrorCode.topic_authorization_failed
            elif assignment is None:
                out["error_code"] = ErrorCode.unknown_topic_or_partition
            elif assignment.name in INTERNAL_TOPICS:
                out["error_code"], out["error_message"] = ErrorCode.invalid_topic_exception, "internal topic"
            else:
                try:
                    if mutations is not None:
                        mutations.record(len(assignment.replicas))
                    await serialized(lambda: self.store.delete_topic(assignment.name))
                    log.info("deleted topic %s", assignment.name)
                except UnknownTopic:
                    out["error_code"] = ErrorCode.unknown_topic_or_partition
                except KafkaError as e:
                    out["error_code"], out["error_message"] = e.code, e.message
            responses.append(out)
        body = {"throttle_time": 0, "responses": responses}
        return mutations.answer(body) if mutations is not None else body

    def create_partitions(self, header: RequestHeader, request):
        return self._create_partitions(request, denied(self.authz, header, TOPIC, [t.name for t in request.topics]),
                                       self._mutations(header))

    async def _create_partitions(self, request, refused: set[str], mutations=None):
        results = []
        named = Counter(t.name for t in request.topics)
        answered = set()
        for t in request.topics:
            out = {"name": t.name, "error_code": 0, "error_message": None}
            if named[t.name] > 1:  # as Kafka's KafkaApis.handleCreatePartitionsRequest: once, and nothing added
                if t.name not in answered:
                    answered.add(t.name)
                    results.append({**out, "error_code": ErrorCode.invalid_request,
                                    "error_message": "Duplicate topic in request."})
                continue
            try:
                if t.name in refused:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                await serialized(lambda: self._add_partitions(t, request.validate_only, mutations))
            except KafkaError as e:
                out["error_code"], out["error_message"] = e.code, e.message
            except ReassignmentInProgress:
                out["error_code"] = ErrorCode.reassignment_in_progress
                out["error_message"] = f"the partitions of {t.name} are being reassigned"
            results.append(out)
        body = {"throttle_time": 0, "results": results}
        return mutations.answer(body) if mutations is not None else body

    async def _add_partitions(self, t, validate_only: bool, mutations=None) -> None:
        """One topic of a CreatePartitions request, checked against the topic as ZooKeeper has it,
        not our view: a change made a moment ago may not have reached the view (which says first
        whether the topic is known at all, and so whether its name may be looked up)."""
        assignment = await self.store.read_topic(t.name) if t.name in self.view.topics else None
        if assignment is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no topic {t.name!r}")
        if assignment.adding or assignment.removing:
            raise ReassignmentInProgress(t.name)
        if t.count <= len(assignment.replicas):
            raise KafkaError(ErrorCode.invalid_partitions, f"topic has {len(assignment.replicas)} "
                                                           f"partitions; {t.count} would not add any")
        manual = None
        if t.assignments is not None:
            first = len(assignment.replicas)
            manual = {first + i: tuple(a.broker_ids) for i, a in enumerate(t.assignments)}
        try:
            added = assign_added_partitions(self.view.brokers.values(), assignment.replicas, t.count, manual)
        except AssignmentError as e:
            raise KafkaError(e.code, str(e)) from None
        if validate_only:
            return
        if mutations is not None:
            mutations.record(len(added))
        try:
            await self.store.add_partitions(t.name, TopicAssignment(t.name, assignment.topic_id,
                                                                    {**assignment.replicas, **added}))
        except UnknownTopic:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {t.name!r} was deleted meanwhile") from None
        await self._wait_for_leaders(t.name, t.count)

    # -- configs ---------------------------------------------------------------------------

    def describe_configs(self, header: RequestHeader, request) -> dict:
        """Every topic config (weir.config.topic_configs) or broker setting, with its source, and
        its synonyms and documentation when asked for (KIP-226, KIP-569)."""
        synonyms_wanted = getattr(request, "include_synonyms", False)  # v1+
        documentation_wanted = getattr(request, "include_documentation", False)  # v3+
        results = []
        for r in request.resources:
            out = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
                   "resource_name": r.resource_name, "configs": []}
            try:
                self._check_config_access(header, r)
                entries = self._config_entries(r.resource_type, r.resource_name)
            except KafkaError as e:
                out["error_code"], out["error_message"] = e.code, e.message
                results.append(out)
                continue
            wanted = set(r.configuration_keys) if r.configuration_keys else None  # none or empty: all, as Kafka
            dynamic = dynamic_settings()
            out["configs"] = [{"name": e.name, "value": None if e.type == ConfigType.PASSWORD else e.value,
                               "read_only": r.resource_type == RESOURCE_BROKER and e.name not in dynamic,
                               "is_default": e.source == DEFAULT_CONFIG, "config_source": e.source,
                               "is_sensitive": e.type == ConfigType.PASSWORD,
                               "synonyms": [{**s._asdict(), **({"value": None} if e.type == ConfigType.PASSWORD else {})}
                                            for s in e.synonyms] if synonyms_wanted else [],
                               "config_type": e.type, "documentation": e.documentation if documentation_wanted else None}
                              for e in entries if wanted is None or e.name in wanted]
            results.append(out)
        return {"throttle_time": 0, "results": results}

    def _check_config_access(self, header: RequestHeader, r) -> None:
        """DESCRIBE_CONFIGS or ALTER_CONFIGS on the topic, or on the cluster for broker configs."""
        if self.authz is None or r.resource_type not in (RESOURCE_TOPIC, RESOURCE_BROKER):
            return
        resource_type, name = (TOPIC, r.resource_name) if r.resource_type == RESOURCE_TOPIC else (CLUSTER, CLUSTER_NAME)
        if not allowed(self.authz, header, resource_type, name):
            raise KafkaError(DENIED_ERROR[resource_type], f"{header.principal} may not do that on {r.resource_name!r}")

    def _config_entries(self, resource_type: int, name: str) -> list[topic_configs.ConfigEntry]:
        if resource_type == RESOURCE_TOPIC:
            validate_topic_name(name)  # as Kafka's ConfigHelper (Topic.validate): INVALID_TOPIC_EXCEPTION
            if name not in self.view.topics:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no topic {name!r}")
            return topic_configs.describe(self.view.topic_configs.get(name, {}), self.config)
        if resource_type == RESOURCE_BROKER:
            if name == "":  # the cluster-wide default entity: what is set there
                return [self._broker_config_entry(n, s) for n, s in SETTINGS.items()
                        if any(source == DYNAMIC_DEFAULT_BROKER_CONFIG for _, source in self.config.layers(n))]
            if name != str(self.broker_id):
                raise KafkaError(ErrorCode.invalid_request, f"this is broker {self.broker_id}, not {name}")
            return ([self._broker_config_entry(n, s) for n, s in SETTINGS.items()]
                    + [_no_effect_entry(n, value) for n, value in self.config.no_effect.items()])
        raise KafkaError(ErrorCode.invalid_request, f"resource type {resource_type} is not supported")

    def _broker_config_entry(self, name: str, setting) -> topic_configs.ConfigEntry:
        """A broker setting, from where it is set: dynamically, in the properties, or its default."""
        value = topic_configs.format_value(self.config[name])
        synonyms = topic_configs.broker_synonyms(name, self.config)
        overridden = topic_configs.BROKER_SYNONYMS.get(name)
        config_type = (ConfigType.PASSWORD if setting.sensitive else overridden.type if overridden
                       else _BROKER_SETTING_TYPES.get(setting.type, 0))  # 0: UNKNOWN
        return topic_configs.ConfigEntry(name, value, synonyms[0].source, synonyms, config_type, setting.doc)

    def alter_configs(self, header: RequestHeader, request):
        """AlterConfigs replaces a topic's whole set of overrides."""
        return self._alter_configs(header, request, lambda current, r: {c.name: c.value for c in r.configs})

    def incremental_alter_configs(self, header: RequestHeader, request):
        def apply(current: dict, r) -> dict:
            updated = dict(current)
            for c in r.configs:
                if c.config_operation == OP_SET:
                    updated[c.name] = c.value
                elif c.config_operation == OP_DELETE:
                    updated.pop(c.name, None)
                elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
                    updated[c.name] = self._list_operation(updated, c, r.resource_type)
                else:
                    raise KafkaError(ErrorCode.invalid_request, f"{c.name}: unknown operation {c.config_operation}")
            return updated
        return self._alter_configs(header, request, apply)

    def _list_operation(self, configs: dict, c, resource_type: int) -> str:
        """APPEND or SUBTRACT the comma-separated items of `c.value` to or from a list config's
        value (the topic's or the dynamic one, else the broker's), as Kafka's IncrementalAlterConfigs."""
        verb = "append" if c.config_operation == OP_APPEND else "subtract"
        broker_lists = {d.synonym for name, d in topic_configs.TOPIC_CONFIG_DEFS.items() if name in LIST_CONFIGS}
        if c.name not in (LIST_CONFIGS if resource_type == RESOURCE_TOPIC else broker_lists):
            raise KafkaError(ErrorCode.invalid_config, f"Config value {verb} is not allowed for config key: {c.name}")
        if resource_type == RESOURCE_TOPIC:
            current = topic_configs.resolve(c.name, configs, self.config).value  # the topic's, the broker's, ...
        else:
            current = configs.get(c.name, topic_configs.format_value(self.config[c.name]))
        items = [item for item in current.split(",") if item]
        given = [item.strip() for item in (c.value or "").split(",") if item.strip()]
        if c.config_operation == OP_APPEND:
            return ",".join(items + [item for item in given if item not in items])
        return ",".join(item for item in items if item not in given)

    async def _alter_configs(self, header: RequestHeader, request, apply) -> dict:
        responses = []
        named = Counter((r.resource_type, r.resource_name) for r in request.resources)
        for r in request.resources:
            out = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
                   "resource_name": r.resource_name}
            try:
                if named[(r.resource_type, r.resource_name)] > 1:
                    raise KafkaError(ErrorCode.invalid_request, "Each resource must appear at most once.")
                _check_config_entries(r)
                self._check_config_access(header, r)
                if r.resource_type == RESOURCE_BROKER:
                    await serialized(lambda: self._alter_broker_configs(r, apply, request.validate_only))
                    responses.append(out)
                    continue
                if r.resource_type != RESOURCE_TOPIC:
                    raise KafkaError(ErrorCode.invalid_request, "only topic and broker configs can be altered")
                if not r.resource_name:
                    raise KafkaError(ErrorCode.invalid_request, "Default topic resources are not allowed.")
                if r.resource_name not in self.view.topics:
                    raise KafkaError(ErrorCode.unknown_topic_or_partition, f"no topic {r.resource_name!r}")
                await serialized(lambda: self._alter_topic_configs(r, apply, request.validate_only))
            except KafkaError as e:
                out["error_code"], out["error_message"] = e.code, e.message
            except UnknownTopic:
                out["error_code"] = ErrorCode.unknown_topic_or_partition
            responses.append(out)
        return {"throttle_time": 0, "responses": responses}

    async def _alter_topic_configs(self, r, apply, validate_only: bool) -> None:
        # From ZooKeeper, not our view: a change made a moment ago may not have reached it.
        def change(current: dict) -> dict:
            updated = apply(current, r)
            validate_topic_configs(updated, self.config)
            return updated
        updated = await self.store.update_topic_config(r.resource_name, change, write=not validate_only)
        if not validate_only:
            log.info("topic %s configs now %s", r.resource_name, updated)

    async def _alter_broker_configs(self, r, apply, validate_only: bool) -> None:
        """Dynamic broker configs (KIP-226): resource name "" is the cluster-wide default, this
        broker's id its own (another's is INVALID_REQUEST, as Kafka: clients send that one to that
        broker); only the settings Kafka lets a running cluster change, a bad value INVALID_REQUEST."""
        entity = DEFAULT_ENTITY
        if r.resource_name != "":  # as Kafka: this broker's id alone (ConfigAdminManager)
            if not _is_int(r.resource_name):
                raise KafkaError(ErrorCode.invalid_request,
                                 f"Node id must be an integer, but it is: {r.resource_name}")
            if int(r.resource_name) != self.broker_id:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"Unexpected broker id, expected {self.broker_id}, but received {r.resource_name}")
            entity = str(self.broker_id)

        def change(current: dict) -> dict:
            updated = apply(current, r)
            fixed = sorted(name for name in updated if name not in dynamic_settings())
            if fixed:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
            try:
                for name, value in updated.items():
                    parse_dynamic(name, value)
            except ConfigError as e:  # INVALID_REQUEST, not INVALID_CONFIG: Kafka's (KAFKA-13609)
                raise KafkaError(ErrorCode.invalid_request, str(e)) from None
            return updated
        updated = await self.store.update_broker_config(entity, change, write=not validate_only)
        if not validate_only:
            log.info("dynamic broker configs of %s now %s", entity, updated)

    # -- cluster, elections, ISR -------------------------------------------------------------

    def describe_cluster(self, header: RequestHeader, request) -> dict:
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
                "cluster_id": self.config["cluster.id"], "controller_id": self.view.controller_id,
                # v2 (KIP-1073): ZooKeeper mode has no fenced brokers, every registered one is live
                "brokers": [{**b, "is_fenced": False} for b in self._broker_entries("broker_id", header.listener)],
                "cluster_authorized_operations": authorized_operations(self.authz, header, CLUSTER)
                if request.include_cluster_authorized_operations else NO_OPERATIONS}

    def elect_leaders(self, header: RequestHeader, request):
        error = cluster_error(self.authz, header)
        if not error and header.api_version >= 1 and request.election_type not in list(ElectionType):
            # Kafka's ElectionType.valueOf throws, and KafkaApis answers with what it makes of that
            error = ErrorCode.unknown_server_error
        if error:  # each partition named carries it too (v0 has no top-level error)
            return refusal(error, replica_election_results=_election_results(
                {(t.topic, p): error for t in request.topic_partitions or () for p in t.partitions}))
        return self._elect_leaders(header.api_version, request)

    async def _elect_leaders(self, version: int, request) -> dict:
        election = ElectionType(request.election_type if version >= 1 else 0)
        partitions = None
        if request.topic_partitions is not None:
            partitions = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
        if not self.controller.active:
            return {"throttle_time": 0, "error_code": ErrorCode.not_controller, "replica_election_results": []}
        results = await self.controller.call("elect_leaders", election, partitions) or {}
        if partitions is None:  # all: as Kafka, only those elected or failed (KafkaApis.handleElectLeaders)
            results = {key: code for key, code in results.items() if code != ErrorCode.election_not_needed}
        return {"throttle_time": 0, "error_code": 0, "replica_election_results": _election_results(results)}

    def alter_partition(self, header: RequestHeader, request):
        if cluster_error(self.authz, header):
            return refusal(ErrorCode.cluster_authorization_failed, topics=[])
        return self._alter_partition(request)

    async def _alter_partition(self, request) -> dict:
        if not self.controller.active:
            return {"throttle_time": 0, "error_code": ErrorCode.not_controller, "topics": []}
        view = self.controller.core.view
        by_id = {t.topic_id: name for t in request.topics if (name := view.topic_name(t.topic_id)) is not None}
        items = []
        for t in request.topics:
            if t.topic_id in by_id:
                for p in t.partitions:
                    if hasattr(p, "new_isr_with_epochs"):  # v3 (KIP-903)
                        new_isr = tuple(b.broker_id for b in p.new_isr_with_epochs)
                        epochs = {b.broker_id: b.broker_epoch for b in p.new_isr_with_epochs}
                    else:
                        new_isr, epochs = tuple(p.new_isr), None
                    items.append((by_id[t.topic_id], p.partition_index, p.leader_epoch, p.partition_epoch, new_isr,
                                  epochs))
        try:
            result = await self.controller.call("alter_partition", request.broker_id, request.broker_epoch, items)
        except Exception as e:  # ZooKeeper unreachable: the outcome is unknown, the leader retries
            log.warning("AlterPartition from broker %d failed: %r", request.broker_id, e)
            result = ErrorCode.none, {(name, p): (ErrorCode.request_timed_out, None) for name, p, *_ in items}
        error, answers = result if result is not None else (ErrorCode.not_controller, {})
        if error:
            return {"throttle_time": 0, "error_code": error, "topics": []}
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                out = {"partition_index": p.partition_index, "error_code": 0, "leader_id": NO_LEADER,
                       "leader_epoch": -1, "isr": [], "leader_recovery_state": 0, "partition_epoch": -1}
                code, state = answers.get((by_id.get(t.topic_id), p.partition_index), (ErrorCode.unknown_topic_id, None))
                out["error_code"] = code
                if state is not None:
                    out.update(leader_id=state.leader, leader_epoch=state.leader_epoch, isr=list(state.isr),
                               partition_epoch=state.partition_epoch)
                partitions.append(out)
            topics.append({"topic_id": t.topic_id, "partitions": partitions})
        return {"throttle_time": 0, "error_code": 0, "topics": topics}


def _election_results(results: dict[tuple[str, int], ErrorCode]) -> list[dict]:
    by_topic: dict[str, list] = {}
    for (topic, p), code in sorted(results.items()):
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": code,
                                               "error_message": None if not code else code.name})
    return [{"topic": t, "partition_result": parts} for t, parts in by_topic.items()]


def _no_effect_entry(name: str, value) -> topic_configs.ConfigEntry:
    """A Kafka broker config the properties set that Weir has no behaviour for, as given."""
    text = topic_configs.format_value(value)
    return topic_configs.ConfigEntry(name, text, STATIC_BROKER_CONFIG,
                                     [topic_configs.Synonym(name, text, STATIC_BROKER_CONFIG)],
                                     ConfigType[NO_EFFECT[name]], "Kafka's; accepted, no effect in Weir.")


def _check_config_entries(r) -> None:
    """Kafka's ConfigAdminManager.preprocess: a config named twice in a resource, or a null value
    but to DELETE (IncrementalAlterConfigs) or at all (AlterConfigs), is INVALID_REQUEST."""
    names = [c.name for c in r.configs]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    nulls = [c.name for c in r.configs if c.value is None and getattr(c, "config_operation", None) != OP_DELETE]
    if nulls:
        raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}")


def _is_int(text: str) -> bool:
    try:
        return MIN_INT <= int(text) <= MAX_INT
    except ValueError:
        return False


def _legal(name: str) -> bool:
    try:
        validate_topic_name(name)
        return True
    except KafkaError:
        return False


def _metadata_refused(version: int, topics) -> bytes:
    """Metadata v10-11 naming a topic by id, or by no name: INVALID_REQUEST for each topic, as Kafka
    (KafkaApis.handleTopicMetadataRequest throws InvalidRequestException, and
    MetadataRequest.getErrorResponse answers it for each topic, a null name as "")."""
    return _encode_body(ApiKey.METADATA, version, {
        "throttle_time": 0, "brokers": [], "cluster_id": None, "controller_id": -1, "topics": [
            {"error_code": ErrorCode.invalid_request, "name": t.name or "", "topic_id": t.topic_id or ZERO_UUID,
             "is_internal": False, "partitions": []} for t in topics]})


def _encode_body(api_key: int, version: int, body: dict) -> bytes:
    """The body alone (cached Metadata answers any correlation id)."""
    encoded = codec.encode_response(api_key, version, 0, body)
    return encoded[5 if codec.response_schema(api_key, version).__flexible__ else 4:]

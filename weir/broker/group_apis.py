"""Request handlers of the classic consumer group protocol, over every version we advertise.

FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
ListGroups, DescribeGroups, DeleteGroups, OffsetDelete. Each handler turns a kio request into
calls on the coordinator (`GroupCoordinator`, the shell) and the group (`Group`, the pure core),
and returns a dict for kio to encode - or a coroutine when the answer must wait: a JoinGroup
parked until the rebalance's join phase ends, a SyncGroup until the leader's assignment is
stored, a commit until the ISR of `__consumer_offsets` has it. Version differences are handled
here, not in the core.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from weir.broker.consumer_group_apis import ConsumerGroupApis
from weir.broker.group_coordinator import GroupCoordinator, now_ms
from weir.groups.consumer_group import ConsumerGroup
from weir.groups.group import UNKNOWN_MEMBER, Effects, GroupState, JoinRequest, JoinResult, SyncResult
from weir.groups.records import OffsetValue
from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey
from weir.security.authorization import (CLUSTER, DENIED_ERROR, GROUP, NO_OPERATIONS, TOPIC, TXN, RequestAuthorizer,
                                         allowed, authorized_operations, cluster_error, denied)

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2  # KIP-932, from FindCoordinator v6
DEFAULT_RETENTION_TIME = -1  # OffsetCommit v2-v4: the broker's offsets.retention.minutes
_MS = timedelta(milliseconds=1)
MAX_TIMESTAMP = 2**63 - 1


def _ms(value) -> int:
    return value // _MS if isinstance(value, timedelta) else int(value)


def _metadata_length(metadata: str) -> int:
    """A committed offset's metadata as Kafka measures it against offset.metadata.max.bytes:
    Java's String.length(), UTF-16 code units, not bytes (GroupMetadataManager.
    validateOffsetMetadataLength, KafkaApis' TxnOffsetCommit check)."""
    return len(metadata.encode("utf-16-le")) // 2


def _unverifiable_producer(producer_id: int, producer_epoch: int) -> ErrorCode | None:
    """The error of a producer id or epoch that InitProducerId never hands out, as Kafka's KIP-890
    verification answers it: no transactional id maps to a negative producer id
    (INVALID_PRODUCER_ID_MAPPING) and a negative epoch is fenced (PRODUCER_FENCED, which the
    producer sees as INVALID_PRODUCER_EPOCH); TransactionCoordinator.handleVerifyPartitionsInTransaction."""
    if producer_id < 0:
        return ErrorCode.invalid_producer_id_mapping
    if producer_epoch < 0:
        return ErrorCode.invalid_producer_epoch
    return None


class GroupApis:
    def __init__(self, coordinator: GroupCoordinator, transactions=None, authz: RequestAuthorizer | None = None) -> None:
        """`transactions`: the transaction coordinator's shell, for FindCoordinator key type 1
        (anything with `async find_coordinator(transactional_id) -> (error, broker)`)."""
        self.coordinator = coordinator
        self.transactions = transactions
        self.authz = authz
        self.handlers = {
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.JOIN_GROUP: self.join_group,
            ApiKey.SYNC_GROUP: self.sync_group,
            ApiKey.HEARTBEAT: self.heartbeat,
            ApiKey.LEAVE_GROUP: self.leave_group,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.LIST_GROUPS: self.list_groups,
            ApiKey.DESCRIBE_GROUPS: self.describe_groups,
            ApiKey.DELETE_GROUPS: self.delete_groups,
            ApiKey.OFFSET_DELETE: self.offset_delete,
            ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit,
        }
        self.handlers.update(ConsumerGroupApis(coordinator, authz).handlers)  # KIP-848's own APIs

    # -- FindCoordinator -----------------------------------------------------------------

    def find_coordinator(self, header: RequestHeader, request):
        return self._find_coordinator(header, request)

    async def _find_coordinator(self, header: RequestHeader, request) -> dict:
        version, listener = header.api_version, header.listener
        key_type = request.key_type if version >= 1 else KEY_TYPE_GROUP
        keys = list(request.coordinator_keys) if version >= 4 else [request.key]
        resource_type = TXN if key_type == KEY_TYPE_TRANSACTION else GROUP
        # DESCRIBE on the group or transactional id (a share group's: CLUSTER_ACTION, below)
        refused = denied(self.authz, header, resource_type, keys) if key_type != KEY_TYPE_SHARE else set()
        results = []
        for key in keys:
            out = {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": ErrorCode.none,
                   "error_message": None}
            finder = {KEY_TYPE_GROUP: self.coordinator,
                      KEY_TYPE_TRANSACTION: self.transactions}.get(key_type)
            if key in refused:
                out["error_code"] = DENIED_ERROR[resource_type]
            elif key_type == KEY_TYPE_SHARE and version >= 6:  # as Kafka 3.9, which has no share coordinator
                out["error_code"] = cluster_error(self.authz, header) or ErrorCode.coordinator_not_available
                out["error_message"] = "no share group coordinator"
            elif finder is None:
                out["error_code"] = ErrorCode.invalid_request
                out["error_message"] = f"key type {key_type}: only group and transaction coordinators are served"
            else:
                error, broker = await finder.find_coordinator(key)
                out["error_code"] = error
                address = broker.address(listener) if broker is not None else None
                if broker is not None and address is None:  # the coordinator has no endpoint on this listener
                    out["error_code"] = ErrorCode.coordinator_not_available
                    out["error_message"] = f"the coordinator has no listener {listener}"
                elif broker is not None:
                    out.update(node_id=broker.broker_id, host=address[0], port=address[1])
                elif error:
                    out["error_message"] = error.name
            results.append(out)
        if version >= 4:
            return {"throttle_time": 0, "coordinators": results}
        return {"throttle_time": 0, **results[0]}

    # -- JoinGroup ---------------------------------------------------------------------------

    def join_group(self, header: RequestHeader, request):
        version = header.api_version
        session_timeout = _ms(request.session_timeout)
        join = JoinRequest(
            member_id=request.member_id or UNKNOWN_MEMBER,
            group_instance_id=request.group_instance_id if version >= 5 else None,
            client_id=header.client_id or "", client_host=header.client_host,
            session_timeout_ms=session_timeout,
            rebalance_timeout_ms=_ms(request.rebalance_timeout) if version >= 1 else session_timeout,
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
            require_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9)
        error = self._group_error(header, request.group_id)
        group = None
        if error is None:
            group = self.coordinator.group(request.group_id, create=join.member_id == UNKNOWN_MEMBER)
            if group is None and request.group_id in self.coordinator.consumer_groups:
                error = ErrorCode.inconsistent_group_protocol  # a consumer-protocol group with members
            elif group is None:
                error = ErrorCode.unknown_member_id
        if error is not None:
            return self._join_response(version, JoinResult(error, join.member_id))
        future = asyncio.get_running_loop().create_future()
        effects = group.join(join, self.coordinator.new_member_id(join.client_id), future, now_ms())
        self.coordinator.apply(group, effects)
        if future.done():
            return self._join_response(version, future.result())
        return self._join_later(version, future)

    def _group_error(self, header: RequestHeader, group_id: str, empty_allowed: bool = False) -> ErrorCode | None:
        """GROUP_AUTHORIZATION_FAILED without the API's operation on the group, else the coordinator's
        error (`empty_allowed`: the APIs for which Kafka accepts the empty group id)."""
        if not allowed(self.authz, header, GROUP, group_id):
            return ErrorCode.group_authorization_failed
        return self.coordinator.coordinator_error(group_id, empty_allowed)

    async def _join_later(self, version: int, future: asyncio.Future) -> dict:
        return self._join_response(version, await future)

    @staticmethod
    def _join_response(version: int, result: JoinResult) -> dict:
        return {"throttle_time": 0, "error_code": result.error, "generation_id": result.generation,
                "protocol_type": result.protocol_type,
                "protocol_name": result.protocol_name if result.protocol_name is not None or version >= 7 else "",
                "leader": result.leader, "skip_assignment": result.skip_assignment, "member_id": result.member_id,
                "members": [{"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in result.members]}

    # -- SyncGroup -----------------------------------------------------------------------

    def sync_group(self, header: RequestHeader, request):
        version = header.api_version
        error = self._group_error(header, request.group_id)
        if error == ErrorCode.coordinator_load_in_progress:
            # Kafka's handleSyncGroup: the rebalance in progress is lost with the old coordinator;
            # REBALANCE_IN_PROGRESS sends the member back to JoinGroup (older clients do not expect
            # COORDINATOR_LOAD_IN_PROGRESS here)
            error = ErrorCode.rebalance_in_progress
        group = self.coordinator.group(request.group_id, create=False) if error is None else None
        if error is None and group is None:
            error = ErrorCode.unknown_member_id
        if error is not None:
            return self._sync_response(SyncResult(error))
        future = asyncio.get_running_loop().create_future()
        effects = group.sync(request.member_id, request.group_instance_id if version >= 3 else None,
                             request.generation_id, request.protocol_type if version >= 5 else None,
                             request.protocol_name if version >= 5 else None,
                             {a.member_id: bytes(a.assignment) for a in request.assignments}, future, now_ms())
        self.coordinator.apply(group, effects)
        if future.done():
            return self._sync_response(future.result())
        return self._sync_later(future)

    async def _sync_later(self, future: asyncio.Future) -> dict:
        return self._sync_response(await future)

    @staticmethod
    def _sync_response(result: SyncResult) -> dict:
        return {"throttle_time": 0, "error_code": result.error, "protocol_type": result.protocol_type,
                "protocol_name": result.protocol_name, "assignment": result.assignment}

    # -- Heartbeat, LeaveGroup -----------------------------------------------------------------

    def heartbeat(self, header: RequestHeader, request) -> dict:
        error = self._group_error(header, request.group_id)
        if error == ErrorCode.coordinator_load_in_progress:
            error = ErrorCode.none  # Kafka's handleHeartbeat: "the group is still loading, so respond just blindly"
        elif error is None:
            group = self.coordinator.group(request.group_id, create=False)
            if group is None:
                error = ErrorCode.unknown_member_id
            else:
                error = group.heartbeat(request.member_id, request.group_instance_id if header.api_version >= 3
                                        else None, request.generation_id, now_ms())
                self.coordinator.apply(group, _no_effects())
        return {"throttle_time": 0, "error_code": error}

    def leave_group(self, header: RequestHeader, request) -> dict:
        version = header.api_version
        leaving = ([(m.member_id, m.group_instance_id) for m in request.members] if version >= 3
                   else [(request.member_id, None)])
        error = self._group_error(header, request.group_id)
        group = self.coordinator.group(request.group_id, create=False) if error is None else None
        members = []
        for member_id, instance_id in leaving:
            if error is not None:
                code = error
            elif group is None:
                code = ErrorCode.unknown_member_id
            else:
                code, effects = group.leave(member_id, instance_id, now_ms())
                self.coordinator.apply(group, effects)
            members.append({"member_id": member_id, "group_instance_id": instance_id, "error_code": code})
        if version >= 3:
            return {"throttle_time": 0, "error_code": error or ErrorCode.none,
                    "members": [] if error is not None else members}
        return {"throttle_time": 0, "error_code": members[0]["error_code"]}

    # -- OffsetCommit --------------------------------------------------------------------------

    def offset_commit(self, header: RequestHeader, request):
        version = header.api_version
        now = now_ms()
        wanted = [(t.name, p) for t in request.topics for p in t.partitions]
        error = self._group_error(header, request.group_id, empty_allowed=True)
        refused = denied(self.authz, header, TOPIC, [t.name for t in request.topics])
        group = None
        # v0 (which Kafka stored in ZooKeeper; Weir keeps it in __consumer_offsets as v1+) names
        # no member: a commit from outside the group, as generation -1 is
        generation, member_id = (request.generation_id_or_member_epoch, request.member_id) if version >= 1 else (-1, "")
        if error is None:
            group = self.coordinator.consumer_groups.get(request.group_id) or \
                self.coordinator.group(request.group_id, create=False)
            if group is None:
                if generation < 0:
                    group = self.coordinator.group(request.group_id, create=True)
                else:
                    error = ErrorCode.illegal_generation
        if error is None and isinstance(group, ConsumerGroup):
            refusal = group.validate_offset_commit(member_id, generation, version)
            error = refusal[0] if refusal is not None else None
        elif error is None:
            error = group.validate_offset_commit(member_id, request.group_instance_id if version >= 7
                                                 else None, generation, now)
        results: dict[tuple[str, int], ErrorCode] = {}
        to_write: dict[tuple[str, int], OffsetValue] = {}
        # Kafka takes any retention_time (v2-v4) but -1, zero and negative ones too, as the offset's
        # own lifetime (GroupCoordinatorAdapter.commitOffsets)
        retention = _ms(getattr(request, "retention_time", DEFAULT_RETENTION_TIME))
        # at most int64's end: Java's sum wraps around, expiring at once what was to be kept longest
        expire = min(now + retention, MAX_TIMESTAMP) if retention != DEFAULT_RETENTION_TIME else -1
        topics = self.coordinator.replicas.view.topics
        for name, p in wanted:
            key = (name, p.partition_index)
            metadata = p.committed_metadata or ""
            if error is not None:
                results[key] = error
            elif name in refused:
                results[key] = ErrorCode.topic_authorization_failed
            elif name not in topics or p.partition_index not in topics[name].replicas:
                results[key] = ErrorCode.unknown_topic_or_partition
            elif _metadata_length(metadata) > self.coordinator.group_config.max_metadata_bytes:
                results[key] = ErrorCode.offset_metadata_too_large
            else:
                epoch = p.committed_leader_epoch if version >= 6 else -1
                # v1's own commit time, which Kafka keeps (and expires the offset from) unless -1
                committed_at = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now
                to_write[key] = OffsetValue(p.committed_offset, epoch, metadata, committed_at, expire)
        if not to_write:
            self._settle(group)
            return self._commit_response(request, results)
        return self._commit_later(request, group, to_write, results)

    async def _commit_later(self, request, group, to_write, results) -> dict:
        error = await self.coordinator.commit_offsets(group, to_write)
        for key in to_write:
            results[key] = error
        self._settle(group)
        return self._commit_response(request, results)

    def _settle(self, group) -> None:
        """After a request on a classic group: its timer re-armed, a group made for nothing dropped."""
        if isinstance(group, ConsumerGroup) or group is None:
            return
        if self.coordinator.groups.get(group.group_id) is group:
            self.coordinator.apply(group, _no_effects())

    @staticmethod
    def _commit_response(request, results) -> dict:
        return {"throttle_time": 0, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                             "error_code": results[(t.name, p.partition_index)]}
                                            for p in t.partitions]} for t in request.topics]}

    # -- TxnOffsetCommit (KIP-98; KIP-447's member and generation from v3) ----------------------

    def txn_offset_commit(self, header: RequestHeader, request):
        version = header.api_version
        now = now_ms()
        if not allowed(self.authz, header, TXN, request.transactional_id):
            error = ErrorCode.transactional_id_authorization_failed
        else:
            error = self._group_error(header, request.group_id)
        refused = denied(self.authz, header, TOPIC, [t.name for t in request.topics])
        group = None
        if error is None:
            group = self.coordinator.consumer_groups.get(request.group_id) or \
                self.coordinator.group(request.group_id, create=True)  # Kafka's: created if unknown
            # Kafka verifies the producer (KIP-890) before doTxnCommitOffsets checks the member
            error = _unverifiable_producer(request.producer_id, request.producer_epoch)
            if error is None and isinstance(group, ConsumerGroup):
                refusal = group.validate_offset_commit(request.member_id if version >= 3 else UNKNOWN_MEMBER,
                                                       request.generation_id if version >= 3 else -1, version,
                                                       transactional=True)
                error = refusal[0] if refusal is not None else None
            elif error is None:
                error = group.validate_txn_offset_commit(
                    request.member_id if version >= 3 else UNKNOWN_MEMBER,
                    request.group_instance_id if version >= 3 else None,
                    request.generation_id if version >= 3 else -1)
        results: dict[tuple[str, int], ErrorCode] = {}
        to_write: dict[tuple[str, int], OffsetValue] = {}
        topics = self.coordinator.replicas.view.topics
        for t in request.topics:
            for p in t.partitions:
                key = (t.name, p.partition_index)
                metadata = p.committed_metadata or ""
                if t.name in refused:
                    results[key] = ErrorCode.topic_authorization_failed
                elif t.name not in topics or p.partition_index not in topics[t.name].replicas:
                    results[key] = ErrorCode.unknown_topic_or_partition
                elif error is not None:
                    results[key] = error
                elif _metadata_length(metadata) > self.coordinator.group_config.max_metadata_bytes:
                    results[key] = ErrorCode.offset_metadata_too_large
                else:
                    epoch = p.committed_leader_epoch if version >= 2 else -1
                    to_write[key] = OffsetValue(p.committed_offset, epoch, metadata, now, -1)
        if not to_write:
            self._settle(group)  # a group made for nothing goes again
            return self._txn_commit_response(version, request, results)
        return self._txn_commit_later(version, request, group, to_write, results)

    async def _txn_commit_later(self, version: int, request, group, to_write, results) -> dict:
        error = await self.coordinator.commit_txn_offsets(group, request.transactional_id, request.producer_id,
                                                          request.producer_epoch, to_write)
        for key in to_write:
            results[key] = error
        self._settle(group)
        return self._txn_commit_response(version, request, results)

    @staticmethod
    def _txn_commit_response(version: int, request, results) -> dict:
        if version < 2:  # Kafka: 0.11-2.0 producers do not retry a loading coordinator (KAFKA-7296)
            results = {key: ErrorCode.coordinator_not_available if e == ErrorCode.coordinator_load_in_progress else e
                       for key, e in results.items()}
        return {"throttle_time": 0, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                             "error_code": results[(t.name, p.partition_index)]}
                                            for p in t.partitions]} for t in request.topics]}

    # -- OffsetFetch -----------------------------------------------------------------------------

    def offset_fetch(self, header: RequestHeader, request) -> dict:
        version = header.api_version
        stable = version >= 7 and request.require_stable
        if version >= 8:
            groups = [self._fetch_group(header, g.group_id, g.topics, stable, getattr(g, "member_id", None),
                                        getattr(g, "member_epoch", -1)) for g in request.groups]
            return {"throttle_time": 0, "groups": groups}
        out = self._fetch_group(header, request.group_id, request.topics, stable)
        return {"throttle_time": 0, "topics": out["topics"], "error_code": out["error_code"]}

    def _fetch_group(self, header: RequestHeader, group_id: str, topics, require_stable: bool = False,
                     member_id: str | None = None, member_epoch: int = -1) -> dict:
        """require_stable (KIP-447): UNSTABLE_OFFSET_COMMIT for a partition with transactional
        offsets not yet committed or aborted (the consumer waits for the marker). Topics the
        principal may not describe are left out of "all topics" and refused when named."""
        version = header.api_version
        error = self._group_error(header, group_id, empty_allowed=True)
        if error is not None and version >= 2:
            return {"group_id": group_id, "topics": [], "error_code": error}
        group = self._any_group(group_id) if error is None else None
        # v9: a consumer-protocol member's fetch names its epoch (KIP-848); Kafka checks no classic member's
        if isinstance(group, ConsumerGroup):
            refusal = group.validate_offset_fetch(member_id, member_epoch)
            if refusal is not None:
                return {"group_id": group_id, "topics": [], "error_code": refusal[0]}
        offsets = group.offsets if group is not None else {}
        if topics is None:
            wanted: dict[str, list[int]] = {}
            for name, index in sorted(offsets):
                wanted.setdefault(name, []).append(index)
            for name in denied(self.authz, header, TOPIC, wanted):
                del wanted[name]
            refused = set()
        else:
            wanted = {t.name: list(t.partition_indexes) for t in topics}
            refused = denied(self.authz, header, TOPIC, wanted)
        out = []
        for name, indexes in wanted.items():
            partitions = []
            for index in indexes:
                committed = offsets.get((name, index))
                if name in refused:
                    partitions.append({"partition_index": index, "error_code": ErrorCode.topic_authorization_failed,
                                       "committed_offset": -1, "committed_leader_epoch": -1, "metadata": ""})
                    continue
                if require_stable and group is not None and group.has_pending_offsets((name, index)):
                    partitions.append({"partition_index": index, "error_code": ErrorCode.unstable_offset_commit,
                                       "committed_offset": -1, "committed_leader_epoch": -1, "metadata": ""})
                    continue
                partitions.append({"partition_index": index, "error_code": error or ErrorCode.none,
                                   "committed_offset": committed.offset if committed else -1,
                                   "committed_leader_epoch": committed.leader_epoch if committed else -1,
                                   "metadata": committed.metadata if committed else ""})
            out.append({"name": name, "partitions": partitions})
        return {"group_id": group_id, "topics": out, "error_code": ErrorCode.none}

    def _any_group(self, group_id: str):
        """The group of either protocol, for what both have: offsets, deletion."""
        return self.coordinator.consumer_groups.get(group_id) or self.coordinator.group(group_id, create=False)

    # -- ListGroups, DescribeGroups, DeleteGroups -----------------------------------------------

    def list_groups(self, header: RequestHeader, request) -> dict:
        states = {s.lower() for s in request.states_filter} if header.api_version >= 4 else set()
        types = {t.lower() for t in request.types_filter} if header.api_version >= 5 else set()
        error = ErrorCode.coordinator_load_in_progress if self.coordinator.loading else ErrorCode.none
        owned = self.coordinator.owned
        listed = [(g.group_id, g.protocol_type or "", g.state.value, "classic")
                  for g in self.coordinator.groups.values() if g.partition in owned and not g.is_(GroupState.DEAD)]
        listed += [(g.group_id, "consumer", g.state.value, "consumer")
                   for g in self.coordinator.consumer_groups.values() if g.partition in owned and not g.dead]
        groups = [{"group_id": group_id, "protocol_type": protocol_type, "group_state": state, "group_type": kind}
                  for group_id, protocol_type, state, kind in listed
                  if (not states or state.lower() in states) and (not types or kind in types)]
        if not allowed(self.authz, header, CLUSTER):  # DESCRIBE on the cluster lists all, else those on each group
            hidden = denied(self.authz, header, GROUP, [g["group_id"] for g in groups])
            groups = [g for g in groups if g["group_id"] not in hidden]
        return {"throttle_time": 0, "error_code": error, "groups": groups}

    def describe_groups(self, header: RequestHeader, request) -> dict:
        out = []
        version = header.api_version
        for group_id in request.groups:
            error = self._group_error(header, group_id, empty_allowed=True)
            group = self.coordinator.group(group_id, create=False) if error is None else None
            if group is not None:
                entry = {"error_code": ErrorCode.none, **group.summary()}
            elif error is None and version >= 6:  # KIP-1043: no classic group of that id
                message = (f"Group {group_id} is not a classic group." if group_id in self.coordinator.consumer_groups
                           else f"Group {group_id} not found.")
                entry = {"error_code": ErrorCode.group_id_not_found, "error_message": message, "group_id": group_id,
                         "group_state": GroupState.DEAD.value, "protocol_type": "", "protocol_data": "", "members": []}
            else:
                entry = {"error_code": error or ErrorCode.none, "group_id": group_id,
                         "group_state": GroupState.DEAD.value if error is None else "",
                         "protocol_type": "", "protocol_data": "", "members": []}
            entry["authorized_operations"] = (authorized_operations(self.authz, header, GROUP, group_id)
                                              if getattr(request, "include_authorized_operations", False)
                                              and entry["error_code"] == ErrorCode.none else NO_OPERATIONS)
            out.append(entry)
        return {"throttle_time": 0, "groups": out}

    def delete_groups(self, header: RequestHeader, request):
        return self._delete_groups(header, list(request.groups_names))

    async def _delete_groups(self, header: RequestHeader, names: list[str]) -> dict:
        results = []
        for group_id in names:
            error = self._group_error(header, group_id, empty_allowed=True)
            if error is None:
                group = self._any_group(group_id)
                error = ErrorCode.group_id_not_found if group is None else group.check_deletable()
                if error is None and isinstance(group, ConsumerGroup):
                    error = await self.coordinator.delete_consumer_group(group) or None
                elif error is None:
                    self.coordinator.apply(group, group.mark_dead(ErrorCode.coordinator_not_available, now_ms()))
                    del self.coordinator.groups[group_id]
                    error = await self.coordinator.delete_group(group)
            results.append({"group_id": group_id, "error_code": error or ErrorCode.none})
        return {"throttle_time": 0, "results": results}

    def offset_delete(self, header: RequestHeader, request):
        refused = denied(self.authz, header, TOPIC, [t.name for t in request.topics])
        keys = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
        return self._offset_delete(self._group_error(header, request.group_id), request.group_id,
                                   [k for k in keys if k[0] not in refused],
                                   {k: ErrorCode.topic_authorization_failed for k in keys if k[0] in refused})

    async def _offset_delete(self, error: ErrorCode | None, group_id: str, keys: list[tuple[str, int]],
                             refused: dict[tuple[str, int], ErrorCode]) -> dict:
        group = self._any_group(group_id) if error is None else None
        if error is None and group is None:
            error = ErrorCode.group_id_not_found
        if error is None:
            error, results = group.deletable_offsets(keys)
            results = {**results, **refused}
        if error is None:
            deleted = [key for key, code in results.items() if code == ErrorCode.none]
            error = await self.coordinator.delete_offsets(group, deleted)
        if error is not None:
            return {"error_code": error, "throttle_time": 0, "topics": []}
        topics: dict[str, list] = {}
        for (topic, index), code in results.items():
            topics.setdefault(topic, []).append({"partition_index": index, "error_code": code})
        return {"error_code": ErrorCode.none, "throttle_time": 0,
                "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()]}


def _no_effects() -> Effects:
    """For a request that changed only a member's liveness: the group's timer is re-armed."""
    return Effects()

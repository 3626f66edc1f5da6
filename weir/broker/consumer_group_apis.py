"""Request handlers of the consumer group protocol (KIP-848): ConsumerGroupHeartbeat (68) v0-1
and ConsumerGroupDescribe (69) v0-1, as Kafka 4 serves them.

A heartbeat is checked (`check_heartbeat`), fed to its group (`ConsumerGroup`, the pure core)
with the cluster's topics now, and answered once the records it changed are in the ISR of
`__consumer_offsets` (a heartbeat that changed nothing is answered at once). Version 0 lets the
coordinator name a member that sent no id; from version 1 the client chooses it (KIP-1082).
Assignments travel by topic id, as Metadata gives them; Describe adds the names.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

from weir.broker.group_coordinator import GroupCoordinator, now_ms
from weir.groups.consumer_group import (JOIN_EPOCH, ConsumerGroup, HeartbeatRequest, HeartbeatResult, check_heartbeat,
                                        normalized)
from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey
from weir.security.authorization import GROUP, NO_OPERATIONS, RequestAuthorizer, allowed, authorized_operations

_MS = timedelta(milliseconds=1)
MEMBER_TYPE_CONSUMER = 1  # ConsumerGroupDescribe v1's MemberType (0: classic)


class ConsumerGroupApis:
    def __init__(self, coordinator: GroupCoordinator, authz: RequestAuthorizer | None = None) -> None:
        self.coordinator = coordinator
        self.authz = authz
        self.handlers = {
            ApiKey.CONSUMER_GROUP_HEARTBEAT: self.heartbeat,
            ApiKey.CONSUMER_GROUP_DESCRIBE: self.describe,
        }

    # -- ConsumerGroupHeartbeat -------------------------------------------------------------

    def heartbeat(self, header: RequestHeader, request):
        version = header.api_version
        owned = request.topic_partitions
        beat = HeartbeatRequest(
            member_id=request.member_id, member_epoch=request.member_epoch, instance_id=request.instance_id,
            rack_id=request.rack_id, rebalance_timeout_ms=_ms(request.rebalance_timeout),
            subscribed_topic_names=(tuple(request.subscribed_topic_names)
                                    if request.subscribed_topic_names is not None else None),
            subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),  # v1 on
            server_assignor=request.server_assignor,
            owned=None if owned is None else normalized({t.topic_id: frozenset(t.partitions) for t in owned}),
            client_id=header.client_id or "", client_host=header.client_host)
        config = self.coordinator.consumer_config
        if not config.enabled:
            return _response(HeartbeatResult(ErrorCode.unsupported_version, "The consumer group protocol is not "
                                             "enabled (group.coordinator.rebalance.protocols)."))
        invalid = check_heartbeat(request.group_id, beat, config.assignors, member_id_required=version >= 1)
        if invalid is not None:
            return _response(HeartbeatResult(invalid[0], invalid[1]))
        if not allowed(self.authz, header, GROUP, request.group_id):
            return _response(HeartbeatResult(ErrorCode.group_authorization_failed))
        error = self.coordinator.coordinator_error(request.group_id)
        if error is not None:
            return _response(HeartbeatResult(error))
        if not beat.member_id:  # v0: the coordinator names the member
            beat = dataclasses.replace(beat, member_id=str(uuid.uuid4()))
        group, error, message = self.coordinator.consumer_group(request.group_id,
                                                                create=beat.member_epoch == JOIN_EPOCH)
        if group is None:
            return _response(HeartbeatResult(error, message))
        if beat.member_epoch < JOIN_EPOCH:
            result = group.leave(beat.member_id, beat.instance_id, beat.member_epoch)
        else:
            result = group.heartbeat(beat, self.coordinator.topics(), now_ms())
        self.coordinator.schedule_consumer(group)
        return self._answer_when_stored(group, result)

    async def _answer_when_stored(self, group: ConsumerGroup, result: HeartbeatResult) -> dict:
        error = await self.coordinator.store_consumer_group(group)
        if error:
            return _response(HeartbeatResult(error, f"storing the group failed: {error.name}"))
        return _response(result)

    # -- ConsumerGroupDescribe ----------------------------------------------------------------

    def describe(self, header: RequestHeader, request) -> dict:
        names = {t.topic_id: t.name for t in self.coordinator.replicas.view.topics.values()}
        out = []
        for group_id in request.group_ids:
            entry = {"group_id": group_id, "error_code": ErrorCode.none, "error_message": None, "group_state": "",
                     "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
                     "authorized_operations": NO_OPERATIONS}
            error = (ErrorCode.group_authorization_failed if not allowed(self.authz, header, GROUP, group_id)
                     else self.coordinator.coordinator_error(group_id))
            group = None
            if error is None:
                group, error, entry["error_message"] = self.coordinator.consumer_group(group_id, create=False)
                error = error or None
            if error is not None:
                entry["error_code"] = error
            else:
                entry.update(_described(group, names))
                if request.include_authorized_operations:
                    entry["authorized_operations"] = authorized_operations(self.authz, header, GROUP, group_id)
            out.append(entry)
        return {"throttle_time": 0, "groups": out}


def _described(group: ConsumerGroup, names: dict) -> dict:
    def assignment(a) -> dict:
        return {"topic_partitions": [{"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
                                     for t, ps in sorted(a.items())]}
    return {"group_state": group.state.value, "group_epoch": group.group_epoch,
            "assignment_epoch": group.target_epoch, "assignor_name": group.preferred_assignor(),
            "members": [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                         "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                         "subscribed_topic_names": list(m.subscribed_topic_names),
                         "subscribed_topic_regex": m.subscribed_topic_regex,
                         "assignment": assignment(m.assigned),
                         "target_assignment": assignment(group.target.get(m.member_id, {})),
                         "member_type": MEMBER_TYPE_CONSUMER}
                        for m in group.members.values()]}


def _ms(value) -> int:
    return value // _MS if isinstance(value, timedelta) else int(value)


def _response(result: HeartbeatResult) -> dict:
    assignment = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                           for t, ps in sorted(result.assignment.items())]}
    return {"throttle_time": 0, "error_code": result.error, "error_message": result.message,
            "member_id": result.member_id, "member_epoch": result.member_epoch,
            "heartbeat_interval": result.heartbeat_interval_ms, "assignment": assignment}

"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455), answered by the active
controller: the rules are weir/controller/reassignment.py's, run on the controller's event queue."""

from weir.broker.controller_service import ControllerService
from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey
from weir.security.authorization import RequestAuthorizer, cluster_error, refusal


class ReassignmentApis:
    def __init__(self, controller: ControllerService, authz: RequestAuthorizer | None = None) -> None:
        self.controller = controller
        self.authz = authz
        self.handlers = {
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self.list_partition_reassignments,
        }

    def alter_partition_reassignments(self, header: RequestHeader, request):
        if cluster_error(self.authz, header):
            return refusal(ErrorCode.cluster_authorization_failed, error_message=None, responses=[])
        return self._alter(header.api_version, request)

    async def _alter(self, version: int, request) -> dict:
        allow_change = getattr(request, "allow_replication_factor_change", True)
        answer = {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "responses": []}
        if version >= 1:
            answer["allow_replication_factor_change"] = allow_change
        if not self.controller.active:
            answer["error_code"] = ErrorCode.not_controller
            return answer
        # a map by partition, the last entry winning, answered once each, as Kafka's
        # handleAlterPartitionReassignmentsRequest
        targets = {(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
                   for t in request.topics for p in t.partitions}
        results = await self.controller.call("reassign", targets, allow_change) or {}
        by_topic: dict[str, list] = {}
        for key in targets:
            code, message = results.get(key, (ErrorCode.not_controller, None))
            by_topic.setdefault(key[0], []).append({"partition_index": key[1], "error_code": code,
                                                    "error_message": message})
        answer["responses"] = [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
        return answer

    def list_partition_reassignments(self, header: RequestHeader, request) -> dict:
        answer = {"throttle_time": 0, "error_code": cluster_error(self.authz, header), "error_message": None,
                  "topics": []}
        if answer["error_code"]:
            return answer
        core = self.controller.core
        if not self.controller.active or core is None:
            answer["error_code"] = ErrorCode.not_controller
            return answer
        wanted = None if request.topics is None else {(t.name, p) for t in request.topics
                                                      for p in t.partition_indexes}
        by_topic: dict[str, list] = {}
        for (topic, p), (replicas, adding, removing) in core.reassignment.reassignments().items():
            if wanted is None or (topic, p) in wanted:
                by_topic.setdefault(topic, []).append({"partition_index": p, "replicas": replicas,
                                                       "adding_replicas": adding, "removing_replicas": removing})
        answer["topics"] = [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
        return answer

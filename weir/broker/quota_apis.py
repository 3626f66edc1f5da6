"""DescribeClientQuotas (api 48) and AlterClientQuotas (api 49), KIP-546, as Kafka's ZooKeeper
mode serves them: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster, the filter and validation of
weir.quotas (INVALID_REQUEST for a bad entity, key or value; UNSUPPORTED_VERSION for a custom
entity type in a filter), the quotas stored by weir.coordination.client_quota_store. A bad filter
fails the whole DescribeClientQuotas (its error, no entries); each AlterClientQuotas entry
succeeds or fails alone.
"""

import logging

from weir.coordination.client_quota_store import ClientQuotaStore
from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey
from weir.quotas.describe import checked_filter, described
from weir.quotas.entities import Entity, QuotaError, checked_entity
from weir.security.authorization import RequestAuthorizer, cluster_error, refusal

log = logging.getLogger(__name__)


def _entity_out(e: Entity) -> list[dict]:
    return [{"entity_type": t, "entity_name": n} for t, n in e]


class QuotaApis:
    def __init__(self, store: ClientQuotaStore, authz: RequestAuthorizer | None = None) -> None:
        self.store = store
        self.authz = authz
        self.handlers = {
            ApiKey.DESCRIBE_CLIENT_QUOTAS: self.describe,
            ApiKey.ALTER_CLIENT_QUOTAS: self.alter,
        }

    def describe(self, header: RequestHeader, request):
        error = cluster_error(self.authz, header)
        if error:
            return refusal(error, error_message=None, entries=None)
        try:
            wanted = checked_filter((c.entity_type, c.match_type, c.match) for c in request.components)
        except QuotaError as e:
            return refusal(e.code, error_message=e.message, entries=None)
        return self._describe(wanted, request.strict)

    async def _describe(self, wanted, strict: bool) -> dict:
        try:
            configs = await self.store.read_all()
        except Exception as e:
            log.warning("DescribeClientQuotas: cannot read the quotas: %r", e)
            return refusal(ErrorCode.unknown_server_error, error_message=str(e), entries=None)
        entries = [{"entity": _entity_out(e), "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
                   for e, values in described(configs, wanted, strict)]
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "entries": entries}

    def alter(self, header: RequestHeader, request):
        error = cluster_error(self.authz, header)
        if error:
            return {"throttle_time": 0, "entries": [
                {"error_code": error, "error_message": None,
                 "entity": [{"entity_type": p.entity_type, "entity_name": p.entity_name} for p in entry.entity]}
                for entry in request.entries]}
        return self._alter(request)

    async def _alter(self, request) -> dict:
        out = []
        for entry in request.entries:
            pairs = [(p.entity_type, p.entity_name) for p in entry.entity]
            shown = [{"entity_type": t, "entity_name": n} for t, n in dict(pairs).items()]
            try:
                e = checked_entity(pairs)
                await self.store.alter(e, [(op.key, float(op.value), bool(op.remove)) for op in entry.ops],
                                       validate_only=request.validate_only)
            except QuotaError as error:
                out.append({"error_code": error.code, "error_message": error.message, "entity": shown})
                continue
            except Exception as error:  # ZooKeeper: this entry fails, the others go on
                log.warning("AlterClientQuotas: cannot alter %s: %r", pairs, error)
                out.append({"error_code": ErrorCode.unknown_server_error, "error_message": str(error),
                            "entity": shown})
                continue
            out.append({"error_code": 0, "error_message": None, "entity": shown})
        return {"throttle_time": 0, "entries": out}

"""DescribeAcls (api 29), CreateAcls (30) and DeleteAcls (31), as Kafka's AclApis.

Describe needs CLUSTER DESCRIBE, create and delete CLUSTER ALTER (CLUSTER_AUTHORIZATION_FAILED,
for the whole request or each item). A binding that cannot be stored or a filter with an unknown
value is INVALID_REQUEST. Changes go to ZooKeeper (weir.security.acl_store), which tells every
broker; a deletion answers with the bindings each filter removed.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey
from weir.security.acl_store import AclStore
from weir.security.acls import (AclBinding, AclEntry, AclFilter, InvalidAcl, ResourcePattern, binding_fields,
                                binding_of, check_creatable, entry_fields, filter_of, pattern_fields)
from weir.security.authorization import RequestAuthorizer, cluster_error

log = logging.getLogger(__name__)


class AclApis:
    def __init__(self, authz: RequestAuthorizer | None, store: AclStore | None) -> None:
        """Both None when no authorizer is configured: every request is then SECURITY_DISABLED."""
        self.authz = authz
        self.store = store
        self.handlers = {
            ApiKey.DESCRIBE_ACLS: self.describe_acls,
            ApiKey.CREATE_ACLS: self.create_acls,
            ApiKey.DELETE_ACLS: self.delete_acls,
        }

    def _refusal(self, header: RequestHeader) -> tuple[ErrorCode, str | None]:
        if self.authz is None:
            return ErrorCode.security_disabled, "No Authorizer is configured on the broker"
        error = cluster_error(self.authz, header)
        return error, None if not error else f"{header.principal} may not {ApiKey(header.api_key).name} on the cluster"

    def describe_acls(self, header: RequestHeader, request) -> dict:
        out = {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "resources": []}
        error, message = self._refusal(header)
        try:
            acl_filter = filter_of(request)
        except ValueError as e:
            error, message = (error, message) if error else (ErrorCode.invalid_request, str(e))
        if error:
            return {**out, "error_code": error, "error_message": message}
        by_pattern: dict[ResourcePattern, list] = defaultdict(list)
        for b in self.authz.authorizer.bindings(acl_filter):
            by_pattern[b.pattern].append(entry_fields(b.entry))
        out["resources"] = [{**pattern_fields(p), "acls": acls} for p, acls in by_pattern.items()]
        return out

    def create_acls(self, header: RequestHeader, request):
        return self._create_acls(header, request)

    async def _create_acls(self, header: RequestHeader, request) -> dict:
        error, message = self._refusal(header)
        results = [{"error_code": error, "error_message": message} for _ in request.creations]
        if error:
            return {"throttle_time": 0, "results": results}
        wanted: dict[ResourcePattern, dict[AclEntry, int]] = defaultdict(dict)  # → entry → its index
        for i, c in enumerate(request.creations):
            try:
                binding = binding_of(c, c, "resource_pattern_type")
                check_creatable(binding)
            except (ValueError, InvalidAcl) as e:
                results[i] = {"error_code": ErrorCode.invalid_request, "error_message": str(e)}
                continue
            wanted[binding.pattern][binding.entry] = i
        for pattern, entries in wanted.items():
            try:
                await self.store.update(pattern, lambda old, new=frozenset(entries): old | new)
                log.info("%s added ACLs on %s: %s", header.principal, pattern, sorted(entries))
            except Exception as e:  # per pattern, as Kafka: the other bindings are still created
                log.warning("cannot add ACLs on %s: %r", pattern, e)
                for i in entries.values():
                    results[i] = {"error_code": ErrorCode.unknown_server_error, "error_message": repr(e)}
        return {"throttle_time": 0, "results": results}

    def delete_acls(self, header: RequestHeader, request):
        return self._delete_acls(header, request)

    async def _delete_acls(self, header: RequestHeader, request) -> dict:
        error, message = self._refusal(header)
        results = [{"error_code": error, "error_message": message, "matching_acls": []} for _ in request.filters]
        if error:
            return {"throttle_time": 0, "filter_results": results}
        filters: dict[int, AclFilter] = {}
        for i, f in enumerate(request.filters):
            try:
                filters[i] = filter_of(f)
            except ValueError as e:
                results[i]["error_code"], results[i]["error_message"] = ErrorCode.invalid_request, str(e)
        patterns = {b.pattern for f in filters.values() for b in self.authz.authorizer.bindings(f)}
        for pattern in sorted(patterns):
            def keep(old, pattern=pattern):
                return frozenset(e for e in old if not any(f.matches(AclBinding(pattern, e)) for f in filters.values()))
            try:
                old = await self.store.update(pattern, keep)
            except Exception as e:
                log.warning("cannot remove ACLs on %s: %r", pattern, e)
                for i, f in filters.items():
                    if any(b.pattern == pattern for b in self.authz.authorizer.bindings(f)):
                        results[i]["error_code"], results[i]["error_message"] = ErrorCode.unknown_server_error, repr(e)
                continue
            removed = old - keep(old)
            for i, f in filters.items():  # a binding is reported under each filter that matched it
                results[i]["matching_acls"] += [
                    {"error_code": ErrorCode.none, "error_message": None, **binding_fields(AclBinding(pattern, e))}
                    for e in sorted(removed) if f.matches(AclBinding(pattern, e))]
            if removed:
                log.info("%s removed ACLs on %s: %s", header.principal, pattern, sorted(removed))
        return {"throttle_time": 0, "filter_results": results}

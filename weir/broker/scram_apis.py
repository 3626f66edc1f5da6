"""DescribeUserScramCredentials (api 50) and AlterUserScramCredentials (api 51), KIP-554.

The client salts the password (an upsertion carries salt, salted password and iterations); the
broker derives StoredKey and ServerKey and keeps only those, in ZooKeeper
(weir.security.scram_store). Errors are Kafka's: RESOURCE_NOT_FOUND for an unknown user or
credential or (describing) an empty name, UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL for
(altering) an empty name or iterations out of 4096..16384, DUPLICATE_RESOURCE when one request
names a user's mechanism twice.
"""

import logging
from collections import defaultdict

from weir.protocol.errors import ErrorCode
from weir.protocol.header import RequestHeader
from weir.protocol.scram import MAX_ITERATIONS, MECHANISM_TYPE_OF, MECHANISM_TYPES, MIN_ITERATIONS, ScramCredential
from weir.protocol.versions import ApiKey
from weir.security.authorization import RequestAuthorizer, cluster_error, refusal
from weir.security.scram_store import ConcurrentChange, ScramCredentialStore

log = logging.getLogger(__name__)


class ScramApis:
    def __init__(self, store: ScramCredentialStore, authz: RequestAuthorizer | None = None) -> None:
        self.store = store
        self.authz = authz
        self.handlers = {
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self.describe,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.alter,
        }

    def describe(self, header: RequestHeader, request):
        if cluster_error(self.authz, header):
            return refusal(ErrorCode.cluster_authorization_failed, error_message=None, results=[])
        return self._describe(request)

    async def _describe(self, request) -> dict:
        names = [u.name for u in request.users] if request.users is not None else await self.store.users()
        results = []
        for name in dict.fromkeys(names):
            if not name:  # Kafka's ZkAdminManager: before, and instead of, the check for duplicates
                results.append({"user": name, "error_code": ErrorCode.resource_not_found,
                                "error_message": "Username must not be empty", "credential_infos": []})
                continue
            duplicated = request.users is not None and sum(u.name == name for u in request.users) > 1
            mechanisms = {} if duplicated else await self.store.mechanisms(name)
            if duplicated:
                results.append({"user": name, "error_code": ErrorCode.duplicate_resource,
                                "error_message": f"Cannot describe SCRAM credentials for the same user twice "
                                                 f"in a single request: {name}", "credential_infos": []})
            elif not mechanisms and request.users is not None:
                results.append({"user": name, "error_code": ErrorCode.resource_not_found,
                                "error_message": f"Attempt to describe a user credential that does not exist: {name}",
                                "credential_infos": []})
            elif mechanisms:
                results.append({"user": name, "error_code": 0, "error_message": None, "credential_infos": [
                    {"mechanism": MECHANISM_TYPE_OF[m], "iterations": i}
                    for m, i in sorted(mechanisms.items()) if m in MECHANISM_TYPE_OF]})
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "results": results}

    def alter(self, header: RequestHeader, request):
        if cluster_error(self.authz, header):
            return {"throttle_time": 0, "results": [
                {"user": name, "error_code": ErrorCode.cluster_authorization_failed, "error_message": None}
                for name in dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])]}
        return self._alter(request)

    async def _alter(self, request) -> dict:
        errors: dict[str, tuple[ErrorCode, str]] = {}
        upserts: dict[str, dict[str, ScramCredential]] = defaultdict(dict)
        deletions: dict[str, list[str]] = defaultdict(list)
        seen: set[tuple[str, int]] = set()
        for item, kind in [(d, "delete") for d in request.deletions] + [(u, "upsert") for u in request.upsertions]:
            name, mechanism = item.name, MECHANISM_TYPES.get(int(item.mechanism))
            if name in errors:
                continue
            if not name:
                errors[name] = (ErrorCode.unacceptable_credential, "Username must not be empty")
            elif mechanism is None:
                errors[name] = (ErrorCode.unsupported_sasl_mechanism, f"Unknown SCRAM mechanism {item.mechanism}")
            elif (name, int(item.mechanism)) in seen:
                errors[name] = (ErrorCode.duplicate_resource,
                                "A user credential cannot be altered twice in the same request")
            elif kind == "upsert" and not MIN_ITERATIONS <= item.iterations <= MAX_ITERATIONS:
                errors[name] = (ErrorCode.unacceptable_credential,
                                f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, "
                                f"not {item.iterations}")
            elif kind == "upsert" and (not item.salt or not item.salted_password):
                errors[name] = (ErrorCode.unacceptable_credential, "Salt and salted password must not be empty")
            elif kind == "upsert":
                upserts[name][mechanism] = ScramCredential.from_salted_password(
                    mechanism, bytes(item.salted_password), bytes(item.salt), int(item.iterations))
            else:
                deletions[name].append(mechanism)
            seen.add((name, int(item.mechanism)))
        results = []
        for name in dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]):
            if name in errors:
                code, message = errors[name]
                results.append({"user": name, "error_code": code, "error_message": message})
                continue
            existing = await self.store.mechanisms(name)
            missing = [m for m in deletions.get(name, []) if m not in existing]
            if missing:
                results.append({"user": name, "error_code": ErrorCode.resource_not_found,
                                "error_message": f"Attempt to delete a user credential that does not exist: "
                                                 f"{name} {missing[0]}"})
                continue
            try:
                await self.store.change(name, upserts.get(name, {}), deletions.get(name, []))
            except ConcurrentChange as e:
                results.append({"user": name, "error_code": ErrorCode.unknown_server_error, "error_message": str(e)})
                continue
            log.info("SCRAM credentials of %s: set %s, deleted %s", name, sorted(upserts.get(name, {})) or "none",
                     deletions.get(name) or "none")
            results.append({"user": name, "error_code": 0, "error_message": None})
        return {"throttle_time": 0, "results": results}

"""DescribeClientQuotas' filter (KIP-546), as Kafka's ZooKeeper mode applies it.

A filter is a list of components (entity type, match type, name) and `strict`. An entity matches
when every component finds its type in the entity with a matching name - exact (match type 0),
the default (1), or any name, the default included (2) - and, if strict, the entity has no type
the components do not name. IP components and user/client-id components do not mix. Only
entities with a quota value are answered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from weir.protocol.errors import ErrorCode
from weir.quotas.entities import CLIENT_ID, IP, USER, Entity, QuotaError, quota_values

EXACT, DEFAULT, SPECIFIED = 0, 1, 2
_DUPLICATE = {USER: "user", CLIENT_ID: "client", IP: "ip"}


def checked_filter(components: Iterable[tuple[str, int, str | None]]) -> dict[str, tuple[int, str | None]]:
    """entity type → (match type, name), or QuotaError as Kafka answers a bad filter."""
    components = list(components)
    for _, match_type, name in components:  # DescribeClientQuotasRequest.filter(), before anything
        if match_type not in (EXACT, DEFAULT, SPECIFIED):
            raise QuotaError(ErrorCode.unknown_server_error, f"Unexpected match type: {match_type}")
        if match_type == EXACT and name is None:
            raise QuotaError(ErrorCode.unknown_server_error, "An exact match needs a name")
    out: dict[str, tuple[int, str | None]] = {}
    for entity_type, match_type, name in components:
        if entity_type in _DUPLICATE:
            if entity_type in out:
                raise QuotaError(ErrorCode.invalid_request,
                                 f"Duplicate {_DUPLICATE[entity_type]} filter component entity type")
            out[entity_type] = (match_type, name)
        elif entity_type == "":
            raise QuotaError(ErrorCode.invalid_request, "Unexpected empty filter component entity type")
        else:
            raise QuotaError(ErrorCode.unsupported_version, f"Custom entity type '{entity_type}' not supported")
    if IP in out and (USER in out or CLIENT_ID in out):
        raise QuotaError(ErrorCode.invalid_request, "Invalid entity filter component combination, IP filter "
                                                    "component should not be used with user or clientId filter "
                                                    "component.")
    return out


def matches(e: Entity, wanted: Mapping[str, tuple[int, str | None]], strict: bool) -> bool:
    names = dict(e)
    for entity_type, (match_type, name) in wanted.items():
        if entity_type not in names:
            return False
        if match_type == EXACT and names[entity_type] != name:
            return False
        if match_type == DEFAULT and names[entity_type] is not None:
            return False
    return not strict or all(t in wanted for t in names)


def described(configs: Mapping[Entity, Mapping[str, str]], wanted: Mapping[str, tuple[int, str | None]],
              strict: bool) -> list[tuple[Entity, dict[str, float]]]:
    """The matching entities with their quota values, in entity order."""
    out = []
    for e, config in sorted(configs.items(), key=lambda item: [(t, n is not None, n or "") for t, n in item[0]]):
        values = quota_values(e, config)
        if values and matches(e, wanted, strict):
            out.append((e, values))
    return out

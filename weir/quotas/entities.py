"""Quota entities and their configs, as Kafka's ZooKeeper mode keeps them.

An entity is Kafka's ClientQuotaEntity: its (type, name) pairs sorted by type, a name of None the
type's default (<default> in ZooKeeper). The kinds Kafka serves: a user, a client id, a user and
client id, an IP. Their configs live beside the SCRAM credentials, in Kafka's format
({"version":1,"config":{...}}, values as strings):

    /config/users/<user>                      producer_byte_rate, consumer_byte_rate,
    /config/users/<user>/clients/<client id>  request_percentage, controller_mutation_rate
    /config/clients/<client id>               (users/<user> also holds SCRAM-SHA-* credentials)
    /config/ips/<ip>                          connection_creation_rate

each name sanitized (weir.zk.formats.sanitize) and <default> for a default. After a change the
writer creates /config/changes/config_change_<seq> {"version":2,"entity_path":"users/alice"}
(Kafka's ConfigEntityChangeNotificationSequenceZNode), which every broker follows.

`alter` applies AlterClientQuotas' operations to a stored config, refusing what Kafka refuses
with INVALID_REQUEST and its messages.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Mapping

from weir.protocol.errors import ErrorCode
from weir.zk.formats import desanitize, sanitize

USER, CLIENT_ID, IP = "user", "client-id", "ip"
DEFAULT_NAME = "<default>"  # ZooKeeperInternals.DEFAULT_STRING
CONFIG_PATH = "/config"
CHANGES_PATH = "/config/changes"
CHANGE_PREFIX = "config_change_"
ROOTS = {USER: "users", CLIENT_ID: "clients", IP: "ips"}  # under /config

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
LONG, INT, DOUBLE = "LONG", "INT", "DOUBLE"
# QuotaConfigs.userAndClientQuotaConfigs and ipConfigs: key → type
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: LONG, CONSUMER_BYTE_RATE: LONG, REQUEST_PERCENTAGE: DOUBLE,
                    CONTROLLER_MUTATION_RATE: DOUBLE}
IP_KEYS = {CONNECTION_CREATION_RATE: INT}
_EPSILON = 1e-6
_MAX = {LONG: 2 ** 63 - 1, INT: 2 ** 31 - 1}

Entity = tuple[tuple[str, "str | None"], ...]


class QuotaError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def entity(**names: str | None) -> Entity:
    """entity(user="alice", client_id=None): the pairs, sorted by type (client_id is client-id)."""
    return tuple(sorted((key.replace("_", "-"), name) for key, name in names.items()))


def keys_of(e: Entity) -> Mapping[str, str]:
    """The quota keys an entity may hold, with their types."""
    return IP_KEYS if any(t == IP for t, _ in e) else USER_CLIENT_KEYS


def quota_values(e: Entity, config: Mapping[str, str]) -> dict[str, float]:
    """The quota values of a stored config (not the SCRAM credentials beside them); a value
    that is not a number is left out."""
    out = {}
    for key in keys_of(e):
        if key in config:
            try:
                out[key] = float(config[key])
            except ValueError:
                continue
    return out


# -- validation (ZkAdminManager.alterClientQuotas, with KRaft's check that a value is positive) --

def checked_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity an AlterClientQuotas entry names (a type named twice: the last name counts, as
    Kafka's request reads it into a map), or QuotaError."""
    names: dict[str, str | None] = {}
    for entity_type, name in pairs:
        names[entity_type] = name
    if not names:
        raise QuotaError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    for entity_type, name in names.items():
        if entity_type not in ROOTS:
            raise QuotaError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {entity_type}")
        if name == "":
            raise QuotaError(ErrorCode.invalid_request, f"Empty {entity_type} not supported")
    if IP in names:
        if len(names) > 1:
            raise QuotaError(ErrorCode.invalid_request, "Invalid quota entity combination, IP entity should not be "
                                                        "used with user/client ID entity.")
        if names[IP] is not None and not is_ip(names[IP]):
            raise QuotaError(ErrorCode.invalid_request, f"{names[IP]} is not a valid IP or resolvable host.")
    return tuple(sorted(names.items()))


def is_ip(name: str) -> bool:
    """An IP address literal (Kafka also takes a host name it can resolve; Weir resolves none)."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def alter(e: Entity, config: Mapping[str, str], ops: Iterable[tuple[str, float, bool]]) -> dict[str, str]:
    """`config` (the entity's stored config) with the operations (key, value, remove) applied in
    order, or QuotaError for an unknown key or a bad value."""
    allowed = keys_of(e)
    out = dict(config)
    for key, value, remove in ops:
        if remove:
            out.pop(key, None)
            continue
        kind = allowed.get(key)
        if kind is None:
            raise QuotaError(ErrorCode.invalid_request, f"Invalid configuration key {key}")
        if not value > 0.0:  # NaN too
            raise QuotaError(ErrorCode.invalid_request, f"Quota {key} must be greater than 0")
        if kind == DOUBLE:
            out[key] = repr(float(value))
            continue
        whole = int(value + _EPSILON) if value < _MAX[kind] else _MAX[kind] + 1
        if abs(whole - value) > _EPSILON or whole > _MAX[kind]:
            raise QuotaError(ErrorCode.invalid_request, f"Configuration {key} must be a {kind} value")
        out[key] = str(whole)
    return out


# -- ZooKeeper paths and change notices ------------------------------------------------------------

def _znode_name(name: str | None) -> str:
    return DEFAULT_NAME if name is None else sanitize(name)


def _entity_name(znode_name: str) -> str | None:
    return None if znode_name == DEFAULT_NAME else desanitize(znode_name)


def entity_path(e: Entity) -> str:
    """The path under /config: users/<u>, users/<u>/clients/<c>, clients/<c> or ips/<ip>."""
    names = dict(e)
    if USER in names and CLIENT_ID in names:
        return f"users/{_znode_name(names[USER])}/clients/{_znode_name(names[CLIENT_ID])}"
    [(entity_type, name)] = e
    return f"{ROOTS[entity_type]}/{_znode_name(name)}"


def entity_of_path(path: str) -> Entity | None:
    """The quota entity of a path under /config (as `entity_path` makes it); None for anything
    else (a topic's, a broker's)."""
    parts = path.split("/")
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
        return entity(user=_entity_name(parts[1]), client_id=_entity_name(parts[3]))
    by_root = {root: entity_type for entity_type, root in ROOTS.items()}
    if len(parts) == 2 and parts[0] in by_root and parts[1]:
        return ((by_root[parts[0]], _entity_name(parts[1])),)
    return None


def encode_notice(e: Entity) -> bytes:
    return json.dumps({"version": 2, "entity_path": entity_path(e)}, separators=(",", ":")).encode()


def notice_entity(data: bytes) -> Entity | None:
    """The quota entity a /config/changes notice names; None for a notice about something else.
    Version 1 notices name (entity_type, entity_name), version 2 an entity_path (Kafka reads both).
    ValueError for one that is not a notice."""
    obj = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError("a change notice is a JSON object")
    if obj.get("version") == 1:
        return entity_of_path(f"{obj['entity_type']}/{obj['entity_name']}")
    if obj.get("version") == 2:
        return entity_of_path(str(obj["entity_path"]))
    raise ValueError(f"change notice version {obj.get('version')!r}")


def encode_config(config: Mapping[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": dict(sorted(config.items()))}, separators=(",", ":")).encode()


def decode_config(data: bytes) -> dict[str, str]:
    try:
        obj = json.loads(data)
        return {str(k): str(v) for k, v in obj.get("config", {}).items()}
    except (ValueError, AttributeError):
        return {}

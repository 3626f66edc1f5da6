"""ZooKeeper paths and JSON formats of Kafka's ZooKeeper mode: pure encode/decode, no I/O.

    /brokers/ids/<id>                            {"version":5, "host", "port", "endpoints", "rack"?, ...}
    /brokers/topics/<t>                          {"version":3, "topic_id", "partitions", "adding_replicas",
                                                  "removing_replicas"}
    /brokers/topics/<t>/partitions/<p>/state     {"controller_epoch", "leader", "version":1, "leader_epoch",
                                                  "isr", "leader_recovery_state":0}
    /controller                                  {"version":2, "brokerid", "timestamp"}   (ephemeral)
    /controller_epoch                            "N"                                      (persistent)
    /config/topics/<t>                           {"version":1, "config": {name: value}}
    /config/brokers/<id> and /config/brokers/<default>   dynamic broker configs, the same format

Encoders return compact UTF-8 JSON bytes; decoders accept anything Kafka's ZooKeeper mode writes
(extra fields ignored) and raise `FormatError` (a ValueError) on malformed input. The partition
epoch is not in the JSON: it is the state znode's version, passed to `decode_partition_state`.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote_plus

from weir.zk.model import NO_LEADER, BrokerInfo, PartitionState, TopicAssignment

BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CONFIG_PATH = "/config"
CONFIG_TOPICS_PATH = "/config/topics"
CONFIG_BROKERS_PATH = "/config/brokers"
ADMIN_DELETE_TOPICS_PATH = "/admin/delete_topics"
# A broker asks for controlled shutdown with an ephemeral child here (kio has no ControlledShutdown API).
CONTROLLED_SHUTDOWN_PATH = "/admin/controlled_shutdown"

# Every persistent parent the store and the watcher rely on (created by ZkMetadataStore.ensure_paths).
PERSISTENT_PATHS = (BROKER_IDS_PATH, TOPICS_PATH, CONFIG_TOPICS_PATH, CONFIG_BROKERS_PATH, ADMIN_DELETE_TOPICS_PATH)

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class FormatError(ValueError):
    """A znode's content is not in the expected format."""


# -- paths ---------------------------------------------------------------------------------------

def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS_PATH}/{topic}"


def broker_config_path(entity: str) -> str:
    """Dynamic broker configs: a broker id, or <default> for the cluster-wide ones."""
    return f"{CONFIG_BROKERS_PATH}/{entity}"


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize, of a user, client id or IP in a znode name: Java's URLEncoder
    (letters, digits and . - _ kept; UTF-8 bytes of any other character as %XX), with a space as
    %20 rather than '+'. ZooKeeper refuses the names '.' and '..', which Kafka leaves as they are
    (and then fails on); Weir encodes their dots, which Sanitizer.desanitize reads back."""
    if name in (".", ".."):
        return "%2E" * len(name)
    return quote(name, safe="").replace("~", "%7E")  # Python's quote keeps '~', Java's does not


def desanitize(znode_name: str) -> str:
    """Kafka's Sanitizer.desanitize (Java's URLDecoder: '+' is a space)."""
    return unquote_plus(znode_name)


def is_legal_topic_name(topic: str) -> bool:
    return bool(_LEGAL_TOPIC.match(topic)) and topic not in (".", "..")


def parse_path(path: str) -> tuple[str, Any] | None:
    """Classify a znode path of the layout above: ('broker', id), ('topic', name),
    ('state', (topic, p)), ('config', name), ('broker_config', entity), ('controller', None),
    ('broker_ids', None), ('topics', None), ('broker_configs', None); None for anything else."""
    if path in (CONTROLLER_PATH, CONTROLLER_EPOCH_PATH):
        return "controller", None
    if path == BROKER_IDS_PATH:
        return "broker_ids", None
    if path == TOPICS_PATH:
        return "topics", None
    if path == CONFIG_BROKERS_PATH:
        return "broker_configs", None
    parts = path.split("/")  # ['', 'brokers', 'topics', t, 'partitions', p, 'state']
    try:
        if len(parts) == 4 and parts[1] == "brokers" and parts[2] == "ids":
            return "broker", int(parts[3])
        if len(parts) == 4 and parts[1] == "brokers" and parts[2] == "topics":
            return "topic", parts[3]
        if (len(parts) == 7 and parts[1] == "brokers" and parts[2] == "topics"
                and parts[4] == "partitions" and parts[6] == "state"):
            return "state", (parts[3], int(parts[5]))
        if len(parts) == 4 and parts[1] == "config" and parts[2] == "topics":
            return "config", parts[3]
        if len(parts) == 4 and parts[1] == "config" and parts[2] == "brokers":
            return "broker_config", parts[3]
    except ValueError:
        return None
    return None


# -- helpers -------------------------------------------------------------------------------------

def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _loads(data: bytes | str | None, what: str) -> Any:
    if data is None:
        raise FormatError(f"{what}: no data")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError(f"{what}: not JSON: {e}") from None


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(f"{what}: expected an integer, got {value!r}")
    return value


def _object(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise FormatError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


# -- topic ids (Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding) ---------------

def encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def decode_topic_id(text: str) -> uuid.UUID:
    if not isinstance(text, str) or len(text) != 22:
        raise FormatError(f"topic_id: expected 22 base64url characters, got {text!r}")
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    except (ValueError, TypeError) as e:
        raise FormatError(f"topic_id {text!r}: {e}") from None


# -- topic assignment ----------------------------------------------------------------------------

def encode_topic_assignment(assignment: TopicAssignment) -> bytes:
    return _dumps({
        "version": 3,
        "topic_id": encode_topic_id(assignment.topic_id),
        "partitions": {str(p): list(replicas) for p, replicas in sorted(assignment.replicas.items())},
        "adding_replicas": {str(p): list(r) for p, r in sorted(assignment.adding.items()) if r},
        "removing_replicas": {str(p): list(r) for p, r in sorted(assignment.removing.items()) if r},
    })


def decode_topic_assignment(topic: str, data: bytes) -> TopicAssignment:
    what = f"assignment of {topic}"
    obj = _object(_loads(data, what), what)
    partitions = _object(obj.get("partitions"), f"{what}: partitions")
    replicas = _replica_lists(partitions, what)
    adding = _replica_lists(_object(obj.get("adding_replicas") or {}, f"{what}: adding_replicas"), what)
    removing = _replica_lists(_object(obj.get("removing_replicas") or {}, f"{what}: removing_replicas"), what)
    for p, moving in (*adding.items(), *removing.items()):
        if p not in replicas or not set(moving) <= set(replicas[p]):
            raise FormatError(f"{what}: replicas moving in or out of partition {p} are not among its replicas")
    raw_id = obj.get("topic_id")
    # Assignments written before topic ids (version < 3) have none: Kafka then generates one.
    topic_id = decode_topic_id(raw_id) if raw_id is not None else uuid.UUID(int=0)
    return TopicAssignment(topic, topic_id, replicas, {p: r for p, r in adding.items() if r},
                           {p: r for p, r in removing.items() if r})


def _replica_lists(partitions: dict, what: str) -> dict[int, tuple[int, ...]]:
    replicas: dict[int, tuple[int, ...]] = {}
    for key, value in partitions.items():
        try:
            p = int(key)
        except ValueError:
            raise FormatError(f"{what}: partition {key!r} is not an integer") from None
        if not isinstance(value, list):
            raise FormatError(f"{what}: replicas of partition {p} are not a list")
        replicas[p] = tuple(_int(r, f"{what}: replica") for r in value)
    return dict(sorted(replicas.items()))


# -- partition state -----------------------------------------------------------------------------

def encode_partition_state(state: PartitionState) -> bytes:
    return _dumps({
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
        "leader_recovery_state": 0,
    })


def decode_partition_state(data: bytes, partition_epoch: int) -> PartitionState:
    what = "partition state"
    obj = _object(_loads(data, what), what)
    try:
        isr = obj["isr"]
        if not isinstance(isr, list):
            raise FormatError(f"{what}: isr is not a list")
        leader = _int(obj["leader"], f"{what}: leader")
        isr_t = tuple(_int(r, f"{what}: isr") for r in isr)
        if leader != NO_LEADER and leader not in isr_t:
            raise FormatError(f"{what}: leader {leader} is not in the ISR {list(isr_t)}")
        return PartitionState(leader=leader,
                              leader_epoch=_int(obj["leader_epoch"], f"{what}: leader_epoch"),
                              isr=isr_t,
                              controller_epoch=_int(obj["controller_epoch"], f"{what}: controller_epoch"),
                              partition_epoch=partition_epoch)
    except KeyError as e:
        raise FormatError(f"{what}: missing {e}") from None


# -- controller ----------------------------------------------------------------------------------

def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dumps({"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    """The controller's broker id."""
    obj = _object(_loads(data, "controller"), "controller")
    if "brokerid" not in obj:
        raise FormatError("controller: missing brokerid")
    return _int(obj["brokerid"], "controller: brokerid")


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode("ascii").strip())
    except (ValueError, UnicodeDecodeError, AttributeError):
        raise FormatError(f"controller epoch: not an integer: {data!r}") from None


# -- topic config --------------------------------------------------------------------------------

def encode_topic_config(configs: Mapping[str, Any]) -> bytes:
    return _dumps({"version": 1, "config": {str(k): str(v) for k, v in sorted(configs.items())}})


def decode_topic_config(data: bytes) -> dict[str, str]:
    obj = _object(_loads(data, "topic config"), "topic config")
    config = _object(obj.get("config", {}), "topic config: config")
    return {str(k): str(v) for k, v in config.items()}


# -- broker registration (the JSON zk_client.broker_registration writes) -------------------------

def parse_endpoint(endpoint: str) -> tuple[str, str, int]:
    """'PLAINTEXT://host:9092' -> ('PLAINTEXT', 'host', 9092); IPv6 hosts may be bracketed."""
    listener, sep, address = endpoint.partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon:
        raise FormatError(f"endpoint {endpoint!r}: expected LISTENER://host:port")
    try:
        return listener, host.strip("[]"), int(port)
    except ValueError:
        raise FormatError(f"endpoint {endpoint!r}: bad port") from None


def decode_broker_registration(broker_id: int, data: bytes) -> BrokerInfo:
    """BrokerInfo from /brokers/ids/<id>: "host"/"port" when set (Kafka leaves host null when no
    PLAINTEXT listener exists), else the first of "endpoints"; "rack" when present."""
    what = f"registration of broker {broker_id}"
    obj = _object(_loads(data, what), what)
    host, port = obj.get("host"), obj.get("port")
    if not host or not isinstance(port, int) or port < 0:
        endpoints = decode_broker_endpoints(data)
        if not endpoints:
            raise FormatError(f"{what}: neither host/port nor endpoints")
        _, host, port = endpoints[0]
    rack = obj.get("rack")
    return BrokerInfo(broker_id=broker_id, host=str(host), port=int(port),
                      rack=str(rack) if rack is not None else None, endpoints=tuple(decode_broker_endpoints(data)))


def decode_broker_endpoints(data: bytes) -> list[tuple[str, str, int]]:
    """All (listener, host, port) of a registration, in order."""
    obj = _object(_loads(data, "broker registration"), "broker registration")
    endpoints = obj.get("endpoints") or []
    if not isinstance(endpoints, list):
        raise FormatError("broker registration: endpoints is not a list")
    return [parse_endpoint(e) for e in endpoints]

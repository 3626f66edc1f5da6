"""A fuzzer for the request handlers: for every API and version the broker advertises
(weir.protocol.versions.SUPPORTED_VERSIONS), requests that decode (each is built from its version's
kio schema) but whose fields are hostile: topics, groups and transactional ids that exist and that do
not, empty, very long and illegal names, -1, 0, extreme and random numbers for ids, epochs, offsets,
timeouts, indexes and counts, null where the schema allows it, empty, duplicated and large (bounded)
arrays, random bytes, random and zero UUIDs. Ids the broker hands out (member ids, producer ids and
epochs, generations) are learned from its answers and sent back, so that requests get past the first
check of a handler.

Every request must be answered with a response of its correlation id that decodes as its version's
response, or the connection closed (counted, per API); no answer within the request's own timeouts
plus `ANSWER_S` is a hang. JoinGroup and SyncGroup wait for other members, for as long as members
say, so they and requests with timeouts too long to wait for are given up after `GIVE_UP_S`, counted.

What it may harm is what it names: the topics, groups and transactional ids in its `Vocabulary`,
topics it may create (NEW_TOPICS and the finite set of other names it uses), and the internal topics,
which the broker protects. Numbers of partitions to create are kept small: Kafka creates as many as
asked, and so would fill the machine. Config names are topic configs that are no broker config, so a
broker-wide change cannot touch the topics the test checks afterwards.
"""

from __future__ import annotations

import datetime
import io
import random
import socket
import struct
import time
import types
import typing
import uuid
from collections import Counter
from dataclasses import dataclass, field, fields, is_dataclass

from kio.serial import entity_reader, entity_writer
from log.batches import encode_record, raw_batch
from raw_protocol import BrokerClosed, recv_exact

from weir.protocol.codec import request_schema, response_schema
from weir.protocol.versions import SUPPORTED_VERSIONS, ApiKey

ANSWER_S = 6.0  # beyond a request's own timeouts, the longest an answer may take
GIVE_UP_S = 2.0  # how long to wait for an answer that may legitimately wait for longer
LONGEST_WAIT_S = 12.0  # a request whose timeouts make it wait longer is given up on after GIVE_UP_S
MAY_WAIT_FOR_OTHERS = {ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP}

NEW_TOPICS = [f"fuzz-new-{i}" for i in range(4)]
INTERNAL_TOPICS = ["__consumer_offsets", "__transaction_state", "__cluster_metadata"]
ILLEGAL_NAMES = ["", ".", "..", "a/b", "with space", "ünïcödé", "nul\x00", "x" * 250, "x" * 249]
LONG_STRINGS = ["y" * 300, "z" * 5000, "w" * 32767]
OTHER_STRINGS = ["r0", "r1", "r2", "consumer", "range", "roundrobin", "PLAIN", "SCRAM-SHA-512", "User:*", "*",
                 "User:fuzz", "0", "1", "99", "-1"]
# topic configs that are no broker config (log.retention.ms, message.max.bytes, ... are the broker's)
CONFIG_NAMES = ["retention.ms", "retention.bytes", "cleanup.policy", "segment.bytes", "segment.ms",
                "max.message.bytes", "message.timestamp.type", "min.compaction.lag.ms", "no.such.config", ""]
CONFIG_VALUES = ["-1", "0", "1", "-2", "99999999999999999999", "compact", "delete,compact", "CreateTime", "abc",
                 "", None]
LEARNED = ("member_id", "producer_id", "producer_epoch", "generation_id", "leader_epoch", "generation_id_or_member_epoch")


@dataclass
class Vocabulary:
    """What exists that requests may name (and harm)."""
    topics: list[str]
    topic_ids: list[uuid.UUID]
    groups: list[str]
    transactional_ids: list[str]
    learned: dict[str, list] = field(default_factory=dict)  # response field name → values seen

    def learn(self, entity) -> None:
        """Remember the ids in a response, wherever they are in it."""
        for f in fields(entity):
            value = getattr(entity, f.name)
            if f.name in LEARNED and value is not None:
                seen = self.learned.setdefault(f.name, [])
                if value not in seen:
                    seen.append(value)
                    del seen[:-16]  # the latest, which are the likeliest to be current
            for item in value if isinstance(value, tuple) else (value,):
                if is_dataclass(item):
                    self.learn(item)


# -- hostile values, by kafka type and by the field's name ---------------------------------------

class Hostile:
    def __init__(self, rng: random.Random, vocabulary: Vocabulary) -> None:
        self.rng = rng
        self.vocabulary = vocabulary
        v = vocabulary
        self.all_strings = (v.topics + NEW_TOPICS + INTERNAL_TOPICS + ILLEGAL_NAMES + v.groups + v.transactional_ids
                            + OTHER_STRINGS + CONFIG_NAMES[:-1])
        self.string_pools = {
            "topic": v.topics * 3 + NEW_TOPICS + INTERNAL_TOPICS + ILLEGAL_NAMES,
            "group": v.groups * 3 + ["fuzz-new-group"] + ILLEGAL_NAMES,
            "transactional_id": v.transactional_ids * 3 + ["fuzz-new-txn"] + ILLEGAL_NAMES,
            "config": CONFIG_NAMES,
        }

    def entity(self, schema: type, depth: int = 0):
        return schema(**{f.name: self.value(schema, f, depth) for f in fields(schema)})

    def value(self, schema: type, f, depth: int):
        kind = f.metadata.get("kafka_type")
        nullable, inner = _unwrap(f.type)
        rng = self.rng
        if nullable and rng.random() < 0.08:
            return None
        if typing.get_origin(inner) is tuple:
            element = typing.get_args(inner)[0]
            return self.array(schema, f, kind, element, depth)
        if kind is None:
            return self.entity(inner, depth + 1)
        return self.primitive(schema, f.name, kind, nullable)

    def array(self, schema: type, f, kind: str | None, element: type, depth: int) -> tuple:
        rng = self.rng
        roll = rng.random()
        if roll < 0.15:
            size = 0
        elif roll < 0.95 or depth > 1:
            size = rng.choice([1, 1, 1, 2, 2, 3])
        else:
            size = rng.randrange(50, 300) if kind is not None or depth == 0 else rng.randrange(10, 40)
        if kind is None:
            items = [self.entity(element, depth + 1) for _ in range(size)]
        else:
            items = [self.primitive(schema, f.name, kind, False) for _ in range(size)]
        if items and rng.random() < 0.12:  # duplicated entries
            items += [rng.choice(items)] * rng.randrange(1, 3)
            rng.shuffle(items)
        return tuple(items)

    def primitive(self, schema: type, name: str, kind: str, nullable: bool):
        rng = self.rng
        if kind == "string":
            return self.string(schema, name)
        if kind in ("int8", "int16", "int32", "int64"):
            return self.integer(name, {"int8": 8, "int16": 16, "int32": 32, "int64": 64}[kind])
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "timedelta_i32":
            return datetime.timedelta(milliseconds=rng.choice([-1, 0, 1, 100, 1000, 3000, -(1 << 31), (1 << 31) - 1]))
        if kind == "timedelta_i64":
            return rng.choice([datetime.timedelta(milliseconds=ms) for ms in (-1, 0, 1, 86_400_000)]
                              + [datetime.timedelta.max - datetime.timedelta(days=1), datetime.timedelta.min])
        if kind == "uuid":
            return rng.choice(self.vocabulary.topic_ids * 2 + [uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128))])
        if kind == "records":
            return self.records()
        if kind == "bytes":
            return self.bytes_value(name)
        if kind == "float64":
            return rng.choice([0.0, -1.0, 1e308, 0.5])
        if kind == "uint16":
            return rng.choice([0, 1, 9092, 65535])
        raise AssertionError(f"no hostile values for kafka type {kind}")

    def string(self, schema: type, name: str) -> str:
        rng = self.rng
        owner = schema.__name__
        if "Config" in owner or "config" in name:
            pool = CONFIG_VALUES[:-1] if name == "value" else self.string_pools["config"]
        elif "transactional_id" in name:
            pool = self.string_pools["transactional_id"]
        elif "group" in name or name in ("key", "coordinator_keys"):
            pool = self.string_pools["group"] + self.vocabulary.transactional_ids
        elif "topic" in name or "resource_name" in name or (name == "name" and "Topic" in owner):
            pool = self.string_pools["topic"]
        elif name in ("member_id", "group_instance_id"):
            pool = self.vocabulary.learned.get("member_id", []) * 3 + ["", "fuzz-member"]
        else:
            pool = self.all_strings
        if rng.random() < 0.2:
            pool = self.all_strings
        if rng.random() < 0.03:
            return rng.choice(LONG_STRINGS)
        return rng.choice(pool)

    def integer(self, name: str, bits: int) -> int:
        rng = self.rng
        top = (1 << (bits - 1)) - 1
        learned = self.vocabulary.learned.get(name)
        if learned and rng.random() < 0.5:
            return rng.choice(learned)
        if name in ("num_partitions", "count"):  # partitions to create: see the module's docstring
            return rng.choice([-2, -1, 0, 1, 2, 3, 50])
        roll = rng.random()
        if roll < 0.6:
            return rng.choice([-1, 0, 1, 2, 3, 4, 8])
        if roll < 0.85:
            return rng.choice([-2, top, -top - 1, top - 1, 99])
        return rng.randrange(-top - 1, top + 1)

    def bytes_value(self, name: str) -> bytes:
        rng = self.rng
        roll = rng.random()
        if roll < 0.15:
            return b""
        if roll < 0.45 and name in ("metadata", "assignment"):
            return self.consumer_protocol(name)
        return rng.randbytes(rng.choice([1, 4, 16, rng.randrange(1, 300)]))

    def consumer_protocol(self, name: str) -> bytes:
        """A consumer subscription or assignment (Kafka's ConsumerProtocol), with lies in it."""
        rng = self.rng
        topics = [t.encode() for t in rng.sample(self.string_pools["topic"], rng.randrange(0, 3))]
        count = rng.choice([len(topics)] * 4 + [-1, len(topics) + 5, (1 << 31) - 1])
        version = rng.choice([0, 1, 2, 3, -1, 32767])
        out = struct.pack(">hi", version, count)
        for topic in topics:
            out += struct.pack(">h", len(topic)) + topic
            if name == "assignment":
                out += struct.pack(">i", 2) + struct.pack(">ii", rng.choice([0, 1, -1]), rng.choice([0, 99]))
        out += struct.pack(">i", rng.choice([-1, 0, 3])) + b"abc"
        return out[:rng.choice([len(out)] * 4 + [rng.randrange(len(out) + 1)])]

    def records(self) -> bytes:
        rng = self.rng
        roll = rng.random()
        if roll < 0.15:
            return b""
        if roll < 0.3:
            return rng.randbytes(rng.randrange(1, 100))
        pid = rng.choice(self.vocabulary.learned.get("producer_id", [-1]) + [-1, 0])
        epoch = rng.choice(self.vocabulary.learned.get("producer_epoch", [-1]) + [-1, 0])
        count = rng.randrange(1, 4)
        body = b"".join(encode_record(i, 0, b"k", b"fuzz", []) for i in range(count))
        now = int(time.time() * 1000)
        return raw_batch(body, count, attributes=rng.choice([0, 0, 16, 32, 48]), base_timestamp=now,
                         max_timestamp=now, producer_id=pid, producer_epoch=epoch,
                         base_sequence=rng.choice([-1, 0, 0, 5]))


def _unwrap(annotation) -> tuple[bool, type]:
    """(nullable, the type without None) of a kio field's annotation."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(args) < len(typing.get_args(annotation)), args[0]
    return False, annotation


# -- frames and answers ----------------------------------------------------------------------------

CLIENT_ID = b"api-fuzzer"


def frame(api_key: int, version: int, correlation_id: int, entity) -> bytes:
    schema = request_schema(api_key, version)
    out = io.BytesIO()
    out.write(struct.pack(">hhih", api_key, version, correlation_id, len(CLIENT_ID)) + CLIENT_ID)
    if schema.__flexible__:
        out.write(b"\x00")
    entity_writer(schema)(out, entity)
    payload = out.getvalue()
    return struct.pack(">i", len(payload)) + payload


def decode_answer(api_key: int, version: int, payload: bytes):
    schema = response_schema(api_key, version)
    offset = 4
    if schema.__flexible__ and api_key != ApiKey.API_VERSIONS:  # KIP-511: ApiVersions keeps header v0
        if payload[4] != 0:
            raise ValueError("response header v1 with tagged fields")
        offset = 5
    entity, used = entity_reader(schema)(payload, offset)
    if offset + used != len(payload):
        raise ValueError(f"{len(payload) - offset - used} bytes after the response")
    return entity


def _longest_timeout_s(entity) -> float:
    longest = 0.0
    for f in fields(entity):
        value = getattr(entity, f.name)
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, datetime.timedelta):
                longest = max(longest, item.total_seconds())
            elif is_dataclass(item):
                longest = max(longest, _longest_timeout_s(item))
    return longest


@dataclass
class ApiFuzzReport:
    sent: Counter = field(default_factory=Counter)  # api name → requests
    answered: Counter = field(default_factory=Counter)
    closed: Counter = field(default_factory=Counter)  # api name → connections the broker closed
    given_up: Counter = field(default_factory=Counter)  # api name → answers not waited for (may wait long)
    errors: Counter = field(default_factory=Counter)  # error code → answers carrying it (anywhere)
    failures: list[str] = field(default_factory=list)  # hangs and malformed answers

    def summary(self) -> str:
        def show(counter: Counter) -> str:
            return ", ".join(f"{k}: {n}" for k, n in sorted(counter.items())) or "none"
        return (f"{sum(self.sent.values())} requests of {len(self.sent)} APIs, {sum(self.answered.values())} answered; "
                f"connections closed after {{{show(self.closed)}}}; given up waiting on {{{show(self.given_up)}}}; "
                f"error codes {{{show(self.errors)}}}; {len(self.failures)} failures")


def _count_errors(entity, errors: Counter) -> None:
    for f in fields(entity):
        value = getattr(entity, f.name)
        if f.name == "error_code" and value:
            errors[int(value)] += 1
        for item in value if isinstance(value, tuple) else (value,):
            if is_dataclass(item):
                _count_errors(item, errors)


class Connection:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=ANSWER_S)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def exchange(self, api_key: int, version: int, entity, wait_s: float):
        """The decoded answer; BrokerClosed if the broker closed the connection; socket.timeout
        if no answer within wait_s. None for a Produce with acks=0, which has none."""
        self.correlation_id += 1
        self.sock.settimeout(wait_s)
        self.sock.sendall(frame(api_key, version, self.correlation_id, entity))
        if api_key == ApiKey.PRODUCE and entity.acks == 0:
            return None
        size, = struct.unpack(">i", recv_exact(self.sock, 4))
        payload = recv_exact(self.sock, size)
        got, = struct.unpack_from(">i", payload)
        if got != self.correlation_id:
            raise ValueError(f"answer to correlation id {got}, expected {self.correlation_id}")
        return decode_answer(api_key, version, payload)


SUPPORTED = sorted((api, version) for api, (low, high) in SUPPORTED_VERSIONS.items() for version in range(low, high + 1))


def fuzz(port: int, vocabulary: Vocabulary, seconds: float, seed: int, max_requests: int = 1_000_000) -> ApiFuzzReport:
    """Send hostile requests of every supported API and version at the broker on `port`."""
    rng = random.Random(seed)
    hostile = Hostile(rng, vocabulary)
    report = ApiFuzzReport()
    deadline = time.monotonic() + seconds
    connection = None
    for number in range(max_requests):
        if time.monotonic() > deadline:
            break
        if connection is None or rng.random() < 0.03:
            if connection is not None:
                connection.close()
            connection = Connection(port)
            opener = rng.choice([None, None, ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE])
            api, version = (opener, rng.randint(*SUPPORTED_VERSIONS[opener])) if opener else rng.choice(SUPPORTED)
        else:
            api, version = rng.choice(SUPPORTED)
        request = hostile.entity(request_schema(api, version))
        name = f"{ApiKey(api).name} v{version}"
        report.sent[name] += 1
        wait_s = _longest_timeout_s(request) + ANSWER_S
        may_wait = api in MAY_WAIT_FOR_OTHERS or wait_s > LONGEST_WAIT_S
        try:
            answer = connection.exchange(api, version, request, GIVE_UP_S if may_wait else wait_s)
        except (BrokerClosed, ConnectionError):
            report.closed[name] += 1
            connection = None
            continue
        except socket.timeout:
            if may_wait:
                report.given_up[name] += 1
            else:
                report.failures.append(f"request {number}, {name}: no answer in {wait_s:.0f} s: {request!r:.600}")
            connection.close()
            connection = None
            continue
        except ValueError as e:
            report.failures.append(f"request {number}, {name}: malformed answer ({e}): {request!r:.600}")
            connection.close()
            connection = None
            continue
        if answer is None:  # acks=0: the broker may close the connection; start a new one
            connection.close()
            connection = None
            continue
        report.answered[name] += 1
        _count_errors(answer, report.errors)
        vocabulary.learn(answer)
    if connection is not None:
        connection.close()
    return report

"""What each request costs its client's quotas, and how long the client is held for it (KIP-13,
KIP-124, KIP-219): the broker's side of weir.quotas, with the clock.

- Produce: the request's size, against producer_byte_rate, when the answer is ready.
- Fetch by a consumer: the records answered, against consumer_byte_rate; a fetch over the quota
  is answered empty (and its bytes taken back), as Kafka's, and a fetch never asks for more than
  the quota allows in one measuring span.
- Every request but the exempt ones: the time the broker's loop spent on it, as a percentage of
  one second, against request_percentage (a throttle time bounded by one window).
- CreateTopics, CreatePartitions, DeleteTopics: the partitions created or deleted, against
  controller_mutation_rate (KIP-599). From the versions that know THROTTLING_QUOTA_EXCEEDED
  (CreateTopics v6, CreatePartitions v3, DeleteTopics v5) the quota is strict: a topic asked
  for once the client's bucket is below zero fails with it; older clients are only throttled.
- A new connection: one more against its IP's connection_creation_rate (KIP-612); one over it
  is not served, and is closed once the throttle time is over (Kafka's delayed close).

Replication is never throttled by client quotas (follower fetches and the brokers' own requests
are exempt). The connection writes the answer at once, with the throttle time in it, and then
reads nothing more from the client until the time is over (KIP-219: the channel is muted).
"""

from __future__ import annotations

from collections.abc import Callable

from weir.clock import now_ms
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.header import RequestHeader
from weir.protocol.versions import ApiKey
from weir.quotas.client_quotas import ClientQuotas, QuotaBook
from weir.quotas.entities import (CONNECTION_CREATION_RATE, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE,
                                  PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE)
from weir.quotas.rate import TokenBucket

# KIP-599: the first version of each API that answers THROTTLING_QUOTA_EXCEEDED (ControllerMutationQuota's strictSinceVersion)
STRICT_SINCE = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}
# Not held to request_percentage: authentication (Kafka's network layer) and the brokers' own requests
EXEMPT_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.ALTER_PARTITION,
                         ApiKey.WRITE_TXN_MARKERS})


class Throttled:
    """A handler's answer (whatever it would return) with the throttle time already in it."""

    __slots__ = ("body", "throttle_ms")

    def __init__(self, body, throttle_ms: int) -> None:
        assert throttle_ms > 0
        self.body = body
        self.throttle_ms = throttle_ms


def user_of(principal: str) -> str:
    """The quota user of a principal ("User:alice" → "alice"; unauthenticated: ANONYMOUS)."""
    return principal.partition(":")[2]


class ClientThrottles:
    """The broker's client quotas: `book` (kept by weir.coordination.client_quota_store) and a
    rate per quota key, over `samples` windows of `window_s`."""

    def __init__(self, samples: int, window_s: int, controller_samples: int = 11, controller_window_s: int = 1,
                 clock: Callable[[], int] = now_ms) -> None:
        self.book = QuotaBook()
        self.clock = clock
        window_ms = window_s * 1000
        self.produce = ClientQuotas(self.book, PRODUCER_BYTE_RATE, samples, window_ms)
        self.fetch = ClientQuotas(self.book, CONSUMER_BYTE_RATE, samples, window_ms)
        self.request = ClientQuotas(self.book, REQUEST_PERCENTAGE, samples, window_ms, max_throttle_ms=window_ms)
        self.controller_mutation = ClientQuotas(self.book, CONTROLLER_MUTATION_RATE, controller_samples,
                                                controller_window_s * 1000, stat=TokenBucket)
        self.connections = ClientQuotas(self.book, CONNECTION_CREATION_RATE, samples, window_ms,
                                        max_throttle_ms=window_ms, by_ip=True)
        self.all = (self.produce, self.fetch, self.request, self.controller_mutation, self.connections)
        # Kafka's quota metric groups (QuotaType) and rate names: kafka.server:type=Produce,user=,client-id=
        self.metric_groups = (("Produce", "byte-rate", self.produce), ("Fetch", "byte-rate", self.fetch),
                              ("Request", "request-time", self.request),
                              ("ControllerMutation", "tokens", self.controller_mutation))

    def quotas_changed(self) -> None:
        for quotas in self.all:
            quotas.quotas_changed()

    def _record(self, quotas: ClientQuotas, header: RequestHeader, value: float) -> int:
        now = self.clock()
        user, client_id = user_of(header.principal), header.client_id or ""
        throttle = quotas.record(user, client_id, value, now)
        if throttle:
            quotas.throttled(user, client_id, throttle, now)
        return throttle

    def produced(self, header: RequestHeader) -> int:
        """A Produce's throttle time (its size recorded)."""
        return self._record(self.produce, header, header.size) if self.produce.enabled else 0

    def fetched(self, header: RequestHeader, size: int) -> int:
        """A consumer's Fetch answer of `size` bytes: its throttle time; when throttled the bytes
        are taken back (the answer will be empty)."""
        if not self.fetch.enabled:
            return 0
        throttle = self._record(self.fetch, header, size)
        if throttle:
            self.fetch.unrecord(user_of(header.principal), header.client_id or "", size, self.clock())
        return throttle

    def fetch_limit(self, header: RequestHeader) -> int | None:
        """The most a consumer's Fetch may answer (None: no quota)."""
        if not self.fetch.enabled:
            return None
        most = self.fetch.max_value_in_window(user_of(header.principal), header.client_id or "")
        return None if most is None else int(min(most, 2 ** 31 - 1))

    def handled(self, header: RequestHeader, seconds: float) -> int:
        """A request that took the loop `seconds`: its request_percentage throttle time."""
        if not self.request.enabled or header.api_key in EXEMPT_APIS:
            return 0
        return self._record(self.request, header, seconds * 100)

    def connection_created(self, ip: str) -> int:
        """A connection accepted from `ip`, on any listener (as Kafka's ConnectionQuotas): how long
        to hold it before closing it (0: serve it)."""
        if not self.connections.enabled:
            return 0
        return self.connections.record(ip, "", 1, self.clock())

    def mutations(self, header: RequestHeader) -> "MutationQuota | None":
        """A CreateTopics, CreatePartitions or DeleteTopics request's controller mutation quota
        (None: there are no such quotas)."""
        if not self.controller_mutation.enabled:
            return None
        return MutationQuota(self, header, header.api_version >= STRICT_SINCE[header.api_key])


class MutationQuota:
    """One request's controller_mutation_rate (Kafka's Strict/PermissiveControllerMutationQuota)."""

    def __init__(self, throttles: ClientThrottles, header: RequestHeader, strict: bool) -> None:
        self.throttles = throttles
        self.quotas = throttles.controller_mutation
        self.user, self.client_id = user_of(header.principal), header.client_id or ""
        self.strict = strict
        self.throttle_ms = 0

    def record(self, partitions: int) -> None:
        """Before the topic's partitions are created or deleted: KafkaError(THROTTLING_QUOTA_EXCEEDED)
        if strict and the client is over its quota already."""
        now = self.throttles.clock()
        if self.strict:
            waiting = self.quotas.throttle_now(self.user, self.client_id, now)
            if waiting:
                self.throttle_ms = max(self.throttle_ms, waiting)
                raise KafkaError(ErrorCode.throttling_quota_exceeded, "The throttling quota has been exceeded.")
            self.quotas.record(self.user, self.client_id, partitions, now)
        else:
            self.throttle_ms = max(self.throttle_ms, self.quotas.record(self.user, self.client_id, partitions, now))

    def answer(self, body: dict):
        """The request's answer with its throttle time (and the client held for it)."""
        if not self.throttle_ms:
            return body
        self.quotas.throttled(self.user, self.client_id, self.throttle_ms, self.throttles.clock())
        return Throttled({**body, "throttle_time": self.throttle_ms}, self.throttle_ms)

"""The quotas in force and the rates held to them: Kafka's ClientQuotaManager with its default
quota callback, one `ClientQuotas` per quota key, pure (every time is passed in, in ms).

Rules (KIP-55). A request's client is its user (the principal's name; ANONYMOUS without
authentication) and its client id. Its quota is the first of these entities that has one:

    1 user + client id        2 user + default client id    3 user
    4 default user + client id 5 default user + default client id   6 default user
    7 client id               8 default client id

and the rate it is held to is shared by every client the same entity covers: a user's quota
(3) is one rate over all the user's client ids, a default client id's quota (8) one rate per
client id. A rate is named by the (user, client-id) pair it covers, "" for a part it does not
distinguish - Kafka's metric tags, which name the JMX metrics too.

Recording a value returns the throttle time (0 when within the quota); a rate is kept only
while quotas of its key exist, and one unused for an hour is dropped (Kafka's inactive sensor
expiry), so memory follows the active clients.
"""

from __future__ import annotations

from collections.abc import Mapping

from weir.quotas.entities import CLIENT_ID, IP, USER, Entity, quota_values
from weir.quotas.rate import Rate

Tags = tuple[str, str]  # (user, client id); "" where the rate does not distinguish them
INACTIVE_MS = 3600 * 1000
SWEEP_EVERY_MS = 60 * 1000


def _user_client(user: str | None, client_id: str | None) -> Entity:
    return ((CLIENT_ID, client_id), (USER, user))


class QuotaBook:
    """The configured quotas: entity → {key: value}."""

    def __init__(self) -> None:
        self._quotas: dict[Entity, dict[str, float]] = {}

    def set(self, e: Entity, config: Mapping[str, str]) -> None:
        """The entity's stored config (with whatever else it holds), or {} once it is gone."""
        values = quota_values(e, config)
        if values:
            self._quotas[e] = values
        else:
            self._quotas.pop(e, None)

    def replace_all(self, configs: Mapping[Entity, Mapping[str, str]]) -> None:
        self._quotas.clear()
        for e, config in configs.items():
            self.set(e, config)

    def has(self, key: str) -> bool:
        return any(key in values for values in self._quotas.values())

    def get(self, e: Entity) -> dict[str, float]:
        return dict(self._quotas.get(e, {}))

    def resolve(self, key: str, user: str, client_id: str) -> tuple[Tags, float | None]:
        """The rate's tags and the quota (None: no quota) for a client, most specific first."""
        quotas = self._quotas
        candidates = (
            (_user_client(user, client_id), (user, client_id)),
            (_user_client(user, None), (user, client_id)),
            (((USER, user),), (user, "")),
            (_user_client(None, client_id), (user, client_id)),
            (_user_client(None, None), (user, client_id)),
            (((USER, None),), (user, "")),
            (((CLIENT_ID, client_id),), ("", client_id)),
            (((CLIENT_ID, None),), ("", client_id)),
        )
        for e, tags in candidates:
            values = quotas.get(e)
            if values is not None and key in values:
                return tags, values[key]
        return ("", client_id), None

    def resolve_ip(self, key: str, ip: str, _: str = "") -> tuple[Tags, float | None]:
        """An IP's quota (KIP-612): its own, else the default IP's; a rate per IP either way."""
        for e in (((IP, ip),), ((IP, None),)):
            values = self._quotas.get(e)
            if values is not None and key in values:
                return (ip, ""), values[key]
        return (ip, ""), None


class _Sensor:
    __slots__ = ("rate", "throttle_sum", "throttle_count", "used_ms")

    def __init__(self, samples: int, window_ms: int, stat: type) -> None:
        self.rate = stat(samples, window_ms)
        self.throttle_sum = Rate(samples, window_ms)  # Kafka's Avg of the throttle times: their sum
        self.throttle_count = Rate(samples, window_ms)  # over their count, in the same windows
        self.used_ms = 0

    def average_throttle_ms(self, now_ms: int) -> float:
        count = self.throttle_count.total(now_ms)
        return self.throttle_sum.total(now_ms) / count if count else 0.0


class ClientQuotas:
    """The rates of one quota key (producer_byte_rate, consumer_byte_rate, request_percentage,
    controller_mutation_rate), over `samples` windows of `window_ms` each. `max_throttle_ms`:
    a bound on a throttle time (Kafka bounds the request quota's by one window), None for none;
    `stat`: Rate, or TokenBucket (controller_mutation_rate, KIP-599); `by_ip`: the quotas of
    IPs (connection_creation_rate, KIP-612), a client being an IP address and no client id."""

    def __init__(self, book: QuotaBook, key: str, samples: int, window_ms: int,
                 max_throttle_ms: int | None = None, stat: type = Rate, by_ip: bool = False) -> None:
        self.book = book
        self.stat = stat
        self.resolve = book.resolve_ip if by_ip else book.resolve
        self.key = key
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms
        self.enabled = False  # any entity has a quota of this key: only then is anything recorded
        self._sensors: dict[Tags, _Sensor] = {}
        self._swept_ms = 0

    def quotas_changed(self) -> None:
        self.enabled = self.book.has(self.key)
        if not self.enabled:
            self._sensors.clear()

    def _sensor(self, tags: Tags, now_ms: int) -> _Sensor:
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = _Sensor(self.samples, self.window_ms, self.stat)
        sensor.used_ms = now_ms
        if now_ms - self._swept_ms >= SWEEP_EVERY_MS:
            self._swept_ms = now_ms
            for stale in [t for t, s in self._sensors.items() if now_ms - s.used_ms >= INACTIVE_MS]:
                del self._sensors[stale]
        return sensor

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value` for the client; the throttle time it has earned (ms, 0: none)."""
        if not self.enabled:
            return 0
        tags, bound = self.resolve(self.key, user, client_id)
        sensor = self._sensor(tags, now_ms)
        sensor.rate.record(value, now_ms, bound)
        return self._throttle(sensor, bound, now_ms)

    def _throttle(self, sensor: _Sensor, bound: float | None, now_ms: int) -> int:
        if bound is None:
            return 0
        throttle = sensor.rate.throttle_ms(bound, now_ms)
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return throttle

    def throttle_now(self, user: str, client_id: str, now_ms: int) -> int:
        """The client's throttle time before it records anything more (KIP-599's strict check: a
        client whose bucket is already below zero is refused)."""
        if not self.enabled:
            return 0
        tags, bound = self.resolve(self.key, user, client_id)
        return self._throttle(self._sensor(tags, now_ms), bound, now_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a value recorded (a Fetch answered empty because it was throttled)."""
        if self.enabled:
            self._sensor(self.resolve(self.key, user, client_id)[0], now_ms).rate.record(-value, now_ms)

    def throttled(self, user: str, client_id: str, throttle_ms: int, now_ms: int) -> None:
        """The client was held for `throttle_ms` (the throttle-time metric)."""
        if self.enabled:
            sensor = self._sensor(self.resolve(self.key, user, client_id)[0], now_ms)
            sensor.throttle_sum.record(throttle_ms, now_ms)
            sensor.throttle_count.record(1, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most the client may take in one measuring span (a Fetch's bytes are capped by it);
        None without a quota."""
        if not self.enabled:
            return None
        bound = self.resolve(self.key, user, client_id)[1]
        return None if bound is None else bound * (self.samples - 1) * self.window_ms / 1000

    def metrics(self, now_ms: int) -> list[tuple[Tags, float, float]]:
        """(tags, rate per second, average throttle time ms) of every rate kept."""
        return [(tags, sensor.rate.measure(now_ms), sensor.average_throttle_ms(now_ms))
                for tags, sensor in self._sensors.items()]

"""Broker configuration: Kafka's names and defaults, from a properties file and overrides.

    weir broker config/server.properties --override broker.id=2 --override listeners=PLAINTEXT://:9093

Every broker config Kafka 3.9 defines is accepted: honoured where Weir has the behaviour (SETTINGS),
else checked by its Kafka type and named at start-up as having no effect (weir.config.kafka_only_settings).
Any other name is refused, with the Kafka name it is closest to: Kafka would take a misspelt name
and ignore it, leaving the setting meant at its default. Values are parsed by type.

Some settings are dynamic, as Kafka's (KIP-226): set at run time for the whole cluster or one
broker (`weir configs --entity-type brokers --entity-default|--entity-name N --alter`), stored in
ZooKeeper, and taken by running brokers: this broker's value over the cluster default over the
properties over the default.
"""

import difflib
import logging
from collections.abc import Mapping
from pathlib import Path

from weir.config.kafka_only_settings import NO_EFFECT, REFUSED_UNLESS_DEFAULT
from weir.config.settings import (DEFAULT_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, SETTINGS,
                                  STATIC_BROKER_CONFIG, ConfigError, Setting)
from weir.config.topic_configs import BROKER_SYNONYMS, ConfigType, parse_broker_synonym, parse_typed
from weir.security.listeners import Listener, ListenerError, resolve

log = logging.getLogger(__name__)

# The settings in milliseconds Kafka also takes in coarser units, the first one set counting
# (KafkaConfig.logRetentionTimeMillis, logRollTimeMillis, logRollTimeJitterMillis)
IN_COARSER_UNITS = {"log.retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
                    "log.roll.ms": (("log.roll.hours", 3_600_000),),
                    "log.roll.jitter.ms": (("log.roll.jitter.hours", 3_600_000),)}


def unknown_setting(name: str) -> ConfigError:
    close = difflib.get_close_matches(name, [*SETTINGS, *NO_EFFECT], n=1)
    meant = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown broker setting {name!r}: not a Kafka broker config{meant}")


def _is_kafka_default(value, default) -> bool:
    return value in ("", None, []) if default is None else value == default


def _parse_value(setting: Setting, raw: str):
    raw = raw.strip()
    if setting.type is bool:
        if raw.lower() not in ("true", "false"):
            raise ConfigError(f"{setting.name}: expected true or false, got {raw!r}")
        return raw.lower() == "true"
    if setting.type is int:
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{setting.name}: expected an integer, got {raw!r}") from None
    if setting.type is float:
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{setting.name}: expected a number, got {raw!r}") from None
    if setting.choices and raw not in setting.choices:
        raise ConfigError(f"{setting.name}: expected one of {', '.join(setting.choices)}, got {raw!r}")
    return raw


def read_properties(text: str) -> dict[str, str]:
    """Java-style properties: `key=value` or `key: value`, # and ! comments, \\ continuations."""
    props: dict[str, str] = {}
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1]
            continue
        stripped, pending = pending + stripped, ""
        for i, ch in enumerate(stripped):
            if ch in "=:":
                props[stripped[:i].strip()] = stripped[i + 1:].strip()
                break
        else:
            props[stripped] = ""
    return props


class BrokerConfig:
    """Typed access to settings: `config["log.dirs"]`, plus derived values."""

    def __init__(self, values: dict[str, str] | None = None) -> None:
        self._values = {name: s.default for name, s in SETTINGS.items()}
        self._static = set(values or ())
        self._dynamic: tuple[dict, dict] = ({}, {})  # this broker's, the cluster default
        self.listener_overrides: dict[str, str] = {}  # listener.name.<listener>.<setting>, as given
        self.no_effect: dict[str, object] = {}  # Kafka's configs given that Weir has no behaviour for
        for name, raw in (values or {}).items():
            if name.startswith("listener.name."):
                self.listener_overrides[name] = raw.strip()
                continue
            setting = SETTINGS.get(name)
            if setting is None and name in NO_EFFECT:
                value = self.no_effect[name] = parse_typed(name, ConfigType[NO_EFFECT[name]], raw)
                if name in REFUSED_UNLESS_DEFAULT and not _is_kafka_default(value, REFUSED_UNLESS_DEFAULT[name]):
                    raise ConfigError(f"{name}={raw.strip()}: Weir cannot do what this Kafka setting asks, and will "
                                      "not start without it; remove it or set it to Kafka's default")
                continue
            if setting is None:
                raise unknown_setting(name)
            # a setting that topic configs override is checked as they are (Kafka's validators)
            self._values[name] = (parse_broker_synonym(name, raw) if name in BROKER_SYNONYMS
                                  else _parse_value(setting, raw))
        self._apply_coarser_units()
        self._resolve_log_dirs()
        for name in AT_LEAST_ONE:
            if self._values[name] < 1:
                raise ConfigError(f"Invalid value {self._values[name]} for configuration {name}: Value must be at least 1")
        self._check_consumer_group_bounds()
        try:
            self.listeners, self.advertised_listeners, self.inter_broker_listener_name = resolve(
                self["listeners"], self["advertised.listeners"], self["listener.security.protocol.map"],
                self["inter.broker.listener.name"], self["security.inter.broker.protocol"],
                "security.inter.broker.protocol" in self._static)
        except ListenerError as e:
            raise ConfigError(str(e)) from None
        self.listener = (self.listeners[0].host, self.listeners[0].port)  # the first one's, as before
        self.advertised = (self.advertised_listeners[0].host, self.advertised_listeners[0].port)

    def _check_consumer_group_bounds(self) -> None:
        """KafkaConfig's requirements of the consumer protocol's timeouts and assignors."""
        for what in ("heartbeat.interval", "session.timeout"):
            name, low, high = (f"group.consumer.{what}.ms", f"group.consumer.min.{what}.ms",
                               f"group.consumer.max.{what}.ms")
            if self[name] < self[low]:
                raise ConfigError(f"{name} must be greater than or equal to {low}")
            if self[name] > self[high]:
                raise ConfigError(f"{name} must be less than or equal to {high}")
        if self["group.consumer.heartbeat.interval.ms"] >= self["group.consumer.session.timeout.ms"]:
            raise ConfigError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
        from weir.groups.consumer_group import parse_assignors  # the assignors' names are the core's
        try:
            parse_assignors(self["group.consumer.assignors"])
        except ValueError as e:
            raise ConfigError(str(e)) from None
        protocols = {p.strip() for p in self["group.coordinator.rebalance.protocols"].split(",")}
        if not protocols <= {"classic", "consumer"} or "classic" not in protocols:
            raise ConfigError("group.coordinator.rebalance.protocols: classic must be in the list, and only classic "
                              "and consumer are served")

    def _apply_coarser_units(self) -> None:
        """A millisecond setting not given takes its value from the first of its coarser synonyms
        given, and counts as set in the properties (-1 or below for retention: unlimited)."""
        for name, synonyms in IN_COARSER_UNITS.items():
            given = [(synonym, unit) for synonym, unit in synonyms if synonym in self._static]
            if name in self._static or not given:
                continue
            synonym, unit = given[0]
            millis = self._values[synonym] * unit
            if name == "log.retention.ms" and millis < 0:
                millis = -1
            try:
                self._values[name] = parse_broker_synonym(name, str(millis))
            except ConfigError:
                raise ConfigError(f"{synonym}: {self._values[synonym]} is not a legal {name}") from None
            self._static.add(name)

    def _resolve_log_dirs(self) -> None:
        """Kafka's log.dirs, else log.dir (KafkaConfig.logDirs): a comma-separated list, of which
        Weir takes one directory and refuses more rather than put them all in one odd path."""
        name = "log.dirs" if "log.dirs" in self._static or "log.dir" not in self._static else "log.dir"
        dirs = [d.strip() for d in self._values[name].split(",") if d.strip()]
        if len(dirs) != 1:
            raise ConfigError(f"{name}={self._values[name]}: Weir keeps its logs in exactly one directory")
        self._values["log.dirs"] = dirs[0]

    @property
    def inter_broker_listener(self) -> Listener:
        return next(a for a in self.advertised_listeners if a.name == self.inter_broker_listener_name)

    def for_listener(self, listener: str, name: str):
        """A setting as one listener sees it: `listener.name.<listener>.<name>` (a str), else the
        broker-wide value."""
        prefix = f"listener.name.{listener.lower()}."
        for key, value in self.listener_overrides.items():
            if key.lower() == prefix + name.lower():
                return _parse_value(SETTINGS[name], value) if name in SETTINGS else value
        return self[name] if name in SETTINGS else None

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: list[str] = ()) -> "BrokerConfig":
        values = read_properties(Path(path).read_text()) if path else {}
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"override {item!r} is not key=value")
            key, value = item.split("=", 1)
            values[key.strip()] = value
        return cls(values)

    def __getitem__(self, name: str):
        for layer in self._dynamic:
            if name in layer:
                return layer[name]
        return self._values[name]

    def set_dynamic(self, cluster_default: Mapping[str, str], this_broker: Mapping[str, str]) -> set[str]:
        """The dynamic configs ZooKeeper holds now; returns the names whose value changed. A value
        that does not parse (written by another tool) is ignored, as Kafka does."""
        names = set(self._dynamic[0]) | set(self._dynamic[1]) | set(cluster_default) | set(this_broker)
        before = {name: self[name] for name in names if name in SETTINGS}
        self._dynamic = (self._parse_dynamic(this_broker, "broker"), self._parse_dynamic(cluster_default, "cluster"))
        return {name for name, value in before.items() if self[name] != value}

    def _parse_dynamic(self, raw: Mapping[str, str], scope: str) -> dict[str, object]:
        parsed = {}
        for name, value in raw.items():
            try:
                parsed[name] = parse_dynamic(name, value)
            except ConfigError as e:
                log.warning("ignoring the %s-wide dynamic config %s: %s", scope, name, e)
        return parsed

    def layers(self, name: str) -> list[tuple[object, int]]:
        """(value, source) of `name` in each place that sets it, the one that counts first, the
        default last (DescribeConfigs' synonyms)."""
        found = [(layer[name], source) for layer, source in zip(
            self._dynamic, (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG)) if name in layer]
        if name in self._static:
            found.append((self._values[name], STATIC_BROKER_CONFIG))
        return found + [(SETTINGS[name].default, DEFAULT_CONFIG)]

    def source(self, name: str) -> int:
        return self.layers(name)[0][1]

    def is_static(self, name: str) -> bool:
        """Set in the properties file or an override (Kafka's STATIC_BROKER_CONFIG), not left at
        its default: DescribeConfigs tells the two apart even when the values are equal."""
        return name in self._static


AT_LEAST_ONE = ("quota.window.num", "quota.window.size.seconds", "controller.quota.window.num",
                "controller.quota.window.size.seconds")  # Kafka's atLeast(1)


def dynamic_settings() -> frozenset[str]:
    """What Kafka lets a running cluster change (KIP-226; cluster-wide or per broker): every
    broker setting that a topic config overrides, the cleaner's, the replication throttles."""
    return frozenset(BROKER_SYNONYMS) | {"log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
                                         "log.cleaner.io.buffer.load.factor", "leader.replication.throttled.rate",
                                         "follower.replication.throttled.rate"}


def parse_dynamic(name: str, raw: str):
    """A dynamic config's value, checked as at start-up; ConfigError if it is not one."""
    if name not in dynamic_settings():
        raise ConfigError(f"Cannot update these configs dynamically: Set({name})")
    if name in BROKER_SYNONYMS:
        return parse_broker_synonym(name, raw)
    value = _parse_value(SETTINGS[name], raw)
    if isinstance(value, int) and value < 0:
        raise ConfigError(f"Invalid value {raw} for configuration {name}: Value must be at least 0")
    return value

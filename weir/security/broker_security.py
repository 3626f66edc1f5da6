"""What each listener of a broker asks of its clients, and how the broker itself connects to its
peers, worked out once from the config at start-up (a bad key store or JAAS line stops the broker
with a readable message, as Kafka's would).

SASL settings, each also per listener (`listener.name.<listener>.<name>`):
- `sasl.enabled.mechanisms`: of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.
- `listener.name.<listener>.plain.sasl.jaas.config`: PlainLoginModule with `user_<name>="<pw>"`, the
  PLAIN users (Kafka's way; there is no other store of PLAIN users).
- `listener.name.<listener>.<mechanism>.sasl.jaas.config`, on the inter-broker listener: the
  `username`/`password` this broker authenticates to its peers with, using
  `sasl.mechanism.inter.broker.protocol`.
SCRAM users live in ZooKeeper (/config/users/<user>), managed with AlterUserScramCredentials.
"""

import ssl
from dataclasses import dataclass, field

from weir.client import ClientSecurity
from weir.config.broker_config import BrokerConfig
from weir.config.settings import ConfigError
from weir.security.authenticator import SUPPORTED_MECHANISMS
from weir.security.jaas import JaasError, parse_jaas, plain_users
from weir.security.listeners import Listener
from weir.security.tls import TlsConfigError, client_context, parse_principal_rules, server_context


@dataclass
class ListenerSecurity:
    listener: Listener
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict)
    reauth_ms: int = 0
    idle_ms: int = 600000
    failed_authentication_delay_ms: int = 100
    max_receive_before_authentication: int = 524288  # sasl.server.max.receive.size
    principal_rules: list = field(default_factory=list)  # ssl.principal.mapping.rules, parsed (SSL listeners)


def _jaas(config: BrokerConfig, listener: str, mechanism: str) -> dict[str, str]:
    text = config.for_listener(listener, f"{mechanism.lower()}.sasl.jaas.config")
    if not text:
        return {}
    try:
        return parse_jaas(text)
    except JaasError as e:
        raise ConfigError(f"listener.name.{listener.lower()}.{mechanism.lower()}.{e}") from None


def _mechanisms(config: BrokerConfig, listener: str, name: str = "sasl.enabled.mechanisms") -> tuple[str, ...]:
    mechanisms = tuple(m.strip().upper() for m in str(config.for_listener(listener, name)).split(",") if m.strip())
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported or not mechanisms:
        raise ConfigError(f"{name} of listener {listener}: {', '.join(unsupported) or 'none'}: Weir serves "
                          f"{', '.join(SUPPORTED_MECHANISMS)} (set {name})")
    return mechanisms


def listener_security(config: BrokerConfig, listener: Listener) -> ListenerSecurity:
    security = ListenerSecurity(listener, idle_ms=config["connections.max.idle.ms"],
                                reauth_ms=config.for_listener(listener.name, "connections.max.reauth.ms"),
                                failed_authentication_delay_ms=config["connection.failed.authentication.delay.ms"],
                                max_receive_before_authentication=config["sasl.server.max.receive.size"])
    if listener.uses_tls:
        try:
            security.ssl_context = server_context(lambda name: config.for_listener(listener.name, name))
            security.principal_rules = parse_principal_rules(
                config.for_listener(listener.name, "ssl.principal.mapping.rules"))
        except TlsConfigError as e:
            raise ConfigError(f"listener {listener.name}: {e}") from None
    if listener.uses_sasl:
        security.mechanisms = _mechanisms(config, listener.name)
        if "PLAIN" in security.mechanisms:
            security.plain_users = plain_users(_jaas(config, listener.name, "PLAIN"))
    return security


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """How this broker connects to its peers: the inter-broker listener's protocol, TLS settings,
    and SASL mechanism and login."""
    listener = config.inter_broker_listener
    context = None
    if listener.uses_tls:
        try:
            context = client_context(lambda name: config.for_listener(listener.name, name))
        except TlsConfigError as e:
            raise ConfigError(f"inter-broker listener {listener.name}: {e}") from None
    if not listener.uses_sasl:
        return ClientSecurity(listener.protocol, context)
    mechanism = _mechanisms(config, listener.name, "sasl.mechanism.inter.broker.protocol")[0]
    login = _jaas(config, listener.name, mechanism)
    if "username" not in login or "password" not in login:
        raise ConfigError(f"the inter-broker listener {listener.name} uses SASL {mechanism}: set "
                          f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config with "
                          f"username and password")
    return ClientSecurity(listener.protocol, context, mechanism, login["username"], login["password"])

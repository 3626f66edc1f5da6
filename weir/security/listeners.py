"""Named listeners, as Kafka configures them.

    listeners=INTERNAL://0.0.0.0:9093,EXTERNAL://0.0.0.0:9092
    advertised.listeners=INTERNAL://broker-1:9093,EXTERNAL://public-name:9092
    listener.security.protocol.map=INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL
    inter.broker.listener.name=INTERNAL

A listener's name picks its security protocol through the map (whose default maps each protocol's
name to itself, so `SSL://:9093` is an SSL listener). Brokers register every advertised listener in
ZooKeeper; Metadata answers a client with the endpoints of the listener it connected on, and
brokers reach each other on the inter-broker listener (`inter.broker.listener.name`, else the
listener named by `security.inter.broker.protocol`).
"""

from dataclasses import dataclass

from weir.protocol.security_protocols import PROTOCOLS, SecurityProtocolOf

DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in PROTOCOLS)


class ListenerError(ValueError):
    """A listener setting Kafka would refuse; the message names the setting."""


@dataclass(frozen=True)
class Listener(SecurityProtocolOf):
    name: str       # upper case, as Kafka normalises it
    protocol: str   # one of PROTOCOLS
    host: str
    port: int

    def endpoint(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_protocol_map(spec: str) -> dict[str, str]:
    """`NAME:PROTOCOL,...` → {NAME: PROTOCOL}."""
    mapping = {}
    for item in filter(None, (i.strip() for i in spec.split(","))):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip():
            raise ListenerError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
        if protocol not in PROTOCOLS:
            raise ListenerError(f"listener.security.protocol.map: {item!r}: the protocol must be one of "
                                f"{', '.join(PROTOCOLS)}")
        mapping[name.strip().upper()] = protocol
    return mapping


def parse_listeners(spec: str, protocols: dict[str, str], setting: str = "listeners") -> list[Listener]:
    """`NAME://host:port,...` → listeners; an empty host means every interface (0.0.0.0)."""
    listeners: list[Listener] = []
    for item in filter(None, (i.strip() for i in spec.split(","))):
        name, sep, address = item.partition("://")
        name = name.strip().upper()
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit():
            raise ListenerError(f"{setting}: {item!r} is not NAME://host:port")
        if name not in protocols:
            raise ListenerError(f"{setting}: listener {name} has no security protocol in "
                                f"listener.security.protocol.map (known: {', '.join(protocols)})")
        if any(other.name == name for other in listeners):
            raise ListenerError(f"{setting}: listener {name} is named twice")
        listeners.append(Listener(name, protocols[name], host.strip("[]") or "0.0.0.0", int(port)))
    if not listeners:
        raise ListenerError(f"{setting}: no listener")
    return listeners


def resolve(listeners_spec: str, advertised_spec: str, protocol_map_spec: str, inter_broker_name: str,
            inter_broker_protocol: str, inter_broker_protocol_set: bool
            ) -> tuple[list[Listener], list[Listener], str]:
    """(listeners, advertised listeners, the inter-broker listener's name), checked as Kafka does.

    One deviation: with a single listener and neither inter-broker setting given, that listener
    carries inter-broker traffic (Kafka would ask for `inter.broker.listener.name`)."""
    protocols = parse_protocol_map(protocol_map_spec)
    listeners = parse_listeners(listeners_spec, protocols)
    ports = [l.port for l in listeners if l.port]
    if len(set(ports)) != len(ports):
        raise ListenerError("listeners: each listener needs its own port")
    advertised = parse_listeners(advertised_spec, protocols, "advertised.listeners") if advertised_spec else listeners
    names = {l.name for l in listeners}
    for a in advertised:
        if a.name not in names:
            raise ListenerError(f"advertised.listeners: {a.name} is not one of the listeners ({', '.join(names)})")
    if inter_broker_name:
        if inter_broker_protocol_set:
            raise ListenerError("set only one of inter.broker.listener.name and security.inter.broker.protocol")
        name = inter_broker_name.strip().upper()
    elif not inter_broker_protocol_set and len(advertised) == 1:
        name = advertised[0].name
    else:
        name = inter_broker_protocol.strip().upper()
    if name not in {a.name for a in advertised}:
        raise ListenerError(f"inter.broker.listener.name must be a listener name defined in advertised.listeners: "
                            f"{name} is not one of {', '.join(a.name for a in advertised)}")
    return listeners, advertised, name

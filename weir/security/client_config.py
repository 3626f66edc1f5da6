"""Kafka client properties → weir.client.ClientSecurity, for the admin tools' `--command-config`
(as Kafka's tools take it) and the Spark source's `kafka.*` options.

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="...";
    ssl.truststore.location=data/tls/ca.pem          (PEM; ssl.truststore.type=PEM)

librdkafka's names work too: `sasl.username`, `sasl.password`, `ssl.ca.location`,
`ssl.certificate.location` + `ssl.key.location`. `ssl.keystore.location` (PEM, key and chain in
one file) presents a client certificate; `ssl.endpoint.identification.algorithm=` (empty) skips
the host-name check.
"""

import ssl
from collections.abc import Mapping

from weir.client import ClientSecurity
from weir.security.jaas import parse_jaas
from weir.security.listeners import PROTOCOLS


def client_security(props: Mapping[str, str]) -> ClientSecurity:
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"security.protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        cafile = props.get("ssl.truststore.location") or props.get("ssl.ca.location") or None
        context = ssl.create_default_context(cafile=cafile)
        if props.get("ssl.endpoint.identification.algorithm", "https") == "":
            context.check_hostname = False
        password = props.get("ssl.key.password") or None
        if props.get("ssl.keystore.location"):
            context.load_cert_chain(props["ssl.keystore.location"], password=password)
        elif props.get("ssl.certificate.location"):
            context.load_cert_chain(props["ssl.certificate.location"], props.get("ssl.key.location"), password)
    mechanism = username = password = ""
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()
        login = parse_jaas(props["sasl.jaas.config"]) if props.get("sasl.jaas.config") else {}
        username = props.get("sasl.username", login.get("username", ""))
        password = props.get("sasl.password", login.get("password", ""))
        if not username:
            raise ValueError("a SASL client needs sasl.jaas.config (or sasl.username and sasl.password)")
    return ClientSecurity(protocol, context, mechanism, username, password)


def load_command_config(path: str | None) -> ClientSecurity | None:
    """`--command-config FILE` (Java properties); None without one."""
    if not path:
        return None
    from pathlib import Path

    from weir.config.broker_config import read_properties
    return client_security(read_properties(Path(path).read_text()))


def librdkafka_config(props: dict[str, str]) -> dict[str, str]:
    """Kafka (Java) client security properties as librdkafka (confluent-kafka) takes them: the
    JAAS login → sasl.username/sasl.password, a PEM trust store → ssl.ca.location, a PEM key store
    (key and chain in one file) → ssl.key.location/ssl.certificate.location, an empty
    ssl.endpoint.identification.algorithm → none. Other properties pass unchanged."""
    out = dict(props)
    jaas = out.pop("sasl.jaas.config", None)
    if jaas:
        login = parse_jaas(jaas)
        out.setdefault("sasl.username", login.get("username", ""))
        out.setdefault("sasl.password", login.get("password", ""))
    for java_only in ("ssl.truststore.type", "ssl.keystore.type"):
        out.pop(java_only, None)
    if "ssl.truststore.location" in out:
        out.setdefault("ssl.ca.location", out.pop("ssl.truststore.location"))
    if "ssl.keystore.location" in out:
        keystore = out.pop("ssl.keystore.location")
        out.setdefault("ssl.key.location", keystore)
        out.setdefault("ssl.certificate.location", keystore)
    if out.get("ssl.endpoint.identification.algorithm") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    return out

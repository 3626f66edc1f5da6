"""TLS for SSL and SASL_SSL listeners, from Kafka's `ssl.*` settings, with Python's ssl module.

Key store: `ssl.keystore.type=PEM` with `ssl.keystore.location` (a file holding the private key and
the certificate chain; `ssl.key.password` if the key is encrypted), or the PEM text itself in
`ssl.keystore.key` and `ssl.keystore.certificate.chain`; `PKCS12` files are read with
`cryptography`. Trust store: `ssl.truststore.location` (PEM CA certificates, or PKCS12), or
`ssl.truststore.certificates`. `ssl.client.auth` none/requested/required asks clients for a
certificate; `ssl.enabled.protocols` bounds the TLS versions (1.2 and 1.3).

Each setting may be given for one listener (`listener.name.<listener>.ssl.keystore.location`), as
Kafka's; `config.for_listener` picks it.

The principal of an SSL connection is Kafka's default: `User:` and the subject of the client's
certificate as an RFC 2253 distinguished name (`User:CN=alice,OU=eng`), `User:ANONYMOUS` if it sent
none. `ssl.principal.mapping.rules` rewrites the name as Kafka's SslPrincipalMapper does:
`RULE:^CN=(.*?),OU=.*$/$1/L,DEFAULT` (the first rule whose pattern matches the whole name wins;
`L`/`U` lower or upper case the result; DEFAULT keeps the name; none matching refuses the client).
"""

import os
import re
import ssl
import tempfile

ANONYMOUS = "User:ANONYMOUS"
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    """A key store or trust store that cannot be used; the message names the setting."""


def server_context(setting) -> ssl.SSLContext:
    """The context of a TLS listener; `setting(name)` reads a setting as the listener sees it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, setting)
    _load_keystore(context, setting, required=True)
    client_auth = setting("ssl.client.auth")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    if client_auth != "none":
        _load_truststore(context, setting, ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(setting) -> ssl.SSLContext:
    """The context a broker connects to its peers with (the inter-broker listener's settings): it
    trusts the trust store, checks host names unless `ssl.endpoint.identification.algorithm` is
    empty, and presents the key store's certificate if there is one (for ssl.client.auth)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, setting)
    context.check_hostname = bool(setting("ssl.endpoint.identification.algorithm"))
    _load_truststore(context, setting, ssl.Purpose.SERVER_AUTH)
    _load_keystore(context, setting, required=False)
    return context


def principal_of(ssl_object, rules: "list[tuple] | None" = None) -> str:
    """Kafka's principal of a TLS peer: `User:<subject DN, RFC 2253>` mapped by `rules`
    (parse_principal_rules), or ANONYMOUS without a certificate. NoRuleApplies if no rule does."""
    if ssl_object is None:
        return ANONYMOUS
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    from cryptography import x509
    name = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    return "User:" + (map_principal(name, rules) if rules else name)


class NoRuleApplies(ValueError):
    pass


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


def parse_principal_rules(spec: str) -> list[tuple]:
    """`ssl.principal.mapping.rules` → [(pattern or None for DEFAULT, replacement, case)]."""
    rules, position = [], 0
    spec = spec.strip()
    while position < len(spec):
        match = _RULE.match(spec, position)
        if not match or match.end() == position:
            raise TlsConfigError(f"ssl.principal.mapping.rules: cannot read {spec[position:][:40]!r} "
                                 f"(expected DEFAULT or RULE:pattern/replacement/[LU])")
        if match.group(1):
            rules.append((None, "", ""))
        else:
            try:
                pattern = re.compile(match.group(2))
            except re.error as e:
                raise TlsConfigError(f"ssl.principal.mapping.rules: {match.group(2)!r}: {e}") from None
            # Java's $1 group references are Python's \g<1>
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", match.group(3).replace("\\/", "/"))
            rules.append((pattern, replacement, match.group(4)))
        position = match.end()
    return rules


def map_principal(name: str, rules: list[tuple]) -> str:
    for pattern, replacement, case in rules:
        if pattern is None:
            return name
        if pattern.fullmatch(name):
            mapped = pattern.sub(replacement, name, count=1)
            return mapped.lower() if case == "L" else mapped.upper() if case == "U" else mapped
    raise NoRuleApplies(f"no ssl.principal.mapping.rules rule applies to {name!r}")


def _versions(context: ssl.SSLContext, setting) -> None:
    names = [v.strip() for v in setting("ssl.enabled.protocols").split(",") if v.strip()]
    unknown = [n for n in names if n not in _VERSIONS]
    if unknown or not names:
        raise TlsConfigError(f"ssl.enabled.protocols: {', '.join(unknown) or 'empty'}: "
                             f"Weir serves {', '.join(_VERSIONS)}")
    versions = sorted(_VERSIONS[n] for n in names)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if setting("ssl.cipher.suites"):
        try:
            context.set_ciphers(setting("ssl.cipher.suites"))
        except ssl.SSLError as e:
            raise TlsConfigError(f"ssl.cipher.suites: {e}") from None


def _load_keystore(context: ssl.SSLContext, setting, required: bool) -> None:
    location, kind = setting("ssl.keystore.location"), setting("ssl.keystore.type")
    key, chain = setting("ssl.keystore.key"), setting("ssl.keystore.certificate.chain")
    password = setting("ssl.key.password") or None
    try:
        if key and chain:
            _load_chain_text(context, key + "\n" + chain, password)
        elif location and kind == "PKCS12":
            _load_chain_text(context, _pkcs12_as_pem(location, setting("ssl.keystore.password")), None)
        elif location:
            context.load_cert_chain(location, password=password)
        elif required:
            raise TlsConfigError("a TLS listener needs ssl.keystore.location (or ssl.keystore.key and "
                                 "ssl.keystore.certificate.chain)")
    except (OSError, ssl.SSLError, ValueError) as e:
        if isinstance(e, TlsConfigError):
            raise
        raise TlsConfigError(f"ssl.keystore ({location or 'ssl.keystore.key'}): {e}") from None


def _load_truststore(context: ssl.SSLContext, setting, purpose: ssl.Purpose) -> None:
    location, kind = setting("ssl.truststore.location"), setting("ssl.truststore.type")
    certificates = setting("ssl.truststore.certificates")
    try:
        if certificates:
            context.load_verify_locations(cadata=certificates)
        elif location and kind == "PKCS12":
            context.load_verify_locations(cadata=_pkcs12_certificates(location, setting("ssl.truststore.password")))
        elif location:
            context.load_verify_locations(cafile=location)
        else:
            context.load_default_certs(purpose)
    except (OSError, ssl.SSLError, ValueError) as e:
        raise TlsConfigError(f"ssl.truststore ({location or 'ssl.truststore.certificates'}): {e}") from None


def _load_chain_text(context: ssl.SSLContext, pem: str, password: str | None) -> None:
    """Python loads key and chain only from a file: a private temporary one, removed at once."""
    fd, path = tempfile.mkstemp(prefix="weir-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _pkcs12_as_pem(location: str, password: str) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    with open(location, "rb") as f:
        key, cert, extra = pkcs12.load_key_and_certificates(f.read(), password.encode() or None)
    if key is None or cert is None:
        raise TlsConfigError(f"ssl.keystore.location {location}: no private key and certificate")
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    for c in [cert, *extra]:
        pem += c.public_bytes(serialization.Encoding.PEM)
    return pem.decode()


def _pkcs12_certificates(location: str, password: str) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    with open(location, "rb") as f:
        _, cert, extra = pkcs12.load_key_and_certificates(f.read(), password.encode() or None)
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in [cert, *extra] if c is not None)

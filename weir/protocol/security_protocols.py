"""Kafka's security protocols (`security.protocol`, `listener.security.protocol.map`), and what
each asks of a connection: TLS under SSL and SASL_SSL, SASL under SASL_PLAINTEXT and SASL_SSL."""

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class SecurityProtocolOf:
    """For anything with a `protocol` (a client's settings, a broker's listener)."""
    protocol: str

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

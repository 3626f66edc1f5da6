"""Listeners, TLS and SASL authentication, with Kafka's config names (issue 15).

- `listeners`: named listeners and their security protocols (`listeners`, `advertised.listeners`,
  `listener.security.protocol.map`, `inter.broker.listener.name`).
- `tls`: the broker's and the inter-broker client's `ssl.SSLContext` from `ssl.*` settings, and
  the mTLS principal of a peer certificate.
- `authenticator`: one connection's SASL state (SaslHandshake, SaslAuthenticate, KIP-368
  re-authentication): a pure state machine that the connection feeds.
- `jaas`: the JAAS-style login config Kafka takes for PLAIN users and inter-broker credentials.
- `certificates`: a CA and broker certificates for `weir up --secure`.

The SCRAM exchange itself (RFC 5802/7677) is pure protocol: `weir.protocol.scram`.
"""

"""Listeners, TLS and SASL authentication, and ACLs, with Kafka's config names (issue 15).

- `listeners`: named listeners and their security protocols (`listeners`, `advertised.listeners`,
  `listener.security.protocol.map`, `inter.broker.listener.name`).
- `tls`: the broker's and the inter-broker client's `ssl.SSLContext` from `ssl.*` settings, and
  the mTLS principal of a peer certificate.
- `authenticator`: one connection's SASL state (SaslHandshake, SaslAuthenticate, KIP-368
  re-authentication): a pure state machine that the connection (weir.broker.connection) feeds.
- `broker_security`: what each listener asks of its clients, and how the broker logs in to its
  peers, worked out from the config at start-up.
- `jaas`: the JAAS-style login config Kafka takes for PLAIN users and inter-broker credentials.
- `scram_store`: SCRAM credentials in ZooKeeper (/config/users/<user>), Kafka's format.
- `client_config`: Kafka client properties (`--command-config`, Spark's `kafka.*`) → a client's
  security, and their librdkafka names.
- `certificates`: a CA and the certificates it signs, for `weir up --secure` and the tests.
- `acls`: ACL bindings, filters and the authorization decision (Kafka's AclAuthorizer), pure, with
  the ZooKeeper layout and change notices.
- `authorization`: which operation each API needs on which resource (one table), and the helper
  request handlers ask, caching decisions.
- `acl_store`: the ACLs in ZooKeeper, kept current on every broker by the change notices.

The SCRAM exchange itself (RFC 5802/7677) is pure protocol: `weir.protocol.scram`. The principal a
connection authenticated as travels on each request (`RequestHeader.principal`, with the
listener and the client's address), where the handlers' `authorization` helper reads it.
"""

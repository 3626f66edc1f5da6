"""The broker configs Kafka 3.9 defines that Weir accepts and ignores, by Kafka's type.

Kafka's broker takes every name its KafkaConfig defines (AbstractKafkaConfig.CONFIG_DEF: the
ZooKeeper-mode and shared ones, and the KRaft ones a ZooKeeper broker ignores too), so that its
own config/server.properties and production ones start Weir. A value is still checked against
its Kafka type; the broker names the ones set, once, at start-up. The names Weir honours are in
weir.config.broker_config.SETTINGS; this table holds the rest, and a name in neither is not a Kafka broker config.
"""

NO_EFFECT_BY_TYPE = {
    "BOOLEAN": """
        auto.include.jmx.reporter broker.id.generation.enable eligible.leader.replicas.enable
        group.coordinator.new.enable group.share.enable remote.log.storage.system.enable
        ssl.allow.dn.changes ssl.allow.san.changes unstable.api.versions.enable
        unstable.feature.versions.enable zookeeper.metadata.migration.enable zookeeper.ssl.client.enable
        zookeeper.ssl.crl.enable zookeeper.ssl.ocsp.enable""",
    "CLASS": """
        alter.config.policy.class.name client.quota.callback.class create.topic.policy.class.name
        principal.builder.class sasl.client.callback.handler.class sasl.login.callback.handler.class
        sasl.login.class sasl.server.callback.handler.class ssl.engine.factory.class""",
    "DOUBLE": """
        log.cleaner.io.max.bytes.per.second remote.log.manager.task.retry.jitter
        sasl.kerberos.ticket.renew.jitter sasl.kerberos.ticket.renew.window.factor
        sasl.login.refresh.window.factor sasl.login.refresh.window.jitter""",
    "INT": """
        alter.log.dirs.replication.quota.window.num alter.log.dirs.replication.quota.window.size.seconds
        background.threads broker.heartbeat.interval.ms broker.session.timeout.ms
        controller.quorum.append.linger.ms
        controller.quorum.election.backoff.max.ms controller.quorum.election.timeout.ms
        controller.quorum.fetch.timeout.ms controller.quorum.request.timeout.ms
        controller.quorum.retry.backoff.ms
        controller.socket.timeout.ms
        delete.records.purgatory.purge.interval.requests fetch.purgatory.purge.interval.requests
       
       
       
        group.coordinator.append.linger.ms group.coordinator.threads
        group.share.delivery.count.limit group.share.heartbeat.interval.ms
        group.share.max.heartbeat.interval.ms group.share.max.record.lock.duration.ms
        group.share.max.session.timeout.ms group.share.min.heartbeat.interval.ms
        group.share.min.record.lock.duration.ms group.share.min.session.timeout.ms
        group.share.partition.max.record.locks group.share.record.lock.duration.ms
        group.share.session.timeout.ms initial.broker.registration.timeout.ms
        kafka.metrics.polling.interval.secs log.cleaner.io.buffer.size log.cleaner.threads
        log.flush.start.offset.checkpoint.interval.ms max.connection.creation.rate max.connections
        max.connections.per.ip max.request.partition.size.limit metadata.log.segment.bytes
        metadata.log.segment.min.bytes metadata.max.idle.interval.ms metrics.num.samples node.id
        num.io.threads num.network.threads num.recovery.threads.per.data.dir
        num.replica.alter.log.dirs.threads num.replica.fetchers offsets.load.buffer.size
        offsets.topic.compression.codec password.encoder.iterations password.encoder.key.length
        producer.id.expiration.check.interval.ms producer.purgatory.purge.interval.requests
        queued.max.requests remote.fetch.max.wait.ms
        remote.log.manager.copier.thread.pool.size remote.log.manager.copy.quota.window.num
        remote.log.manager.copy.quota.window.size.seconds remote.log.manager.expiration.thread.pool.size
        remote.log.manager.fetch.quota.window.num remote.log.manager.fetch.quota.window.size.seconds
        remote.log.manager.thread.pool.size remote.log.metadata.custom.metadata.max.bytes
        remote.log.reader.max.pending.tasks remote.log.reader.threads
        replica.socket.receive.buffer.bytes replica.socket.timeout.ms replication.quota.window.num
        replication.quota.window.size.seconds reserved.broker.max.id sasl.login.connect.timeout.ms
        sasl.login.read.timeout.ms sasl.oauthbearer.clock.skew.seconds socket.listen.backlog.size
        socket.receive.buffer.bytes socket.send.buffer.bytes telemetry.max.bytes
        zookeeper.max.in.flight.requests zookeeper.metadata.migration.min.batch.size""",
    "LIST": """
        controller.quorum.bootstrap.servers controller.quorum.voters
        kafka.metrics.reporters metric.reporters process.roles
        sasl.kerberos.principal.to.local.rules sasl.oauthbearer.expected.audience
        zookeeper.ssl.cipher.suites zookeeper.ssl.enabled.protocols""",
    "LONG": """
        delegation.token.expiry.check.interval.ms
        delegation.token.expiry.time.ms delegation.token.max.lifetime.ms log.dir.failure.timeout.ms
        log.initial.task.delay.ms metadata.log.max.record.bytes.between.snapshots
        metadata.log.max.snapshot.interval.ms metadata.log.segment.ms metadata.max.retention.bytes
        metadata.max.retention.ms metrics.sample.window.ms queued.max.request.bytes
        remote.log.index.file.cache.total.size.bytes remote.log.manager.copy.max.bytes.per.second
        remote.log.manager.fetch.max.bytes.per.second remote.log.manager.task.interval.ms
        remote.log.manager.task.retry.backoff.max.ms remote.log.manager.task.retry.backoff.ms
        replica.high.watermark.checkpoint.interval.ms sasl.kerberos.min.time.before.relogin
        sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms
        sasl.oauthbearer.jwks.endpoint.refresh.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
        sasl.oauthbearer.jwks.endpoint.retry.backoff.ms server.max.startup.time.ms
        socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms
        unclean.leader.election.interval.ms""",
    "PASSWORD": """
        delegation.token.master.key delegation.token.secret.key password.encoder.old.secret
        password.encoder.secret sasl.jaas.config zookeeper.ssl.keystore.password
        zookeeper.ssl.truststore.password""",
    "SHORT": """
        group.share.max.groups group.share.max.size offsets.commit.required.acks
        sasl.login.refresh.buffer.seconds sasl.login.refresh.min.period.seconds""",
    "STRING": """
        control.plane.listener.name controller.listener.names early.start.listeners
        group.consumer.migration.policy inter.broker.protocol.version
        max.connections.per.ip.overrides metadata.log.dir metrics.recording.level
        password.encoder.cipher.algorithm password.encoder.keyfactory.algorithm
        remote.log.metadata.manager.class.name remote.log.metadata.manager.class.path
        remote.log.metadata.manager.impl.prefix remote.log.metadata.manager.listener.name
        remote.log.storage.manager.class.name remote.log.storage.manager.class.path
        remote.log.storage.manager.impl.prefix replica.selector.class sasl.kerberos.kinit.cmd
        sasl.kerberos.service.name sasl.mechanism.controller.protocol sasl.oauthbearer.expected.issuer
        sasl.oauthbearer.jwks.endpoint.url sasl.oauthbearer.scope.claim.name
        sasl.oauthbearer.sub.claim.name sasl.oauthbearer.token.endpoint.url security.providers
        ssl.keymanager.algorithm ssl.provider ssl.secure.random.implementation
        ssl.trustmanager.algorithm zookeeper.clientCnxnSocket
        zookeeper.ssl.endpoint.identification.algorithm zookeeper.ssl.keystore.location
        zookeeper.ssl.keystore.type zookeeper.ssl.protocol zookeeper.ssl.truststore.location
        zookeeper.ssl.truststore.type""",
}

NO_EFFECT = {name: kind for kind, names in NO_EFFECT_BY_TYPE.items() for name in names.split()}

# Of those, the ones a broker given them would be trusted to protect something with: ignoring them
# would leave it open where its operator closed it (ZooKeeper over plaintext, no connection
# limits, no topic or config policy, another authentication). They are refused unless at Kafka's
# default: `None` stands for null or empty.
REFUSED_UNLESS_DEFAULT = {
    "zookeeper.ssl.client.enable": False,
    "max.connections": 2**31 - 1,
    "max.connections.per.ip": 2**31 - 1,
    "max.connections.per.ip.overrides": None,
    "principal.builder.class": "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
    "sasl.server.callback.handler.class": None,
    "ssl.engine.factory.class": None,
    "create.topic.policy.class.name": None,
    "alter.config.policy.class.name": None,
    "client.quota.callback.class": None,
}

"""ACLs on a secured two-broker cluster (`weir up --secure`'s setup: SASL_SSL, SCRAM-SHA-512, the
authorizer on, `admin` a super user and the brokers' own user).

Issue 15's "done when": alice, a user without ACLs, gets TOPIC_AUTHORIZATION_FAILED on produce
and does not see the topic in Metadata; `weir acls --add` of a prefixed ACL lets her in without a
restart (confluent-kafka and kafka-python agree); her consumer group is refused
(GROUP_AUTHORIZATION_FAILED) until the AdminClient's create_acls grants it; deleting the prefixed
ACL (the AdminClient's delete_acls) takes her writes away again. The super user's acks=all
writes to a replicated topic prove that followers still fetch (CLUSTER_ACTION as admin). Asked
for (include_authorized_operations), Metadata, DescribeCluster and DescribeGroups list the
operations she may do."""

import subprocess
import sys

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)
from waiting import wait_until

from weir.lab.local_cluster import LocalCluster, SecureSetup

FAST = {"zookeeper.session.timeout.ms": "6000", "replica.fetch.backoff.ms": "200",  # as tests/conftest.py's
        "group.initial.rebalance.delay.ms": "0"}
TOPIC = "pre-x"


def deliver(producer: Producer, topic: str):
    """Produce one record; its delivery error (None: written)."""
    outcome = []
    try:
        producer.produce(topic, b"v", on_delivery=lambda err, msg: outcome.append(err))
    except KafkaException as e:  # librdkafka knows already, from Metadata
        return e.args[0]
    producer.flush(15)
    return outcome[0] if outcome else "not delivered"


def error_code(err):
    return None if err is None else err.code()


def weir_acls(cluster, properties, *args) -> str:
    done = subprocess.run([sys.executable, "-m", "weir.cli.main", "acls", "--bootstrap-server", cluster.bootstrap,
                           "--command-config", str(properties), *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_acls_grant_and_take_away_access_without_restarts(tmp_path, zookeeper_connect):
    secure = SecureSetup(tmp_path)
    cluster = LocalCluster(tmp_path, 2, zookeeper_connect=zookeeper_connect, secure=secure, overrides=FAST)
    try:
        cluster.start()
        admin_config = {"bootstrap.servers": cluster.bootstrap, **secure.client_config()}
        admin = AdminClient(admin_config)
        upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              b"alice-secret")
        [future.result(30) for future in admin.alter_user_scram_credentials([upsert]).values()]
        admin.create_topics([NewTopic(TOPIC, 2, 2, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        # the super user writes with acks=all to both replicas: the followers' fetches are authorized
        super_producer = Producer({**admin_config, "acks": "all", "enable.idempotence": True})
        assert deliver(super_producer, TOPIC) is None

        alice_config = {**admin_config, "sasl.username": "alice", "sasl.password": "alice-secret"}
        alice_admin = AdminClient(alice_config)
        assert TOPIC not in alice_admin.list_topics(timeout=10).topics
        named = alice_admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
        assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        alice_producer = {**alice_config, "acks": "all", "message.timeout.ms": 5000}
        assert error_code(deliver(Producer(alice_producer), TOPIC)) == KafkaError.TOPIC_AUTHORIZATION_FAILED

        properties = tmp_path / "admin.properties"
        properties.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                              "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                              f'username="admin" password="{secure.admin_password}";\n'
                              f"ssl.truststore.type=PEM\nssl.truststore.location={secure.ca_path}\n")
        added = weir_acls(cluster, properties, "--add", "--allow-principal", "User:alice", "--operation", "Write",
                          "--operation", "Describe", "--topic", "pre", "--resource-pattern-type", "prefixed")
        assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in added
        wait_until(lambda: deliver(Producer(alice_producer), TOPIC) is None, "alice to write once the ACL is in", 15)
        alice = Producer(alice_producer)
        assert deliver(alice, TOPIC) is None
        assert TOPIC in alice_admin.list_topics(timeout=10).topics

        kafka_python_agrees(cluster, secure)
        alice_reads_once_granted(admin, alice_config)
        authorized_operations_are_hers(admin, alice_admin)

        pattern = AclBindingFilter(ResourceType.TOPIC, "pre", ResourcePatternType.PREFIXED, None, None,
                                   AclOperation.ANY, AclPermissionType.ANY)
        deleted = admin.delete_acls([pattern])[pattern].result(30)
        assert sorted(b.operation for b in deleted) == sorted([AclOperation.WRITE, AclOperation.DESCRIBE])
        # alice's producer knows the partitions' leaders: the Produce itself is refused now
        wait_until(lambda: error_code(deliver(alice, TOPIC)) == KafkaError.TOPIC_AUTHORIZATION_FAILED,
                   "alice to be refused once the ACL is gone", 15)
        assert weir_acls(cluster, properties, "--list", "--topic", "pre", "--resource-pattern-type", "any") == ""
        assert deliver(super_producer, TOPIC) is None
    finally:
        cluster.kill()
        print(cluster.output())


def alice_reads_once_granted(admin: AdminClient, alice_config: dict) -> None:
    """No READ on her group: GROUP_AUTHORIZATION_FAILED; granted (the AdminClient's create_acls), she reads."""
    def first_event(consumer):
        def next_event():
            message = consumer.poll(0.5)
            return message if message is not None and (message.error() is None or not message.error().retriable()) \
                else None
        try:
            return wait_until(next_event, "alice's consumer to hear from the cluster", 15)
        finally:
            consumer.close()

    def consumer():
        c = Consumer({**alice_config, "group.id": "alice-g", "auto.offset.reset": "earliest"})
        c.subscribe([TOPIC])
        return c

    refused = first_event(consumer())
    assert refused.error() is not None and refused.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    grants = [AclBinding(ResourceType.GROUP, "alice-g", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW),
              AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)]
    for future in admin.create_acls(grants).values():
        future.result(30)
    assert first_event(consumer()).error() is None


def authorized_operations_are_hers(admin: AdminClient, alice_admin: AdminClient) -> None:
    """Write and Describe by the prefixed ACL, Read by the literal one; Read (implying Describe) on
    her group; nothing on the cluster, which she may not describe; all seven cluster operations for admin."""
    def topic_operations(client):
        return set(client.describe_topics(TopicCollection([TOPIC]), include_authorized_operations=True)[TOPIC]
                   .result(30).authorized_operations)
    assert topic_operations(alice_admin) == {AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE}
    assert len(topic_operations(admin)) == 8
    group = alice_admin.describe_consumer_groups(["alice-g"], include_authorized_operations=True)["alice-g"]
    assert set(group.result(30).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    assert not alice_admin.describe_cluster(include_authorized_operations=True).result(30).authorized_operations
    assert AclOperation.CLUSTER_ACTION in admin.describe_cluster(include_authorized_operations=True).result(30)\
        .authorized_operations


def kafka_python_agrees(cluster, secure) -> None:
    """kafka-python sees the binding (DescribeAcls, as admin) and writes as alice."""
    from kafka import KafkaProducer
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                             ResourcePatternFilter)
    from kafka.admin import ResourceType as KafkaResourceType

    def config(user, password):
        return {"bootstrap_servers": cluster.bootstrap, "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": user, "sasl_plain_password": password,
                "ssl_cafile": str(secure.ca_path)}

    admin = KafkaAdminClient(**config("admin", secure.admin_password))
    try:
        acls, error = admin.describe_acls(ACLFilter(
            principal=None, host="*", operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(KafkaResourceType.TOPIC, "pre", ACLResourcePatternType.PREFIXED)))
        assert error is None or error.errno == 0, error
        assert sorted((a.principal, a.operation.name) for a in acls) == [("User:alice", "DESCRIBE"), ("User:alice", "WRITE")]
    finally:
        admin.close()
    producer = KafkaProducer(acks="all", **config("alice", "alice-secret"))
    try:
        producer.send(TOPIC, b"from kafka-python").get(timeout=15)
    finally:
        producer.close(timeout=5)

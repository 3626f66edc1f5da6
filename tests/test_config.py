import pytest

from weir.config.broker_config import BrokerConfig, read_properties
from weir.config.settings import ConfigError


def test_defaults_are_kafkas():
    config = BrokerConfig()
    assert config["num.partitions"] == 1
    assert config["log.segment.bytes"] == 1073741824
    assert config["log.retention.ms"] == 604800000
    assert config["message.max.bytes"] == 1048588
    assert config["socket.request.max.bytes"] == 104857600
    assert config["auto.create.topics.enable"] is True


def test_properties_file_then_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# a comment\nbroker.id=3\nlog.dirs = /var/lib/weir\nlisteners: PLAINTEXT://0.0.0.0:9093\n"
                    "num.partitions=\\\n  4\n")
    config = BrokerConfig.load(path, ["broker.id=5"])
    assert config["broker.id"] == 5
    assert config["log.dirs"] == "/var/lib/weir"
    assert config["num.partitions"] == 4
    assert config.listener == ("0.0.0.0", 9093)
    assert config.advertised == ("0.0.0.0", 9093)


def test_bad_settings_get_readable_errors():
    with pytest.raises(ConfigError, match="unknown broker setting 'log.dir.typo': not a Kafka broker config; "
                                          "did you mean 'log.dir'"):
        BrokerConfig({"log.dir.typo": "x"})
    with pytest.raises(ConfigError, match="num.partitions: expected an integer"):
        BrokerConfig({"num.partitions": "many"})
    with pytest.raises(ConfigError, match="listener OTHER has no security protocol"):
        BrokerConfig({"listeners": "OTHER://host:9093"})


def test_java_properties_syntax():
    assert read_properties("a=1\n! bang comment\nb : two words\nc\n") == {"a": "1", "b": "two words", "c": ""}


def test_named_listeners_as_kafka_reads_them():
    config = BrokerConfig({
        "listeners": "INTERNAL://0.0.0.0:9093,EXTERNAL://:9092",
        "advertised.listeners": "INTERNAL://broker-1:9093,EXTERNAL://public.example:9092",
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,EXTERNAL:SSL",
        "inter.broker.listener.name": "internal",
        "listener.name.internal.ssl.client.auth": "required"})
    assert [(l.name, l.protocol, l.host, l.port) for l in config.listeners] == [
        ("INTERNAL", "SASL_SSL", "0.0.0.0", 9093), ("EXTERNAL", "SSL", "0.0.0.0", 9092)]
    assert config.inter_broker_listener.endpoint() == "INTERNAL://broker-1:9093"
    assert config.for_listener("INTERNAL", "ssl.client.auth") == "required"
    assert config.for_listener("EXTERNAL", "ssl.client.auth") == "none"
    # the default map names each protocol after itself; one listener carries inter-broker traffic
    single = BrokerConfig({"listeners": "SASL_SSL://127.0.0.1:9092"})
    assert single.inter_broker_listener_name == "SASL_SSL" and single.listeners[0].uses_tls
    with pytest.raises(ConfigError, match="inter.broker.listener.name must be a listener name"):
        BrokerConfig({"listeners": "SSL://:9093,SASL_SSL://:9094"})
    with pytest.raises(ConfigError, match="not one of the listeners"):
        BrokerConfig({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "SSL://h:9093"})
    with pytest.raises(ConfigError, match="its own port"):
        BrokerConfig({"listeners": "PLAINTEXT://:9092,SSL://:9092", "security.inter.broker.protocol": "SSL"})


def test_every_kafka_broker_config_is_accepted_and_a_misspelt_one_is_refused_with_the_name_meant():
    config = BrokerConfig({"num.io.threads": "16", "background.threads": "5", "process.roles": "broker",
                           "replica.socket.timeout.ms": "30000", "sasl.jaas.config": "secret",
                           "log.cleaner.threads": "2", "listener.name.internal.ssl.client.auth": "required"})
    assert config.no_effect == {"num.io.threads": 16, "background.threads": 5, "process.roles": "broker",
                                "replica.socket.timeout.ms": 30000, "sasl.jaas.config": "secret",
                                "log.cleaner.threads": 2}
    assert config.listener_overrides == {"listener.name.internal.ssl.client.auth": "required"}
    with pytest.raises(ConfigError, match="Invalid value many for configuration num.io.threads: "
                                          "Not a number of type INT"):
        BrokerConfig({"num.io.threads": "many"})
    with pytest.raises(ConfigError, match="unknown broker setting 'num.netwrok.threads': not a Kafka broker "
                                          "config; did you mean 'num.network.threads'"):
        BrokerConfig({"num.netwrok.threads": "3"})
    with pytest.raises(ConfigError, match=r"unknown broker setting 'x.y.z': not a Kafka broker config$"):
        BrokerConfig({"x.y.z": "1"})


def test_retention_and_roll_times_in_hours_or_minutes_as_kafka_takes_them():
    assert BrokerConfig({"log.retention.hours": "1"})["log.retention.ms"] == 3_600_000
    assert BrokerConfig({"log.retention.hours": "1", "log.retention.minutes": "5"})["log.retention.ms"] == 300_000
    assert BrokerConfig({"log.retention.hours": "1", "log.retention.minutes": "5",
                         "log.retention.ms": "7000"})["log.retention.ms"] == 7000
    assert BrokerConfig({"log.retention.hours": "-1"})["log.retention.ms"] == -1  # unlimited
    assert BrokerConfig({"log.retention.hours": "168"}).is_static("log.retention.ms")
    assert not BrokerConfig().is_static("log.retention.ms")
    assert BrokerConfig()["log.retention.ms"] == 168 * 3_600_000  # Kafka's log.retention.hours=168
    rolled = BrokerConfig({"log.roll.hours": "2", "log.roll.jitter.hours": "1"})
    assert (rolled["log.roll.ms"], rolled["log.roll.jitter.ms"]) == (7_200_000, 3_600_000)
    assert BrokerConfig({"log.roll.hours": "2", "log.roll.ms": "1000"})["log.roll.ms"] == 1000
    with pytest.raises(ConfigError, match="log.roll.hours: 0 is not a legal log.roll.ms"):
        BrokerConfig({"log.roll.hours": "0"})


@pytest.mark.parametrize("name, value", [("zookeeper.ssl.client.enable", "true"), ("max.connections", "1000"),
                                         ("max.connections.per.ip", "0"),
                                         ("max.connections.per.ip.overrides", "127.0.0.1:10"),
                                         ("principal.builder.class", "com.example.Principals"),
                                         ("create.topic.policy.class.name", "com.example.Policy")])
def test_a_kafka_setting_that_would_protect_something_weir_cannot_is_refused_not_ignored(name, value):
    with pytest.raises(ConfigError, match=f"{name}={value}: Weir cannot do what this Kafka setting asks"):
        BrokerConfig({name: value})


def test_a_protective_kafka_setting_at_kafkas_default_is_accepted():
    config = BrokerConfig({"zookeeper.ssl.client.enable": "false", "max.connections": "2147483647",
                           "create.topic.policy.class.name": "",
                           "principal.builder.class":
                               "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"})
    assert set(config.no_effect) == {"zookeeper.ssl.client.enable", "max.connections", "create.topic.policy.class.name",
                                     "principal.builder.class"}


def test_log_dir_is_where_the_logs_go_when_log_dirs_is_not_set_as_in_kafka():
    assert BrokerConfig({"log.dir": "/data/kafka"})["log.dirs"] == "/data/kafka"
    assert BrokerConfig({"log.dirs": "/data/a", "log.dir": "/data/b"})["log.dirs"] == "/data/a"
    assert BrokerConfig({"log.dirs": " /data/a "})["log.dirs"] == "/data/a"


def test_more_than_one_log_directory_is_refused_not_made_into_one_odd_path():
    with pytest.raises(ConfigError, match="log.dirs=/data/a,/data/b: Weir keeps its logs in exactly one directory"):
        BrokerConfig({"log.dirs": "/data/a,/data/b"})

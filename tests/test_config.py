import pytest

from weir.config import BrokerConfig, ConfigError, read_properties


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
    with pytest.raises(ConfigError, match="unknown broker setting 'log.dir.typo'"):
        BrokerConfig({"log.dir.typo": "x"})
    with pytest.raises(ConfigError, match="num.partitions: expected an integer"):
        BrokerConfig({"num.partitions": "many"})
    with pytest.raises(ConfigError, match="expected PLAINTEXT"):
        BrokerConfig({"listeners": "SSL://host:9093"})


def test_java_properties_syntax():
    assert read_properties("a=1\n! bang comment\nb : two words\nc\n") == {"a": "1", "b": "two words", "c": ""}

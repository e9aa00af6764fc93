from kmirror.config import ServerConfig
from kmirror.config.topic import (
    TOPIC_CONFIG_DEFS,
    ConfigSource,
    topic_default,
    validate_topic_config,
    validate_topic_configs,
)


def test_topic_defaults_follow_broker_keys() -> None:
    cfg = ServerConfig.from_properties({"node.id": "1", "log.retention.hours": "1", "message.max.bytes": "2000"})
    assert topic_default(cfg, "retention.ms") == ("3600000", ConfigSource.STATIC_BROKER_CONFIG)
    assert topic_default(cfg, "max.message.bytes") == ("2000", ConfigSource.STATIC_BROKER_CONFIG)
    assert topic_default(cfg, "cleanup.policy") == ("delete", ConfigSource.DEFAULT_CONFIG)
    assert topic_default(cfg, "segment.ms") == ("604800000", ConfigSource.DEFAULT_CONFIG)
    assert topic_default(cfg, "mirror.name") == (None, ConfigSource.DEFAULT_CONFIG)


def test_every_topic_default_is_valid() -> None:
    cfg = ServerConfig.from_properties({"node.id": "1"})
    for name in TOPIC_CONFIG_DEFS:
        value, _ = topic_default(cfg, name)
        if value is not None:
            assert validate_topic_config(name, value) is None, name


def test_invalid_topic_configs() -> None:
    assert validate_topic_config("retention.ms", "soon") is not None
    assert validate_topic_config("cleanup.policy", "compact,delete") is None
    assert validate_topic_config("cleanup.policy", "shred") is not None
    assert validate_topic_config("segment.bytes", "10") is not None
    assert validate_topic_config("no.such.key", "1") == "Unknown topic config name: no.such.key"
    assert validate_topic_configs({"retention.ms": "1", "min.insync.replicas": "0"}) is not None
    assert validate_topic_configs({"retention.ms": "1", "compression.type": "zstd"}) is None

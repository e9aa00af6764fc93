import pytest

from kmirror.log.config import LONG_MAX, InvalidConfigError, LogConfig


def test_kafka_defaults():
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000
    assert c.retention_bytes == -1
    assert c.cleanup_policy == ("delete",)
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime"
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.compression_type == "producer"
    assert c.unclean_leader_election_enable is False
    assert c.min_insync_replicas == 1


def test_from_topic_config_parses_strings():
    c = LogConfig.from_topic_config({
        "segment.bytes": "1024", "retention.ms": "-1", "cleanup.policy": "compact,delete",
        "message.timestamp.type": "LogAppendTime", "unclean.leader.election.enable": "true",
        "some.other.layer.key": "x",
    })
    assert c.segment_bytes == 1024
    assert c.retention_ms == -1
    assert c.compact_enabled and c.delete_enabled
    assert c.log_append_time
    assert c.unclean_leader_election_enable


def test_round_trip_through_topic_config():
    c = LogConfig.from_topic_config({"segment.ms": "1000", "compression.type": "zstd"})
    assert LogConfig.from_topic_config(c.to_topic_config()) == c


@pytest.mark.parametrize("key,value", [
    ("segment.bytes", "lots"), ("message.timestamp.type", "Now"), ("cleanup.policy", "shred"),
    ("preallocate", "yes"), ("compression.type", "brotli"),
])
def test_invalid_values_name_the_key(key, value):
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        LogConfig.from_topic_config({key: value})


def test_an_empty_cleanup_policy_neither_deletes_nor_compacts() -> None:
    config = LogConfig.from_topic_config({"cleanup.policy": ""})
    assert config.cleanup_policy == ()
    assert not config.delete_enabled and not config.compact_enabled

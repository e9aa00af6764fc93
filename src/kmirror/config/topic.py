"""Topic-level configs (Kafka's `TopicConfig` / `LogConfig`), each tied to the broker key it
defaults from, so DescribeConfigs reports DYNAMIC_TOPIC_CONFIG / STATIC_BROKER_CONFIG /
DEFAULT_CONFIG like Kafka.

An effective topic config is: the topic's dynamic value if set, else the broker's value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from kmirror.config.broker_keys import (
    BROKER_CONFIG_DEFS,
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    TIMESTAMP_TYPES,
)
from kmirror.config.definitions import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigType,
    at_least,
    between,
    each_of,
    one_of,
)
from kmirror.config.mirror import MIRROR_TOPIC_CONFIG_DEFS

if TYPE_CHECKING:
    from kmirror.config.server import ServerConfig


class ConfigSource(IntEnum):
    """DescribeConfigs `config_source` (Kafka's DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    definition: ConfigDef
    synonyms: tuple[str, ...]
    """Broker keys the value defaults from, highest precedence first."""
    from_broker: Callable[[ServerConfig], str] | None = None
    """How the broker value is rendered (when it is not simply the first synonym's value)."""

    @property
    def name(self) -> str:
        return self.definition.name


INT, L, B, S, LI, D = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
    ConfigType.DOUBLE,
)

LIST_TYPE = ConfigType.LIST


def _throttled_replicas(value: Any) -> str | None:
    """Kafka's ThrottledReplicaListValidator: `*`, or `[partitionId]:[brokerId]` entries."""
    entries = [e.strip() for e in value]
    if entries == ["*"]:
        return None
    for e in entries:
        partition, sep, broker = e.partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            return ("must be the literal '*' or a list of replicas in the following format: "
                    "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return None


_TOPIC_DEFS = (
    TopicConfigDef(ConfigDef("cleanup.policy", LI, "delete", "delete and/or compact", each_of(*CLEANUP_POLICIES, allow_empty=True),
                             read_only=False), ("log.cleanup.policy",)),
    TopicConfigDef(ConfigDef("retention.ms", L, "604800000", "", at_least(-1), read_only=False),
                   ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
                   lambda s: str(s.log_retention_ms)),
    TopicConfigDef(ConfigDef("retention.bytes", L, "-1", "", None, read_only=False), ("log.retention.bytes",)),
    TopicConfigDef(ConfigDef("segment.bytes", INT, "1073741824", "", at_least(14), read_only=False),
                   ("log.segment.bytes",)),
    TopicConfigDef(ConfigDef("segment.ms", L, "604800000", "", at_least(1), read_only=False),
                   ("log.roll.ms", "log.roll.hours"), lambda s: str(s.log_roll_ms)),
    TopicConfigDef(ConfigDef("segment.jitter.ms", L, "0", "", at_least(0), read_only=False),
                   ("log.roll.jitter.ms", "log.roll.jitter.hours"), lambda s: str(s.log_roll_jitter_ms)),
    TopicConfigDef(ConfigDef("segment.index.bytes", INT, "10485760", "", at_least(4), read_only=False),
                   ("log.index.size.max.bytes",)),
    TopicConfigDef(ConfigDef("max.message.bytes", INT, "1048588", "", at_least(0), read_only=False),
                   ("message.max.bytes",)),
    TopicConfigDef(ConfigDef("min.insync.replicas", INT, "1", "", at_least(1), read_only=False),
                   ("min.insync.replicas",)),
    TopicConfigDef(ConfigDef("message.timestamp.type", S, "CreateTime", "", one_of(*TIMESTAMP_TYPES),
                             read_only=False), ("log.message.timestamp.type",)),
    TopicConfigDef(ConfigDef("message.timestamp.before.max.ms", L, str(LONG_MAX), "", at_least(0), read_only=False),
                   ("log.message.timestamp.before.max.ms",)),
    TopicConfigDef(ConfigDef("message.timestamp.after.max.ms", L, "3600000", "", at_least(0), read_only=False),
                   ("log.message.timestamp.after.max.ms",)),
    TopicConfigDef(ConfigDef("compression.type", S, "producer", "", one_of(*COMPRESSION_TYPES), read_only=False),
                   ("compression.type",)),
    TopicConfigDef(ConfigDef("unclean.leader.election.enable", B, "false", "", None, read_only=False),
                   ("unclean.leader.election.enable",)),
    TopicConfigDef(ConfigDef("flush.messages", L, str(LONG_MAX), "", at_least(1), read_only=False),
                   ("log.flush.interval.messages",)),
    TopicConfigDef(ConfigDef("flush.ms", L, str(LONG_MAX), "", at_least(0), read_only=False),
                   ("log.flush.interval.ms",), lambda s: str(s.log_flush_interval_ms)),
    TopicConfigDef(ConfigDef("index.interval.bytes", INT, "4096", "", at_least(0), read_only=False),
                   ("log.index.interval.bytes",)),
    TopicConfigDef(ConfigDef("file.delete.delay.ms", L, "60000", "", at_least(0), read_only=False),
                   ("log.segment.delete.delay.ms",)),
    TopicConfigDef(ConfigDef("delete.retention.ms", L, "86400000", "", at_least(0), read_only=False),
                   ("log.cleaner.delete.retention.ms",)),
    TopicConfigDef(ConfigDef("min.compaction.lag.ms", L, "0", "", at_least(0), read_only=False),
                   ("log.cleaner.min.compaction.lag.ms",)),
    TopicConfigDef(ConfigDef("max.compaction.lag.ms", L, str(LONG_MAX), "", at_least(1), read_only=False),
                   ("log.cleaner.max.compaction.lag.ms",)),
    TopicConfigDef(ConfigDef("min.cleanable.dirty.ratio", D, "0.5", "", between(0, 1), read_only=False),
                   ("log.cleaner.min.cleanable.ratio",)),
    TopicConfigDef(ConfigDef("preallocate", B, "false", "", None, read_only=False), ("log.preallocate",)),
    TopicConfigDef(ConfigDef("local.retention.ms", L, "-2", "", at_least(-2), read_only=False),
                   ("log.local.retention.ms",)),
    TopicConfigDef(ConfigDef("local.retention.bytes", L, "-2", "", at_least(-2), read_only=False),
                   ("log.local.retention.bytes",)),
    # Throttled replica movement (kafka-reassign-partitions.sh --throttle): `partition:broker` or `*`.
    TopicConfigDef(ConfigDef("leader.replication.throttled.replicas", LIST_TYPE, "", "", _throttled_replicas,
                             read_only=False), ()),
    TopicConfigDef(ConfigDef("follower.replication.throttled.replicas", LIST_TYPE, "", "", _throttled_replicas,
                             read_only=False), ()),
    # KIP-1279 mirror topic configs: mirror.name (membership, hidden from DescribeConfigs),
    # mirror.support.unclean.leader.election, mirror.replication.throttled.replicas.
    *(TopicConfigDef(replace(d, read_only=False), ()) for d in MIRROR_TOPIC_CONFIG_DEFS),
)

TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {d.name: d for d in _TOPIC_DEFS}


def validate_topic_config(name: str, value: str | None) -> str | None:
    """None when `name=value` is a valid topic config, else a one-line reason (-> INVALID_CONFIG 40)."""
    d = TOPIC_CONFIG_DEFS.get(name)
    if d is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return f"Null value not supported for topic config {name}"
    try:
        d.definition.parse(value)
    except ConfigError as e:
        return str(e)
    return None


def validate_topic_configs(configs: Mapping[str, str | None]) -> str | None:
    for name, value in configs.items():
        reason = validate_topic_config(name, value)
        if reason is not None:
            return reason
    return None


def broker_value_string(server: ServerConfig, key: str) -> str | None:
    """The string form of a broker key as the node runs with it (raw if set, else default)."""
    if key in server.raw:
        return server.raw[key].strip()
    d = BROKER_CONFIG_DEFS.get(key)
    return None if d is None else d.default


def topic_default(server: ServerConfig, name: str) -> tuple[str | None, ConfigSource]:
    """What `name` is for a topic without a dynamic override, and where that comes from."""
    d = TOPIC_CONFIG_DEFS[name]
    if not d.synonyms:
        return d.definition.default, ConfigSource.DEFAULT_CONFIG
    if d.from_broker is not None:
        value: str | None = d.from_broker(server)
    else:
        value = broker_value_string(server, d.synonyms[0])
    source = ConfigSource.STATIC_BROKER_CONFIG if any(server.is_set(k) for k in d.synonyms) else ConfigSource.DEFAULT_CONFIG
    return value, source


def typed_topic_config(config: Mapping[str, str]) -> dict[str, Any]:
    """Typed values for an effective topic config (e.g. for LogConfig)."""
    return {k: TOPIC_CONFIG_DEFS[k].definition.parse(v) for k, v in config.items() if k in TOPIC_CONFIG_DEFS}

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
    DescribedValidator,
    Validator,
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


def _topic(name: str, kind: ConfigType, default: str, doc: str, validator: Validator | None,
           synonyms: tuple[str, ...], from_broker: Callable[[ServerConfig], str] | None = None) -> TopicConfigDef:
    return TopicConfigDef(ConfigDef(name, kind, default, doc, validator, read_only=False), synonyms, from_broker)


_THROTTLED_REPLICAS = DescribedValidator(_throttled_replicas, "[partitionId]:[brokerId],[partitionId]:[brokerId],... or *")

_TOPIC_DEFS = (
    _topic("cleanup.policy", LI, "delete",
           "delete (retention removes old segments), compact (the cleaner keeps the latest record per key), "
           "both, or neither (empty list).", each_of(*CLEANUP_POLICIES, allow_empty=True), ("log.cleanup.policy",)),
    _topic("retention.ms", L, "604800000", "Delete a segment once its newest record is this old (-1: never).",
           at_least(-1), ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
           lambda s: str(s.log_retention_ms)),
    _topic("retention.bytes", L, "-1", "Delete the oldest segments while the partition is larger (-1: never).",
           None, ("log.retention.bytes",)),
    _topic("segment.bytes", INT, "1073741824", "Roll the active segment when an append would make it larger.",
           at_least(14), ("log.segment.bytes",)),
    _topic("segment.ms", L, "604800000", "Roll the active segment on the next append once it is this old.",
           at_least(1), ("log.roll.ms", "log.roll.hours"), lambda s: str(s.log_roll_ms)),
    _topic("segment.jitter.ms", L, "0",
           "Roll segments this much before segment.ms (Kafka: a random amount below it per segment; kmirror: "
           "the whole amount).", at_least(0), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
           lambda s: str(s.log_roll_jitter_ms)),
    _topic("segment.index.bytes", INT, "10485760",
           "Largest size of a segment's offset and time index; a full index rolls the segment.", at_least(4),
           ("log.index.size.max.bytes",)),
    _topic("max.message.bytes", INT, "1048588", "Largest record batch (as sent, compressed) the topic accepts.",
           at_least(0), ("message.max.bytes",)),
    _topic("min.insync.replicas", INT, "1",
           "Fewest in-sync replicas with which an acks=all produce succeeds (NOT_ENOUGH_REPLICAS below it).",
           at_least(1), ("min.insync.replicas",)),
    _topic("message.timestamp.type", S, "CreateTime",
           "CreateTime (the producer's timestamp) or LogAppendTime (the broker's clock at append).",
           one_of(*TIMESTAMP_TYPES), ("log.message.timestamp.type",)),
    _topic("message.timestamp.before.max.ms", L, str(LONG_MAX),
           "How far a CreateTime timestamp may lag the broker's clock (INVALID_TIMESTAMP past it).", at_least(0),
           ("log.message.timestamp.before.max.ms",)),
    _topic("message.timestamp.after.max.ms", L, "3600000",
           "How far a CreateTime timestamp may lead the broker's clock (INVALID_TIMESTAMP past it).", at_least(0),
           ("log.message.timestamp.after.max.ms",)),
    _topic("compression.type", S, "producer", "Compression of stored batches; producer keeps the producer's.",
           one_of(*COMPRESSION_TYPES), ("compression.type",)),
    _topic("unclean.leader.election.enable", B, "false",
           "Allow a replica outside the ISR to become leader when no ISR member is alive (data loss).", None,
           ("unclean.leader.election.enable",)),
    _topic("flush.messages", L, str(LONG_MAX), "fsync the log after this many messages.", at_least(1),
           ("log.flush.interval.messages",)),
    _topic("flush.ms", L, str(LONG_MAX), "fsync the log once this long has passed since its last flush.",
           at_least(0), ("log.flush.interval.ms",), lambda s: str(s.log_flush_interval_ms)),
    _topic("index.interval.bytes", INT, "4096", "Bytes of records between two offset index entries.", at_least(0),
           ("log.index.interval.bytes",)),
    _topic("file.delete.delay.ms", L, "60000",
           "Delay before deleting the segment files the cleaner replaced (retention deletes at once; Kafka "
           "delays both).", at_least(0), ("log.segment.delete.delay.ms",)),
    _topic("delete.retention.ms", L, "86400000",
           "How long tombstones and markers of empty transactions stay after their first cleaning.", at_least(0),
           ("log.cleaner.delete.retention.ms",)),
    _topic("min.compaction.lag.ms", L, "0", "A record stays uncompacted at least this long.", at_least(0),
           ("log.cleaner.min.compaction.lag.ms",)),
    _topic("max.compaction.lag.ms", L, str(LONG_MAX), "A record is compacted within this long, whatever the ratio.",
           at_least(1), ("log.cleaner.max.compaction.lag.ms",)),
    _topic("min.cleanable.dirty.ratio", D, "0.5", "Clean the log once this share of it is dirty (not yet cleaned).",
           between(0, 1), ("log.cleaner.min.cleanable.ratio",)),
    _topic("preallocate", B, "false", "Accepted, ignored (segment files are not preallocated).", None,
           ("log.preallocate",)),
    _topic("local.retention.ms", L, "-2", "Accepted, ignored (no tiered storage).", at_least(-2),
           ("log.local.retention.ms",)),
    _topic("local.retention.bytes", L, "-2", "Accepted, ignored (no tiered storage).", at_least(-2),
           ("log.local.retention.bytes",)),
    # Throttled replica movement (kafka-reassign-partitions.sh --throttle).
    _topic("leader.replication.throttled.replicas", LIST_TYPE, "",
           "Replicas the leader serves, while out of sync, within leader.replication.throttled.rate.",
           _THROTTLED_REPLICAS, ()),
    _topic("follower.replication.throttled.replicas", LIST_TYPE, "",
           "Replicas that fetch, while out of sync, within their broker's follower.replication.throttled.rate.",
           _THROTTLED_REPLICAS, ()),
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

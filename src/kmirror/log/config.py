"""Topic-level log configuration: Kafka's keys, defaults and string values (`LogConfig`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from kmirror.config.topic import TOPIC_CONFIG_DEFS, topic_default

LONG_MAX = 2**63 - 1
MiB = 1024 * 1024
DAY_MS = 24 * 60 * 60 * 1000


class InvalidConfigError(ValueError):
    """A topic config value that does not parse (Kafka's INVALID_CONFIG, error 40)."""


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Kafka's topic config defaults (`TopicConfig` / `LogConfig`).

    flush.messages and flush.ms default to Long.MAX_VALUE: like Kafka we rely on the page
    cache (a killed process loses nothing written) and on replication, not on fsync.
    """

    segment_bytes: int = 1024 * MiB
    segment_ms: int = 7 * DAY_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * MiB
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * DAY_MS
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60_000
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    unclean_leader_election_enable: bool = False
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = DAY_MS
    min_cleanable_dirty_ratio: float = 0.5
    preallocate: bool = False

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_topic_config(cls, config: Mapping[str, str], defaults: LogConfig | None = None) -> LogConfig:
        """Build from Kafka config keys with string values; unknown keys are ignored (they
        belong to other layers), bad values raise `InvalidConfigError` naming the key."""
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        for key, value in config.items():
            attr = _KEYS.get(key)
            if attr is None or value is None:
                continue
            changes[attr] = _parse(key, attr, value)
        if not changes:
            return base
        values = {f.name: getattr(base, f.name) for f in fields(cls)}
        values.update(changes)
        return cls(**values)

    @classmethod
    def from_server_config(cls, server_config: Any) -> LogConfig:
        """Topic defaults as a broker runs with them (`log.segment.bytes` -> segment.bytes...),
        resolved by `kmirror.config.topic.topic_default`."""
        values: dict[str, str] = {}
        for name in TOPIC_CONFIG_DEFS:
            value, _ = topic_default(server_config, name)
            if value is not None and name in _KEYS:
                values[name] = value
        return cls.from_topic_config(values)

    def to_topic_config(self) -> dict[str, str]:
        """Kafka keys with string values (DescribeConfigs shape)."""
        out: dict[str, str] = {}
        for key, attr in _KEYS.items():
            value = getattr(self, attr)
            if isinstance(value, bool):
                out[key] = "true" if value else "false"
            elif isinstance(value, tuple):
                out[key] = ",".join(value)
            else:
                out[key] = str(value)
        return out


_KEYS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "cleanup.policy": "cleanup_policy",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "min.insync.replicas": "min_insync_replicas",
    "compression.type": "compression_type",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "delete.retention.ms": "delete_retention_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "preallocate": "preallocate",
}
TOPIC_CONFIG_KEYS = frozenset(_KEYS)

_CHOICES: dict[str, frozenset[str]] = {
    "message.timestamp.type": frozenset({"CreateTime", "LogAppendTime"}),
    "compression.type": frozenset({"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}),
}
_CLEANUP_POLICIES = frozenset({"delete", "compact"})


def _parse(key: str, attr: str, value: str) -> Any:
    default = getattr(LogConfig(), attr)
    text = value.strip()
    try:
        if isinstance(default, bool):
            lowered = text.lower()
            if lowered not in ("true", "false"):
                raise ValueError(text)
            return lowered == "true"
        if isinstance(default, tuple):
            policies = tuple(p.strip() for p in text.split(",") if p.strip())
            if not set(policies) <= _CLEANUP_POLICIES:
                raise ValueError(text)
            return policies
        if isinstance(default, float):
            return float(text)
        if isinstance(default, int):
            number = int(text)
            if not -(2**63) <= number <= LONG_MAX:
                raise ValueError(text)
            return number
        if key in _CHOICES and text not in _CHOICES[key]:
            raise ValueError(text)
        return text
    except ValueError:
        raise InvalidConfigError(f"Invalid value {value!r} for configuration {key}") from None

"""The group coordinator's settings, named as Kafka's broker configs."""

from __future__ import annotations

from dataclasses import dataclass

FieldValue = int | str | tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104_857_600
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    # Kafka `GroupCoordinatorConfig.CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS`.
    new_member_join_timeout_ms: int = 300_000
    # KIP-848 consumer groups (Kafka `GroupCoordinatorConfig`).
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = 2**31 - 1
    # the first is the default of members that name no ServerAssignor
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    group_consumer_migration_policy: str = "bidirectional"
    # KIP-932 share groups (Kafka `ShareGroupConfig`).
    group_share_session_timeout_ms: int = 45_000
    group_share_heartbeat_interval_ms: int = 5_000
    group_share_max_size: int = 200

    @property
    def offsets_retention_ms(self) -> int:
        """Kafka `GroupCoordinatorConfig.offsetsRetentionMs`: `offsets.retention.minutes` in ms."""
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_server_config(cls, config: object) -> CoordinatorConfig:
        """From ServerConfig: an attribute of the same name, else the Kafka key through
        `config.get`, else Kafka's default."""
        values: dict[str, FieldValue] = {}
        for name in cls.__dataclass_fields__:
            if hasattr(config, name):
                values[name] = _typed(name, getattr(config, name))
                continue
            getter = getattr(config, "get", None)
            if getter is not None:
                try:
                    values[name] = _typed(name, getter(name.replace("_", ".")))
                except (KeyError, TypeError, ValueError):
                    pass
        return cls(**values)  # type: ignore[arg-type]  # _typed converts each to its field's type


def _typed(name: str, value: object) -> FieldValue:
    if name == "group_consumer_assignors":
        items = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else []
        return tuple(str(v).strip() for v in items if str(v).strip())
    if name == "group_consumer_migration_policy":
        return str(value)
    return int(str(value))

"""The group coordinator's settings, named as Kafka's broker configs."""

from __future__ import annotations

from dataclasses import dataclass


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
    offset_metadata_max_bytes: int = 4096
    # Kafka `GroupCoordinatorConfig.CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS`.
    new_member_join_timeout_ms: int = 300_000

    @classmethod
    def from_server_config(cls, config: object) -> CoordinatorConfig:
        """From ServerConfig: an attribute of the same name, else the Kafka key through
        `config.get`, else Kafka's default."""
        values: dict[str, int] = {}
        for name in cls.__dataclass_fields__:
            if hasattr(config, name):
                values[name] = int(getattr(config, name))
                continue
            getter = getattr(config, "get", None)
            if getter is not None:
                try:
                    values[name] = int(getter(name.replace("_", ".")))
                except (KeyError, TypeError, ValueError):
                    pass
        return cls(**values)

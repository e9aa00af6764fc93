"""GROUP resource configs (ConfigResource type 32, KIP-848 and KIP-932): Kafka 4.0's
`GroupConfig` keys, their defaults (the broker's `group.consumer.*` / `group.share.*`
defaults) and its validation, bounds included.

kmirror stores and describes them; `consumer.session.timeout.ms` and
`consumer.heartbeat.interval.ms` apply to KIP-848 consumer groups, the `share.*` keys to
KIP-932 share groups, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping

from kmirror.config.definitions import ConfigDef, ConfigError, ConfigType, at_least, one_of

_INT = ConfigType.INT

GROUP_CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in (
    ConfigDef("consumer.session.timeout.ms", _INT, "45000",
              "The timeout to detect client failures when using the consumer group protocol.", at_least(1),
              read_only=False),
    ConfigDef("consumer.heartbeat.interval.ms", _INT, "5000",
              "The heartbeat interval given to the members of a consumer group.", at_least(1), read_only=False),
    ConfigDef("share.session.timeout.ms", _INT, "45000",
              "The timeout to detect client failures when using the share group protocol.", at_least(1),
              read_only=False),
    ConfigDef("share.heartbeat.interval.ms", _INT, "5000",
              "The heartbeat interval given to the members of a share group.", at_least(1), read_only=False),
    ConfigDef("share.record.lock.duration.ms", _INT, "30000",
              "The record acquisition lock duration in milliseconds for share groups.", at_least(1000),
              read_only=False),
    ConfigDef("share.auto.offset.reset", ConfigType.STRING, "latest",
              "The strategy to initialize the share-partition start offset.", one_of("latest", "earliest"),
              read_only=False),
    ConfigDef("share.isolation.level", ConfigType.STRING, "read_uncommitted",
              "Which records a share group reads: read_committed skips aborted transactional records.",
              one_of("read_committed", "read_uncommitted"), read_only=False),
)}

# Kafka's broker bounds (GroupCoordinatorConfig / ShareGroupConfig): name -> (min key, max key).
# The consumer ones are broker keys (`group.consumer.min.session.timeout.ms`...), read from the
# controller's configuration; the share ones are not broker keys here and keep Kafka's defaults.
GROUP_CONFIG_BOUNDS: dict[str, tuple[str, str]] = {
    "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms",
                                       "group.consumer.max.heartbeat.interval.ms"),
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms",
                                      "group.share.max.record.lock.duration.ms"),
}
DEFAULT_BOUNDS: dict[str, int] = {
    "group.consumer.min.heartbeat.interval.ms": 5000, "group.consumer.max.heartbeat.interval.ms": 15000,
    "group.consumer.min.session.timeout.ms": 45000, "group.consumer.max.session.timeout.ms": 60000,
    "group.share.min.heartbeat.interval.ms": 5000, "group.share.max.heartbeat.interval.ms": 15000,
    "group.share.min.session.timeout.ms": 45000, "group.share.max.session.timeout.ms": 60000,
    "group.share.min.record.lock.duration.ms": 15000, "group.share.max.record.lock.duration.ms": 60000,
}


def validate_group_configs(configs: Mapping[str, str], bounds: Mapping[str, int] = DEFAULT_BOUNDS) -> str | None:
    """Why a group's configs (its overrides after the change) are invalid, or None (Kafka's
    `GroupConfig.validate`: names, then typed values over the defaults, then the bounds, by
    bound key; a key `bounds` lacks keeps Kafka's default)."""
    for name in configs:
        if name not in GROUP_CONFIG_DEFS:
            return f"Unknown group config name: {name}"
    values: dict[str, object] = {}
    try:
        for name, d in GROUP_CONFIG_DEFS.items():
            values[name] = d.parse(configs.get(name, d.default))
    except ConfigError as error:
        return str(error)
    for name, (low_key, high_key) in GROUP_CONFIG_BOUNDS.items():
        low, high = bounds.get(low_key, DEFAULT_BOUNDS[low_key]), bounds.get(high_key, DEFAULT_BOUNDS[high_key])
        value = values[name]
        assert isinstance(value, int)
        if value < low:
            return f"{name} must be greater than or equal to {low_key}"
        if value > high:
            return f"{name} must be less than or equal to {high_key}"
    for kind in ("consumer", "share"):
        session, heartbeat = values[f"{kind}.session.timeout.ms"], values[f"{kind}.heartbeat.interval.ms"]
        assert isinstance(session, int) and isinstance(heartbeat, int)
        if session <= heartbeat:
            return f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms"
    return None

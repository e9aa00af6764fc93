"""The mirror fetchers' replication throttle, fed from the broker config and the image.

`mirror.replication.throttled.rate` is the broker config (a dynamic broker config of this
broker or of the cluster default, when set, wins over `server.properties`, as Kafka's dynamic
`follower.replication.throttled.rate`); `mirror.replication.throttled.replicas` is read from
every mirror topic's configs. See `kmirror.replication.replication_quota`.
"""

from __future__ import annotations

from typing import Any

from kmirror.config.mirror import REPLICATION_THROTTLED_REPLICAS
from kmirror.metadata.image import ConfigResource, ConfigResourceType, MetadataImage
from kmirror.ports import Clock
from kmirror.replication.replication_quota import UNLIMITED, ReplicationQuotaManager
from kmirror.replication.sampled_rate import QuotaWindow

RATE = "mirror.replication.throttled.rate"


def mirror_replication_quota(broker_id: int, config: Any, clock: Clock) -> ReplicationQuotaManager:
    if config is None:
        return ReplicationQuotaManager(broker_id, QuotaWindow(), UNLIMITED, clock.monotonic_ms())
    window = QuotaWindow(int(config.get("replication.quota.window.num")),
                         int(config.get("replication.quota.window.size.seconds")) * 1000)
    return ReplicationQuotaManager(broker_id, window, int(config.get(RATE)), clock.monotonic_ms())


def update_mirror_replication_quota(quota: ReplicationQuotaManager, image: MetadataImage, static_rate: int) -> None:
    rate = static_rate
    for name in ("", str(quota.broker_id)):  # the cluster default, then this broker's own value
        value = image.configs.get(ConfigResource(ConfigResourceType.BROKER, name), {}).get(RATE)
        if value is not None and value.strip().isdigit():
            rate = int(value)
    quota.set_rate(rate)
    entries = {}
    for resource, values in image.configs.items():
        if resource.type == ConfigResourceType.TOPIC and values.get(REPLICATION_THROTTLED_REPLICAS):
            entries[resource.name] = values[REPLICATION_THROTTLED_REPLICAS].split(",")
    quota.update_throttled_replicas(entries)

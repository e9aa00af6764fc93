"""The mirror fetchers' replication throttle, fed from the broker config and the image.

`mirror.replication.throttled.rate` is the broker config (a dynamic broker config of this
broker or of the cluster default, when set, wins over `server.properties`, as Kafka's dynamic
`follower.replication.throttled.rate`); `mirror.replication.throttled.replicas` is read from
every mirror topic's configs. See `kmirror.replication.replication_quota`.
"""

from __future__ import annotations

from kmirror.config.mirror import REPLICATION_THROTTLED_REPLICAS
from kmirror.config.server import ServerConfig
from kmirror.metadata.image import MetadataImage
from kmirror.ports import Clock
from kmirror.replication.replication_quota import UNLIMITED, ReplicationQuotaManager
from kmirror.replication.replication_throttles import quota_window, update_replication_quota

RATE = "mirror.replication.throttled.rate"


def mirror_replication_quota(broker_id: int, config: ServerConfig | None, clock: Clock) -> ReplicationQuotaManager:
    if config is None:
        return ReplicationQuotaManager(broker_id, quota_window(None), UNLIMITED, clock.monotonic_ms())
    return ReplicationQuotaManager(broker_id, quota_window(config), int(config.get(RATE)), clock.monotonic_ms())


def update_mirror_replication_quota(quota: ReplicationQuotaManager, image: MetadataImage, static_rate: int) -> None:
    update_replication_quota(quota, image, RATE, REPLICATION_THROTTLED_REPLICAS, static_rate)

"""Throttled replica movement (Kafka's `ReplicationQuotaManager` for LeaderReplication and
FollowerReplication, as kafka-reassign-partitions.sh sets it up).

- `leader.replication.throttled.rate` / `follower.replication.throttled.rate`: dynamic broker
  configs (this broker's value, else the cluster default `<default>`), bytes/s; unset: no limit.
- `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`: topic
  configs listing `partition:broker` (or `*`); the broker is the one throttled.
- On a leader, a follower Fetch gets no data for a throttled partition while the leader's
  throttled byte rate is above its rate and the follower is not in the ISR; on a follower,
  throttled partitions not in sync are left out of its Fetch while its rate is above its rate
  (Kafka `shouldLeaderThrottle` / `shouldFollowerThrottle`). In-sync replicas are never held
  back, so a throttle cannot stall acks=all producers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from kmirror.client.sampled_rate import QuotaWindow
from kmirror.metadata.image import ConfigResource, ConfigResourceType, MetadataImage
from kmirror.ports import Clock
from kmirror.replication.replication_quota import UNLIMITED, ReplicationQuotaManager
from kmirror.types import TopicPartition


class BrokerConfigView(Protocol):
    def get(self, key: str) -> object: ...

LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"

def quota_window(config: BrokerConfigView | None) -> QuotaWindow:
    if config is None:
        return QuotaWindow()
    return QuotaWindow(int(str(config.get("replication.quota.window.num"))),
                       int(str(config.get("replication.quota.window.size.seconds"))) * 1000)

def broker_rate(image: MetadataImage, broker_id: int, key: str, static_rate: int) -> int:
    """The dynamic value of `key` for `broker_id` (its own, else the cluster default), else `static_rate`."""
    rate = static_rate
    for name in ("", str(broker_id)):  # the cluster default, then this broker's own value
        value = image.configs.get(ConfigResource(ConfigResourceType.BROKER, name), {}).get(key)
        if value is not None and value.strip().isdigit():
            rate = int(value)
    return rate

def throttled_replica_entries(image: MetadataImage, key: str) -> Mapping[str, list[str]]:
    """topic -> the entries of its `key` topic config (topics without one are left out)."""
    out: dict[str, list[str]] = {}
    for resource, values in image.configs.items():
        if resource.type == ConfigResourceType.TOPIC and values.get(key):
            out[resource.name] = values[key].split(",")
    return out

def update_replication_quota(
    quota: ReplicationQuotaManager, image: MetadataImage, rate_key: str, replicas_key: str, static_rate: int
) -> None:
    quota.set_rate(broker_rate(image, quota.broker_id, rate_key, static_rate))
    quota.update_throttled_replicas(throttled_replica_entries(image, replicas_key))

class ReplicationThrottles:
    """The leader and follower replication quotas of one broker, following the image."""

    def __init__(self, broker_id: int, config: BrokerConfigView | None, clock: Clock) -> None:
        window = quota_window(config)
        now_ms = clock.monotonic_ms()
        self.leader = ReplicationQuotaManager(broker_id, window, UNLIMITED, now_ms)
        self.follower = ReplicationQuotaManager(broker_id, window, UNLIMITED, now_ms)

    def on_image(self, image: MetadataImage) -> None:
        update_replication_quota(self.leader, image, LEADER_THROTTLED_RATE, LEADER_THROTTLED_REPLICAS, UNLIMITED)
        update_replication_quota(self.follower, image, FOLLOWER_THROTTLED_RATE, FOLLOWER_THROTTLED_REPLICAS, UNLIMITED)

class FollowerThrottle:
    """The follower quota as the fetch engine asks it (Kafka `shouldFollowerThrottle`): only
    replicas that are not in the ISR are held back."""

    def __init__(self, quota: ReplicationQuotaManager, in_sync: Callable[[TopicPartition], bool]) -> None:
        self.quota = quota
        self._in_sync = in_sync

    def is_throttled(self, tp: TopicPartition) -> bool:
        return self.quota.is_throttled(tp) and not self._in_sync(tp)

    def is_quota_exceeded(self, now_ms: int) -> bool:
        return self.quota.is_quota_exceeded(now_ms)

    def record(self, value: int, now_ms: int) -> None:
        self.quota.record(value, now_ms)

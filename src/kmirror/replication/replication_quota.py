"""A replication throttle (Kafka's ReplicationQuotaManager): the leader and follower throttles
of replica movement (`replication_throttles`), and, as KIP-1279 applies it to mirror fetchers,
the mirror throttle: `mirror.replication.throttled.rate` bounds the bytes/s this broker's mirror
fetchers take for the throttled replicas named by the destination topic config
`mirror.replication.throttled.replicas` (`[PartitionId]:[BrokerId]` entries, or `*`: every
replica; the broker is the destination broker leading the mirror partition).

As Kafka's follower throttle: a throttled partition is left out of a Fetch while the rate of
the bytes fetched for throttled partitions, over `replication.quota.window.num` windows of
`replication.quota.window.size.seconds`, is above the rate; the bytes a Fetch brings for
throttled partitions are recorded after it. One Fetch may overshoot by its size; over the
quota window the rate holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from kmirror.client.sampled_rate import QuotaWindow, SampledRate
from kmirror.types import TopicPartition

UNLIMITED = 2**63 - 1


class ReplicaQuota(Protocol):
    """What a fetch engine asks of a replication throttle (Kafka's ReplicaQuota)."""

    def is_throttled(self, tp: TopicPartition) -> bool: ...

    def is_quota_exceeded(self, now_ms: int) -> bool: ...

    def record(self, value: int, now_ms: int) -> None: ...


def throttled_partitions(entries: Iterable[str], broker_id: int) -> frozenset[int] | None:
    """The partitions `entries` throttle on `broker_id`; None: all of them (`*`)."""
    partitions: set[int] = set()
    for entry in entries:
        entry = entry.strip().strip("[]").strip()  # the KIP writes `[0:4]`, Kafka `0:4`
        if entry == "*":
            return None
        partition, sep, broker = entry.partition(":")
        if sep and partition.strip().isdigit() and broker.strip().lstrip("-").isdigit() \
                and int(broker) == broker_id:
            partitions.add(int(partition))
    return frozenset(partitions)


class ReplicationQuotaManager:
    def __init__(self, broker_id: int, window: QuotaWindow, rate: int, now_ms: int) -> None:
        self.broker_id = broker_id
        self.rate = rate
        self._sensor = SampledRate(window, now_ms)
        self._throttled: dict[str, frozenset[int] | None] = {}
        self.throttled_bytes_total = 0
        """Bytes recorded for throttled replicas (the `ByteRate` meter follows it)."""
        self.throttled_fetches_total = 0
        """Fetch rounds in which throttled partitions were left out (the throttle metric)."""

    def update_throttled_replicas(self, topic_entries: Mapping[str, Iterable[str]]) -> None:
        """topic -> its throttled replicas config entries (topics without any are omitted)."""
        self._throttled = {t: throttled_partitions(e, self.broker_id) for t, e in topic_entries.items()}

    def set_rate(self, rate: int) -> None:
        self.rate = rate

    def is_throttled(self, tp: TopicPartition) -> bool:
        if self.rate >= UNLIMITED or tp.topic not in self._throttled:
            return False
        partitions = self._throttled[tp.topic]
        return partitions is None or tp.partition in partitions

    def is_quota_exceeded(self, now_ms: int) -> bool:
        exceeded = self._sensor.measure(now_ms) > self.rate
        if exceeded:
            self.throttled_fetches_total += 1
        return exceeded

    def record(self, value: int, now_ms: int) -> None:
        self._sensor.record(value, now_ms)
        self.throttled_bytes_total += value

    def byte_rate(self, now_ms: int) -> float:
        return self._sensor.measure(now_ms)

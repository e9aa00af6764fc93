"""Replication gauges as pure functions of a `MetadataImage`.

Controller gauges (Kafka `ControllerMetricsChanges` / `QuorumControllerMetrics`):
- OfflinePartitionsCount: partitions without a leader (leader == -1);
- GlobalTopicCount, GlobalPartitionCount;
- FencedBrokerCount, ActiveBrokerCount (registered and unfenced);
- PreferredReplicaImbalanceCount: partitions whose leader is not the first replica.

Broker gauges for the partitions a broker leads (Kafka `ReplicaManager`), read from the image's
ISR. They are the fallback when the replica manager does not report its own view:
- UnderReplicatedPartitions: ISR smaller than the replica set;
- UnderMinIsrPartitionCount: ISR smaller than the topic's `min.insync.replicas`;
- AtMinIsrPartitionCount: ISR exactly `min.insync.replicas`;
- LeaderCount, PartitionCount: partitions the broker leads / hosts a replica of.
"""

from __future__ import annotations

from collections.abc import Iterator

from kmirror.metadata.image import MetadataImage, PartitionRegistration

NO_LEADER = -1


def _partitions(image: MetadataImage) -> Iterator[tuple[str, PartitionRegistration]]:
    for name, topic in image.topics.items():
        for registration in topic.partitions.values():
            yield name, registration


def offline_partitions_count(image: MetadataImage) -> int:
    return sum(1 for _, p in _partitions(image) if p.leader == NO_LEADER)


def global_topic_count(image: MetadataImage) -> int:
    return len(image.topics)


def global_partition_count(image: MetadataImage) -> int:
    return sum(len(t.partitions) for t in image.topics.values())


def fenced_broker_count(image: MetadataImage) -> int:
    return sum(1 for b in image.brokers.values() if b.fenced)


def active_broker_count(image: MetadataImage) -> int:
    return sum(1 for b in image.brokers.values() if not b.fenced)


def preferred_replica_imbalance_count(image: MetadataImage) -> int:
    return sum(1 for _, p in _partitions(image) if p.replicas and p.leader != p.replicas[0])


def min_insync_replicas(image: MetadataImage, topic: str, broker_default: int) -> int:
    value = image.topic_config(topic).get("min.insync.replicas")
    return broker_default if value is None else int(value)


def under_replicated_partitions(image: MetadataImage, broker_id: int) -> int:
    return sum(1 for _, p in _partitions(image) if p.leader == broker_id and len(p.isr) < len(p.replicas))


def under_min_isr_partition_count(image: MetadataImage, broker_id: int, default_min_isr: int) -> int:
    return sum(
        1
        for topic, p in _partitions(image)
        if p.leader == broker_id and len(p.isr) < min_insync_replicas(image, topic, default_min_isr)
    )


def at_min_isr_partition_count(image: MetadataImage, broker_id: int, default_min_isr: int) -> int:
    return sum(
        1
        for topic, p in _partitions(image)
        if p.leader == broker_id and len(p.isr) == min_insync_replicas(image, topic, default_min_isr)
    )


def leader_count(image: MetadataImage, broker_id: int) -> int:
    return sum(1 for _, p in _partitions(image) if p.leader == broker_id)


def partition_count(image: MetadataImage, broker_id: int) -> int:
    return sum(1 for _, p in _partitions(image) if broker_id in p.replicas)

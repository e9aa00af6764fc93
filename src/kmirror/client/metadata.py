"""A client's view of cluster metadata, parsed from a Metadata response of any version (sans-IO)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kmirror.types import TopicPartition

ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: dict[int, PartitionMetadata]
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerMetadata]
    topics: dict[str, TopicMetadata] = field(default_factory=dict)

    @classmethod
    def from_response(cls, response: Any) -> ClusterMetadata:
        brokers = {
            int(b.node_id): BrokerMetadata(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None))
            for b in response.brokers
        }
        topics: dict[str, TopicMetadata] = {}
        for t in response.topics:
            if t.name is None:
                continue
            partitions = {
                int(p.partition_index): PartitionMetadata(
                    partition=int(p.partition_index),
                    leader=int(p.leader_id),
                    leader_epoch=int(getattr(p, "leader_epoch", -1)),
                    replicas=tuple(int(r) for r in p.replica_nodes),
                    isr=tuple(int(r) for r in p.isr_nodes),
                    offline_replicas=tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                    error_code=int(p.error_code),
                )
                for p in t.partitions
            }
            topic_id = getattr(t, "topic_id", None)
            topics[t.name] = TopicMetadata(
                name=t.name,
                topic_id=None if topic_id in (None, ZERO_UUID) else topic_id,
                is_internal=bool(getattr(t, "is_internal", False)),
                partitions=dict(sorted(partitions.items())),
                error_code=int(t.error_code),
            )
        return cls(
            cluster_id=getattr(response, "cluster_id", None),
            controller_id=int(getattr(response, "controller_id", -1)),
            brokers=brokers,
            topics=topics,
        )

    def leader_for(self, tp: TopicPartition) -> int | None:
        """The leader's broker id, or None if unknown (no such partition, or no leader now)."""
        topic = self.topics.get(tp.topic)
        if topic is None:
            return None
        partition = topic.partitions.get(tp.partition)
        if partition is None or partition.leader < 0:
            return None
        return partition.leader

    def partitions_for(self, topic: str) -> list[TopicPartition]:
        t = self.topics.get(topic)
        return [] if t is None else [TopicPartition(topic, p) for p in t.partitions]

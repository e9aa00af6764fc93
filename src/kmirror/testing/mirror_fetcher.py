"""An in-process source cluster for mirror tests: a source `ReplicaManager` read as a
consumer (replica id -1, the policy's isolation level), no sockets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from kmirror.mirror.fetcher.source_endpoint import LEADER_MOVED_ERRORS, SourceLeader
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.fetcher.endpoint import (
    another_topic,
    epoch_end_offsets_from_replica_manager,
    fetch_from_replica_manager,
)
from kmirror.replication.fetcher.engine import EpochQuery, FetchedPartition, FetchPlan
from kmirror.replication.outcomes import EpochEndOffset, PartitionError
from kmirror.types import TopicPartition


class InProcessSourceEndPoint:
    def __init__(self, rm: Any, on_leader_change: Callable[[set[TopicPartition]], None]) -> None:
        self.rm = rm
        self.on_leader_change = on_leader_change
        self.fetches: list[FetchPlan] = []

    async def fetch(self, plan: FetchPlan) -> dict[TopicPartition, FetchedPartition]:
        self.fetches.append(plan)
        results = fetch_from_replica_manager(self.rm, plan)
        moved = {tp for tp, r in results.items() if r.error in LEADER_MOVED_ERRORS}
        if moved:
            self.on_leader_change(moved)
        return results

    async def fetch_epoch_end_offsets(self, queries: Sequence[EpochQuery]) -> dict[TopicPartition, EpochEndOffset | ErrorCode]:
        return epoch_end_offsets_from_replica_manager(self.rm, queries)

    async def fetch_log_offsets(self, query: EpochQuery) -> tuple[int, int] | ErrorCode:
        if another_topic(self.rm, [(query.topic_partition, query.topic_id)]):
            return ErrorCode.unknown_topic_id
        p = self.rm.leader_partition(query.topic_partition)
        if isinstance(p, PartitionError):
            return p.code
        return p.log.log_start_offset, p.log.high_watermark

    async def close(self) -> None:
        return None


class InProcessSourceCluster:
    """`SourceCluster` over source brokers' replica managers (id -> rm); `leader_id` says
    which one leads every partition (tests move it)."""

    def __init__(self, brokers: dict[int, Any], leader_id: int, cluster_id: str = "source-cluster",
                 last_mirrored_epochs: dict[TopicPartition, int] | None = None, describe_supported: bool = True) -> None:
        self.brokers = brokers
        self.leader_id = leader_id
        self._cluster_id = cluster_id
        self.last_mirrored_epochs = last_mirrored_epochs or {}
        self.describe_supported = describe_supported
        self.endpoints: list[InProcessSourceEndPoint] = []
        self.deleted_topics: set[str] = set()
        self.closed = False

    async def cluster_id(self, refresh: bool = False) -> str:
        return self._cluster_id

    async def partition_leader(self, tp: TopicPartition, refresh: bool = False) -> SourceLeader | None:
        rm = self.brokers[self.leader_id]
        topic_id = rm.topic_id(tp.topic)
        return SourceLeader(self.leader_id, "in-process", 0, topic_id)

    async def topic_id(self, topic: str) -> UUID | None:
        if topic in self.deleted_topics:
            return None
        return self.brokers[self.leader_id].topic_id(topic)

    async def epoch_end_offset(self, query: EpochQuery) -> EpochEndOffset | ErrorCode:
        return await epoch_end_at(InProcessSourceEndPoint(self.brokers[self.leader_id], lambda _: None), query)

    def endpoint(self, leader: SourceLeader, client_id: str,
                 on_leader_change: Callable[[set[TopicPartition]], None]) -> InProcessSourceEndPoint:
        ep = InProcessSourceEndPoint(self.brokers[leader.broker_id], on_leader_change)
        self.endpoints.append(ep)
        return ep

    async def high_watermarks(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        rm = self.brokers[self.leader_id]
        return {tp: None if (p := rm.get_partition(tp)) is None else int(p.log.high_watermark) for tp in tps}

    async def last_mirrored_epoch(self, mirror_name: str, tp: TopicPartition) -> int | None:
        if not self.describe_supported:
            return None
        return self.last_mirrored_epochs.get(tp, -1)

    async def close(self) -> None:
        self.closed = True


async def epoch_end_at(endpoint: Any, query: EpochQuery) -> EpochEndOffset | ErrorCode:
    """`SourceCluster.epoch_end_offset` of a fake source: its endpoint's answer for the query."""
    return (await endpoint.fetch_epoch_end_offsets([query]))[query.topic_partition]  # type: ignore[no-any-return]

"""Where a fetcher fetches from (Kafka `LeaderEndPoint`).

`LeaderEndPoint` is the port the asyncio fetcher awaits. `ReplicaManagerLeaderEndPoint`
answers from a leader's `ReplicaManager` in the same process (tests, simulations, scenario
scripts); `kmirror.replication.fetcher.remote_endpoint.RemoteLeaderEndPoint` speaks the Kafka
protocol to the leader broker. A KIP-1279 mirror fetcher adds a third: the source cluster
read through consumer Fetch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol
from uuid import UUID

from kmirror.protocol.errors import ErrorCode
from kmirror.replication.fetcher.engine import EpochQuery, FetchedPartition, FetchPlan
from kmirror.replication.fetcher.truncation import leader_mirror_leader_epoch
from kmirror.replication.outcomes import EpochEndOffset, PartitionError, ReadOutcome
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.replication.replica_ports import FetchPartitionRequest
from kmirror.types import TopicPartition

LATEST_OFFSET_FOR_REPLICA = -1  # ListOffsets LATEST answered to a replica: the leader's LEO


class LeaderEndPoint(Protocol):
    async def fetch(self, plan: FetchPlan) -> dict[TopicPartition, FetchedPartition]: ...

    async def fetch_epoch_end_offsets(
        self, queries: Sequence[EpochQuery]
    ) -> dict[TopicPartition, EpochEndOffset | ErrorCode]: ...

    async def fetch_log_offsets(self, query: EpochQuery) -> tuple[int, int] | ErrorCode:
        """(log start offset, log end offset) of the leader's replica."""
        ...

    async def close(self) -> None: ...


def fetch_from_replica_manager(leader: ReplicaManager, plan: FetchPlan) -> dict[TopicPartition, FetchedPartition]:
    """Serve `plan` from a leader `ReplicaManager` exactly as its Fetch handler would."""
    policy = plan.policy
    requests = [
        FetchPartitionRequest(
            p.topic_partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
            p.last_fetched_epoch, p.log_start_offset,
        )
        for p in plan.partitions
    ]
    other = another_topic(leader, [(p.topic_partition, p.topic_id) for p in plan.partitions])
    requests = [r for r in requests if r.topic_partition not in other]
    results = leader.fetch(requests, policy.max_bytes, policy.isolation_level, policy.replica_id,
                           replica_epoch=policy.replica_epoch) if requests else {}
    out = {tp: fetched_partition(r) for tp, r in results.items()}
    out.update({tp: FetchedPartition(ErrorCode.unknown_topic_id) for tp in other})
    if policy.replica_id >= 0:  # a follower of this cluster: Fetch v19's MirrorLeaderEpoch
        out = {tp: replace(f, mirror_leader_epoch=leader_mirror_leader_epoch(leader, tp)) if f.error == ErrorCode.none
               else f for tp, f in out.items()}
    return out


def another_topic(leader: ReplicaManager, asked: Sequence[tuple[TopicPartition, UUID]]) -> set[TopicPartition]:
    """The partitions asked for with a topic id the leader does not hold under that name: a
    Fetch v13+ names topics by id and is answered UNKNOWN_TOPIC_ID for them (the mirror's
    source endpoint answers its name-keyed requests the same way, see
    `kmirror.mirror.fetcher.source_endpoint`). A zero id (no id known) matches any."""
    return {tp for tp, topic_id in asked
            if topic_id.int != 0 and (mine := leader.topic_id(tp.topic)) is not None and mine != topic_id}


def fetched_partition(result: ReadOutcome | PartitionError) -> FetchedPartition:
    if isinstance(result, PartitionError):
        return FetchedPartition(result.code)
    return FetchedPartition(
        ErrorCode.none, result.records, result.high_watermark, result.log_start_offset,
        result.last_stable_offset, result.diverging_epoch,
    )


def epoch_end_offsets_from_replica_manager(
    leader: ReplicaManager, queries: Sequence[EpochQuery]
) -> dict[TopicPartition, EpochEndOffset | ErrorCode]:
    out: dict[TopicPartition, EpochEndOffset | ErrorCode] = {}
    other = another_topic(leader, [(q.topic_partition, q.topic_id) for q in queries])
    for q in queries:
        if q.topic_partition in other:
            out[q.topic_partition] = ErrorCode.unknown_topic_id
            continue
        r = leader.offset_for_leader_epoch(q.topic_partition, q.current_leader_epoch, q.leader_epoch)
        out[q.topic_partition] = r.code if isinstance(r, PartitionError) else r
    return out


def log_offsets_from_replica_manager(leader: ReplicaManager, query: EpochQuery) -> tuple[int, int] | ErrorCode:
    if another_topic(leader, [(query.topic_partition, query.topic_id)]):
        return ErrorCode.unknown_topic_id
    partition = leader.leader_partition(query.topic_partition)
    if isinstance(partition, PartitionError):
        return partition.code
    fenced = partition.check_leader_epoch(query.current_leader_epoch)
    if fenced is not None:
        return fenced.code
    if not partition.is_leader:
        return ErrorCode.not_leader_or_follower
    return partition.log.log_start_offset, partition.log.log_end_offset


class ReplicaManagerLeaderEndPoint:
    """An in-process leader (no network): for tests and simulations."""

    def __init__(self, leader: ReplicaManager) -> None:
        self.leader = leader

    async def fetch(self, plan: FetchPlan) -> dict[TopicPartition, FetchedPartition]:
        results = fetch_from_replica_manager(self.leader, plan)
        # Like a leader holding the Fetch in its purgatory: nothing new -> wait max_wait_ms.
        idle = all(len(r.records) == 0 and r.diverging_epoch is None for r in results.values())
        await asyncio.sleep(plan.policy.max_wait_ms / 1000 if idle else 0)
        return results

    async def fetch_epoch_end_offsets(self, queries: Sequence[EpochQuery]) -> dict[TopicPartition, EpochEndOffset | ErrorCode]:
        return epoch_end_offsets_from_replica_manager(self.leader, queries)

    async def fetch_log_offsets(self, query: EpochQuery) -> tuple[int, int] | ErrorCode:
        return log_offsets_from_replica_manager(self.leader, query)

    async def close(self) -> None:
        return None

"""The link between the two simulated clusters: the destination's `SourceCluster` port over
the other cluster's real `ReplicaManager` and mirror state (DescribeMirrors), with faults.

Faults, all driven by the simulation's seeded rng: the link can be down (every request
fails), drop a request at random (`drop_rate`), or hold a Fetch answer (`delay_rate`): the
answer is computed when the request arrives and handed back only when the simulation
delivers it (`deliver`) or times it out (`fail_held`), so a stale answer can arrive after a
failover, a pause or a crash of the destination.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol
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
from kmirror.testing.mirror_fetcher import epoch_end_at
from kmirror.types import TopicPartition


class SourceSide(Protocol):
    """What a destination sees of the source cluster."""

    cluster_id: str

    @property
    def alive(self) -> bool: ...

    @property
    def rm(self) -> Any: ...

    def describe_last_mirrored_epoch(self, mirror_name: str, tp: TopicPartition) -> int: ...


class Network:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.down = False
        self.drop_rate = 0.0
        self.delay_rate = 0.0
        self.held: list[asyncio.Future[None]] = []

    def check(self, what: str) -> None:
        if self.down or self.rng.random() < self.drop_rate:
            raise ConnectionError(f"{what}: network failure")

    async def maybe_hold(self) -> None:
        if self.rng.random() < self.delay_rate:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.held.append(future)
            await future

    def deliver(self) -> int:
        held, self.held = self.held, []
        for future in held:
            if not future.done():
                future.set_result(None)
        return len(held)

    def fail_held(self) -> int:
        held, self.held = self.held, []
        for future in held:
            if not future.done():
                future.set_exception(ConnectionError("request timed out"))
        return len(held)


class SimSourceEndPoint:
    """A consumer's connection to the source leader (replica id -1: the mirror policy)."""

    def __init__(self, source: SourceSide, network: Network,
                 on_leader_change: Callable[[set[TopicPartition]], None]) -> None:
        self.source = source
        self.network = network
        self.on_leader_change = on_leader_change

    def _rm(self, what: str) -> Any:
        self.network.check(what)
        if not self.source.alive:
            raise ConnectionError(f"{what}: connection refused")
        return self.source.rm

    async def fetch(self, plan: FetchPlan) -> dict[TopicPartition, FetchedPartition]:
        results = fetch_from_replica_manager(self._rm("Fetch"), plan)
        # The bytes leave the source now: a held answer must not see later source changes.
        results = {tp: dataclasses.replace(r, records=bytes(r.records)) for tp, r in results.items()}
        await self.network.maybe_hold()
        moved = {tp for tp, r in results.items() if r.error in LEADER_MOVED_ERRORS}
        if moved:
            self.on_leader_change(moved)
        return results

    async def fetch_epoch_end_offsets(self, queries: Sequence[EpochQuery]) -> dict[TopicPartition, EpochEndOffset | ErrorCode]:
        return epoch_end_offsets_from_replica_manager(self._rm("OffsetsForLeaderEpoch"), queries)

    async def fetch_log_offsets(self, query: EpochQuery) -> tuple[int, int] | ErrorCode:
        if another_topic(self._rm("ListOffsets"), [(query.topic_partition, query.topic_id)]):
            return ErrorCode.unknown_topic_id
        p = self._rm("ListOffsets").leader_partition(query.topic_partition)
        if isinstance(p, PartitionError):
            return p.code
        return p.log.log_start_offset, p.log.high_watermark

    async def close(self) -> None:
        return None


class SimSourceCluster:
    """`SourceCluster` for one mirror: metadata, DescribeMirrors and endpoints of `source`."""

    def __init__(self, source: SourceSide, network: Network) -> None:
        self.source = source
        self.network = network

    def _reachable(self, what: str) -> None:
        self.network.check(what)
        if not self.source.alive:
            raise ConnectionError(f"{what}: connection refused")

    async def cluster_id(self, refresh: bool = False) -> str:
        self._reachable("Metadata")
        return self.source.cluster_id

    async def partition_leader(self, tp: TopicPartition, refresh: bool = False) -> SourceLeader | None:
        self._reachable("Metadata")
        p = self.source.rm.get_partition(tp)
        if p is None or not p.is_leader:
            return None
        return SourceLeader(self.source.rm.node_id, "sim", 0, self.source.rm.topic_id(tp.topic))

    async def topic_id(self, topic: str) -> UUID | None:
        self._reachable("Metadata")
        return self.source.rm.topic_id(topic)  # type: ignore[no-any-return]

    def endpoint(self, leader: SourceLeader, client_id: str,
                 on_leader_change: Callable[[set[TopicPartition]], None]) -> SimSourceEndPoint:
        return SimSourceEndPoint(self.source, self.network, on_leader_change)

    async def epoch_end_offset(self, query: EpochQuery) -> EpochEndOffset | ErrorCode:
        if await self.partition_leader(query.topic_partition) is None:
            return ErrorCode.not_leader_or_follower
        return await epoch_end_at(SimSourceEndPoint(self.source, self.network, lambda _: None), query)

    async def high_watermarks(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        self._reachable("ListOffsets")
        return {tp: None if (p := self.source.rm.get_partition(tp)) is None else int(p.log.high_watermark)
                for tp in tps}

    async def last_mirrored_epoch(self, mirror_name: str, tp: TopicPartition) -> int | None:
        self._reachable("DescribeMirrors")
        return self.source.describe_last_mirrored_epoch(mirror_name, tp)

    async def close(self) -> None:
        return None

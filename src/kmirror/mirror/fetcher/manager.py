"""Which mirror fetcher fetches which partition (KIP-1279 "MirrorFetcher"; Kafka
`AbstractFetcherManager` keyed for mirrors).

Fetchers are keyed by (source broker, mirror, fetcher id): one `Fetcher` task and one
connection each, `mirror.num.replica.fetchers` per (source broker, mirror), a partition
always on the same fetcher id. The `Fetcher` and `FetchEngine` are the follower's; only the
endpoint (`SourceClusterEndPoint`), the policy (`mirror_fetch_policy`) and the local port
(`MirrorLocalReplica`) differ.

A partition is added with its mirror's `SourceCluster`; its source leader comes from source
metadata. When the source says a partition moved (leader change, topic re-created), the
partition goes back to `pending` and is re-added after a metadata refresh, possibly on
another fetcher (`retry_pending`, also called periodically by the mirror manager).

Read by the metrics layer (never written by it): `fetchers` and `fetcher_address` (the source
broker each fetcher reads), `partition_lags()` (Kafka `FetcherLagMetrics`), `pending`,
`sync_errors.metadata_refresh` (source metadata that could not be read). A partition that is
not fetched (PAUSED) still has its source high watermark followed by
`refresh_source_offsets`, so its lag keeps growing while the source is written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from kmirror.mirror.source_topic import is_another_topic
from kmirror.mirror.sync_errors import MirrorSyncErrors
from kmirror.ports import Clock
from kmirror.replication.fetcher.engine import FetchEngine
from kmirror.replication.fetcher.fetcher import Fetcher
from kmirror.replication.fetcher.manager import FetcherPool
from kmirror.replication.fetcher.policy import FetchPolicy
from kmirror.replication.replication_quota import ReplicaQuota
from kmirror.types import TopicPartition

from .local_replica import MirrorLocalReplica
from .policy import NO_LEADER_EPOCH, mirror_fetcher_client_id, mirror_fetcher_id
from .source_endpoint import SourceCluster

log = logging.getLogger(__name__)

ZERO_UUID = UUID(int=0)


@dataclass(frozen=True, slots=True)
class FetcherKey:
    source_broker_id: int
    mirror_name: str
    fetcher_id: int


@dataclass(frozen=True, slots=True)
class MirroredPartition:
    mirror_name: str
    source: SourceCluster
    topic_id: UUID  # the destination's (equal to the source's for mirror topics)


class MirrorFetcherManager(FetcherPool[FetcherKey]):
    def __init__(
        self,
        broker_id: int,
        local: MirrorLocalReplica,
        policy: FetchPolicy,
        clock: Clock,
        num_fetchers: int = 1,
        on_progress: Callable[[set[TopicPartition]], None] | None = None,
        sync_errors: MirrorSyncErrors | None = None,
        quota: ReplicaQuota | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.quota = quota  # mirror.replication.throttled.rate / .replicas
        self.local = local
        self.policy = policy
        self.clock = clock
        self.num_fetchers = max(1, num_fetchers)
        self.on_progress = on_progress
        self.fetchers: dict[FetcherKey, Fetcher] = {}
        self.partitions: dict[TopicPartition, MirroredPartition] = {}
        self.fetcher_of: dict[TopicPartition, FetcherKey] = {}
        self.pending: set[TopicPartition] = set()
        self.source_topic_changed: dict[TopicPartition, UUID] = {}
        """Pending partitions whose source name lists another topic id (not fetched)."""
        self.fetcher_address: dict[FetcherKey, tuple[str, int]] = {}
        self.idle_fetcher_of: dict[TopicPartition, FetcherKey] = {}
        self.sync_errors = sync_errors if sync_errors is not None else MirrorSyncErrors()
        self._running = False
        self._settled_source: dict[str, SourceCluster] = {}
        """Per mirror: the source every one of its partitions was last seen on, so that
        `replace_source` (asked for each partition of every pass) is not a walk over all
        partitions each time. Dropped when a partition is added on another source."""

    async def add_partition(self, tp: TopicPartition, mirror_name: str, source: SourceCluster, topic_id: UUID) -> None:
        """Start mirroring `tp` from the local log end offset (the engine first resolves
        divergence with the source through OffsetsForLeaderEpoch)."""
        self.remove_partition(tp)
        if self._settled_source.get(mirror_name) is not source:
            self._settled_source.pop(mirror_name, None)
        self.partitions[tp] = MirroredPartition(mirror_name, source, topic_id)
        self.local.admit(tp)
        self.pending.add(tp)
        await self._assign(tp, refresh=False)

    async def replace_source(self, mirror_name: str, source: SourceCluster) -> None:
        """The mirror's source connection changed (bootstrap or security configs): its
        fetchers stop and its partitions continue, from the local log end offset, through
        connections of the new `source`."""
        if self._settled_source.get(mirror_name) is source:
            return
        self._settled_source[mirror_name] = source
        moved = [tp for tp, mp in self.partitions.items() if mp.mirror_name == mirror_name and mp.source is not source]
        if not moved:
            return
        for key in [k for k in self.fetchers if k.mirror_name == mirror_name]:
            await self.fetchers.pop(key).stop()
        for tp in moved:
            self.fetcher_of.pop(tp, None)
            self.partitions[tp] = MirroredPartition(mirror_name, source, self.partitions[tp].topic_id)
            self.pending.add(tp)
            await self._assign(tp, refresh=False)

    def remove_partition(self, tp: TopicPartition) -> None:
        """Stop fetching `tp`: no later answer is applied (the engine drops answers for
        partitions it no longer has, and the local port refuses writes)."""
        self.pending.discard(tp)
        self.source_topic_changed.pop(tp, None)
        self.partitions.pop(tp, None)
        self.local.release(tp)
        key = self.fetcher_of.pop(tp, None)
        fetcher = self.fetchers.get(key) if key is not None else None
        if fetcher is not None:
            fetcher.engine.remove_partitions([tp])

    def is_fetching(self, tp: TopicPartition) -> bool:
        return tp in self.fetcher_of

    async def _assign(self, tp: TopicPartition, refresh: bool) -> None:
        mp = self.partitions.get(tp)
        if mp is None:
            return
        try:
            leader = await mp.source.partition_leader(tp, refresh=refresh)
        except Exception as exc:  # source unreachable: stay pending, retried later
            self.sync_errors.metadata_refresh += 1
            log.debug("mirror %s: no source metadata for %s: %s", mp.mirror_name, tp, exc)
            return
        if leader is None or self.partitions.get(tp) is not mp:
            return
        if is_another_topic(mp.topic_id, leader.topic_id):
            # The source's name now denotes another topic (deleted and re-created): never
            # fetch it. The partition stays pending; the mirror manager stops it.
            if self.source_topic_changed.get(tp) != leader.topic_id:
                log.debug("mirror %s: source topic %s has topic id %s, the mirror copies %s: not fetched",
                          mp.mirror_name, tp.topic, leader.topic_id, mp.topic_id)
            self.source_topic_changed[tp] = leader.topic_id  # type: ignore[assignment]  # not None here
            return
        key = FetcherKey(leader.broker_id, mp.mirror_name, mirror_fetcher_id(f"{tp.topic}-{tp.partition}", self.num_fetchers))
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            client_id = mirror_fetcher_client_id(self.broker_id, key.fetcher_id, mp.mirror_name)
            endpoint = mp.source.endpoint(leader, client_id, self._on_leader_change)
            fetcher = Fetcher(client_id, FetchEngine(self.local, self.policy, self.quota), endpoint, self.clock,
                              self.on_progress)
            self.fetchers[key] = fetcher
            self.fetcher_address[key] = (leader.host, leader.port)
            if self._running:
                fetcher.start()
        old = self.fetcher_of.get(tp)
        if old is not None and old in self.fetchers:
            self.fetchers[old].engine.remove_partitions([tp])
        # Always the mirror's topic id: Fetch v13+ then names exactly that topic.
        fetcher.engine.add_partition(tp, mp.topic_id, NO_LEADER_EPOCH)
        self.fetcher_of[tp] = key
        self.idle_fetcher_of.pop(tp, None)
        self.pending.discard(tp)
        fetcher.wake()

    def _on_leader_change(self, tps: set[TopicPartition]) -> None:
        for tp in tps:
            if tp in self.partitions:
                key = self.fetcher_of.pop(tp, None)
                if key is not None and key in self.fetchers:
                    self.fetchers[key].engine.remove_partitions([tp])
                self.pending.add(tp)

    async def retry_pending(self) -> None:
        """Re-add partitions without a fetcher, with fresh source metadata: one refresh per
        source cluster per retry, not one per partition (thousands of partitions sent back
        by one failed Fetch would each ask for the whole topic's metadata)."""
        refreshed: list[SourceCluster] = []
        for tp in list(self.pending):
            mp = self.partitions.get(tp)
            if mp is None:
                continue
            refresh = not any(source is mp.source for source in refreshed)
            if refresh:
                refreshed.append(mp.source)
            await self._assign(tp, refresh=refresh)


    def partition_lags(self) -> dict[TopicPartition, tuple[FetcherKey, int]]:
        """Lag in records (source high watermark - local log end offset, at least 0) of every
        partition with a known source high watermark, with the fetcher that fetches it (or
        would, for a partition not fetched now)."""
        out: dict[TopicPartition, tuple[FetcherKey, int]] = {}
        for tp, key in (*self.idle_fetcher_of.items(), *self.fetcher_of.items()):
            progress = self.local.source.get(tp)
            if progress is None or progress.high_watermark < 0:
                continue
            out[tp] = (key, max(0, progress.high_watermark - self.local.log_end_offset(tp)))
        return out

    async def refresh_source_offsets(self, idle: dict[TopicPartition, tuple[str, SourceCluster]]) -> None:
        """Follow the source high watermark of partitions that are not fetched (`idle`:
        partition -> mirror name and source); forget partitions no longer idle. One
        ListOffsets per source leader for a mirror's idle partitions, not one each: a paused
        mirror of a thousand partitions a region away would hold every pass for minutes."""
        for tp in set(self.idle_fetcher_of) - set(idle):
            del self.idle_fetcher_of[tp]
        by_mirror: dict[tuple[str, int], tuple[SourceCluster, list[TopicPartition]]] = {}
        for tp, (mirror_name, source) in idle.items():
            if tp not in self.fetcher_of:
                by_mirror.setdefault((mirror_name, id(source)), (source, []))[1].append(tp)
        for (mirror_name, _), (source, tps) in by_mirror.items():
            try:
                leaders = {tp: await source.partition_leader(tp) for tp in tps}
                high_watermarks = await source.high_watermarks(tps)
            except Exception as exc:  # source unreachable: keep the last known values
                self.sync_errors.metadata_refresh += 1
                log.debug("mirror %s: no source offsets for %d partitions: %s", mirror_name, len(tps), exc)
                continue
            for tp in tps:
                leader, high_watermark = leaders[tp], high_watermarks.get(tp)
                if leader is None or high_watermark is None:
                    continue
                self.idle_fetcher_of[tp] = FetcherKey(
                    leader.broker_id, mirror_name, mirror_fetcher_id(f"{tp.topic}-{tp.partition}", self.num_fetchers))
                self.local.update_high_watermark(tp, high_watermark)

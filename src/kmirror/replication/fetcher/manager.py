"""Which fetcher fetches which partition (Kafka `ReplicaFetcherManager`).

Partitions this node follows are grouped by leader broker: one `Fetcher` (one asyncio task,
one connection) per leader. The replica manager's role listener feeds `on_role_change`;
a partition whose leader changes moves to that leader's fetcher and starts from its local
log end offset with the new leader epoch. Partitions whose leader has no known endpoint yet
wait in `pending` until `retry_pending` (called on every metadata image).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from kmirror.ports import Clock
from kmirror.replication.fetcher.endpoint import LeaderEndPoint
from kmirror.replication.fetcher.engine import FetchEngine, LocalReplica
from kmirror.replication.fetcher.fetcher import Fetcher
from kmirror.replication.fetcher.policy import FetchPolicy
from kmirror.replication.replica_ports import FollowedPartition
from kmirror.replication.replication_quota import ReplicaQuota
from kmirror.types import TopicPartition

K = TypeVar("K")


class FetcherPool(Generic[K]):
    """The fetcher tasks of one manager, keyed by `K` (the leader broker for replication;
    source broker, mirror and fetcher id for mirroring): start, stop, and stop the idle ones
    (Kafka `AbstractFetcherManager`)."""

    fetchers: dict[K, Fetcher]
    _running: bool

    def start(self) -> None:
        self._running = True
        for fetcher in self.fetchers.values():
            fetcher.start()

    async def shutdown_idle_fetchers(self) -> None:
        """Stop fetchers left without partitions (Kafka `shutdownIdleFetcherThreads`)."""
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.engine.states:
                del self.fetchers[key]
                await fetcher.stop()

    async def stop(self) -> None:
        self._running = False
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        for fetcher in fetchers:
            await fetcher.stop()


class ReplicaFetcherManager(FetcherPool[int]):
    def __init__(
        self,
        local: LocalReplica,
        policy: FetchPolicy,
        endpoint_for: Callable[[int], LeaderEndPoint | None],
        clock: Clock,
        on_progress: Callable[[set[TopicPartition]], None] | None = None,
        quota: ReplicaQuota | None = None,
    ) -> None:
        self.local = local
        self.quota = quota
        self.policy = policy
        self.endpoint_for = endpoint_for
        self.clock = clock
        self.on_progress = on_progress
        self.fetchers: dict[int, Fetcher] = {}
        self.pending: dict[TopicPartition, FollowedPartition] = {}
        self._leader_of: dict[TopicPartition, int] = {}
        self._running = False

    def on_role_change(self, follow: list[FollowedPartition], unfollow: list[TopicPartition]) -> None:
        self.remove_partitions(unfollow)
        for f in follow:
            self._add(f)

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.pending.pop(tp, None)
            leader = self._leader_of.pop(tp, None)
            fetcher = self.fetchers.get(leader) if leader is not None else None
            if fetcher is not None:
                fetcher.engine.remove_partitions([tp])

    def _add(self, f: FollowedPartition) -> None:
        tp = f.topic_partition
        self.remove_partitions([tp])
        fetcher = self.fetchers.get(f.leader_id)
        if fetcher is None:
            endpoint = self.endpoint_for(f.leader_id)
            if endpoint is None:
                self.pending[tp] = f
                return
            fetcher = Fetcher(
                f"replica-fetcher-{f.leader_id}", FetchEngine(self.local, self.policy, self.quota), endpoint, self.clock, self.on_progress
            )
            self.fetchers[f.leader_id] = fetcher
            if self._running:
                fetcher.start()
        fetcher.engine.add_partition(tp, f.topic_id, f.leader_epoch)
        self._leader_of[tp] = f.leader_id
        fetcher.wake()

    def retry_pending(self) -> None:
        for f in list(self.pending.values()):
            self.pending.pop(f.topic_partition, None)
            self._add(f)


"""How long the data plane's passes wait on a source cluster.

A pass asks the source a few things (its cluster id, the mirrored topics' ids, leaders, high
watermarks, last mirrored epochs), each bounded by the source client's request timeout
(30 s). A source that stopped answering without refusing (a network partition, a site whose
machines are gone: packets dropped, no reset) makes each question take that long, and the
plane runs one pass at a time: a failover (`--remove`) would wait behind minutes of
unanswered questions, though it needs nothing from the source (KIP-1279: the disaster case).

So a source wait gives up after `grace_s` (the answer is then "unknown", which every caller
already takes as an unreachable source) when something the operator asked for is waiting:
- a newer metadata image arrived during the pass (`newer_image`): the waits in flight give
  up `grace_s` after it arrived, and later ones of the same pass `grace_s` after they began;
- a pass that has partitions to fail over (`start_pass(failing_over=True)`): each of its waits.
Otherwise a wait lasts as long as the request does. The request itself is never cancelled:
it ends by its own timeout and its late answer is dropped."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar
from uuid import UUID

from kmirror.mirror.fetcher.source_endpoint import SourceCluster, SourceLeader
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.fetcher.endpoint import LeaderEndPoint
from kmirror.replication.fetcher.engine import EpochQuery
from kmirror.replication.outcomes import EpochEndOffset
from kmirror.types import TopicPartition

T = TypeVar("T")

GRACE_S = 1.0


class SourceWaitAbandoned(ConnectionError):
    """The pass stopped waiting for the source's answer."""


class SourceWaits:
    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s
        self._waiting: set[asyncio.Future[object]] = set()
        self._bounded = False
        self.abandoned = 0
        """Source waits given up (cumulative)."""

    def start_pass(self, failing_over: bool) -> None:
        """A pass begins, `failing_over` when it has partitions to fail over."""
        self._bounded = failing_over

    def newer_image(self) -> None:
        """A newer image waits for the running pass: it stops waiting on the source soon."""
        if self._bounded:
            return
        self._bounded = True
        loop = asyncio.get_running_loop()
        for outer in list(self._waiting):
            loop.call_later(self.grace_s, self._abandon, outer)

    async def call(self, request: Awaitable[T]) -> T:
        loop = asyncio.get_running_loop()
        outer: asyncio.Future[T] = loop.create_future()
        inner = asyncio.ensure_future(request)
        inner.add_done_callback(lambda done: _settle(outer, done))
        if self._bounded:
            loop.call_later(self.grace_s, self._abandon, outer)
        self._waiting.add(outer)  # type: ignore[arg-type]
        try:
            return await outer
        finally:
            self._waiting.discard(outer)  # type: ignore[arg-type]

    def _abandon(self, outer: asyncio.Future[T]) -> None:
        if not outer.done():
            self.abandoned += 1
            outer.set_exception(SourceWaitAbandoned(f"no answer from the source within {self.grace_s:.0f} s while "
                                                    "an operator's change waits"))


def _settle(outer: asyncio.Future[T], inner: asyncio.Future[T]) -> None:
    if inner.cancelled():
        if not outer.done():
            outer.cancel()
        return
    exc = inner.exception()  # retrieved even when nobody waits any more
    if outer.done():
        return
    if exc is not None:
        outer.set_exception(exc)
    else:
        outer.set_result(inner.result())


class BoundedSourceCluster:
    """A `SourceCluster` whose questions wait as `SourceWaits` allows; the fetchers'
    endpoints (their own connections and timeouts) are the wrapped source's."""

    def __init__(self, inner: SourceCluster, waits: SourceWaits) -> None:
        self.inner = inner
        self.waits = waits

    async def cluster_id(self, refresh: bool = False) -> str:
        return await self.waits.call(self.inner.cluster_id(refresh))

    async def partition_leader(self, tp: TopicPartition, refresh: bool = False) -> SourceLeader | None:
        return await self.waits.call(self.inner.partition_leader(tp, refresh))

    async def topic_id(self, topic: str) -> UUID | None:
        return await self.waits.call(self.inner.topic_id(topic))

    def endpoint(self, leader: SourceLeader, client_id: str,
                 on_leader_change: Callable[[set[TopicPartition]], None]) -> LeaderEndPoint:
        return self.inner.endpoint(leader, client_id, on_leader_change)

    async def last_mirrored_epoch(self, mirror_name: str, tp: TopicPartition) -> int | None:
        return await self.waits.call(self.inner.last_mirrored_epoch(mirror_name, tp))

    async def high_watermarks(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        return await self.waits.call(self.inner.high_watermarks(tps))

    async def epoch_end_offset(self, query: EpochQuery) -> EpochEndOffset | ErrorCode:
        return await self.waits.call(self.inner.epoch_end_offset(query))

    async def close(self) -> None:
        await self.inner.close()

"""One fetcher task per leader (Kafka `ReplicaFetcherThread`): the engine's asyncio shell.

Each round: truncate partitions that need it (OffsetsForLeaderEpoch), reset partitions the
leader found out of range (its log start/end offsets), then one Fetch for every partition
ready to fetch. The leader holds the Fetch up to `max_wait_ms` when it has nothing new, so
an idle follower costs one request per `max_wait_ms`. A failed request backs every partition
off for `backoff_ms` (Kafka `replica.fetch.backoff.ms`).

Kafka `FetcherStats`: `fetch_requests_total` counts Fetch requests sent and
`fetched_bytes_total` the record bytes they returned; `dead` is a fetcher whose task ended
without being stopped (Kafka `DeadThreadCount`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kmirror.ports import Clock
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.fetcher.endpoint import LeaderEndPoint
from kmirror.replication.fetcher.engine import FetchEngine
from kmirror.types import TopicPartition

log = logging.getLogger(__name__)


class Fetcher:
    def __init__(
        self,
        name: str,
        engine: FetchEngine,
        endpoint: LeaderEndPoint,
        clock: Clock,
        on_progress: Callable[[set[TopicPartition]], None] | None = None,
    ) -> None:
        self.name = name
        self.engine = engine
        self.endpoint = endpoint
        self.clock = clock
        self.on_progress = on_progress
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.fetch_requests_total = 0
        self.fetched_bytes_total = 0

    @property
    def dead(self) -> bool:
        return self._task is not None and self._task.done() and not self._stopping

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Close the endpoint first so an in-flight request fails (and is consumed) inside
        the task, then let the task end; cancel it if it does not end promptly."""
        self._stopping = True
        self._wake.set()
        await self.endpoint.close()
        task, self._task = self._task, None
        if task is not None:
            try:
                async with asyncio.timeout(1.0):
                    await task
            except (TimeoutError, asyncio.CancelledError, Exception):
                pass

    async def run_once(self) -> bool:
        """One round; False when nothing was ready to send."""
        engine = self.engine
        now = self.clock.monotonic_ms()
        did = False
        queries = engine.epoch_queries(now)
        if queries:
            did = True
            try:
                results = await self.endpoint.fetch_epoch_end_offsets(queries)
            except Exception as exc:  # the leader is unreachable or answered garbage
                self._failed(exc, [q.topic_partition for q in queries])
            else:
                engine.handle_epoch_end_offsets(results, self.clock.monotonic_ms())
        for query in engine.reset_queries(now):
            did = True
            try:
                offsets = await self.endpoint.fetch_log_offsets(query)
            except Exception as exc:
                self._failed(exc, [query.topic_partition])
                continue
            if isinstance(offsets, ErrorCode):
                engine.handle_failure([query.topic_partition], self.clock.monotonic_ms())
            else:
                engine.handle_leader_offsets(query.topic_partition, *offsets)
        plan = engine.fetch_plan(self.clock.monotonic_ms())
        if plan is not None:
            did = True
            self.fetch_requests_total += 1
            try:
                fetched = await self.endpoint.fetch(plan)
            except Exception as exc:
                self._failed(exc, [p.topic_partition for p in plan.partitions])
            else:
                self.fetched_bytes_total += sum(len(r.records) for r in fetched.values())
                for changed in engine.fetch_response_steps(plan, fetched, self.clock.monotonic_ms()):
                    if changed and self.on_progress is not None:
                        self.on_progress(changed)
                    await asyncio.sleep(0)  # the node serves others between steps of a wide answer
        return did

    def _failed(self, exc: Exception, tps: list[TopicPartition]) -> None:
        log.debug("%s: request failed: %s", self.name, exc)
        self.engine.handle_failure(tps, self.clock.monotonic_ms())

    async def _run(self) -> None:
        while not self._stopping:
            await asyncio.sleep(0)  # one round at a time: let the node serve in between
            try:
                did = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: fetch round failed", self.name)
                did = False
            if not did and not self._stopping:
                self._wake.clear()
                ready = self.engine.next_ready_ms()
                now = self.clock.monotonic_ms()
                idle_ms = self.engine.policy.backoff_ms if ready is None else max(1, min(ready - now, self.engine.policy.backoff_ms))
                try:
                    async with asyncio.timeout(idle_ms / 1000):
                        await self._wake.wait()
                except TimeoutError:
                    pass

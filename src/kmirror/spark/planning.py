"""Planning a read: which partitions, which offsets, which Spark tasks.

Runs where Spark plans (the driver's Python planner process), with kmirror's client:
Metadata for the partitions of a subscription, ListOffsets for earliest / latest (the LSO
under read_committed) and for timestamps. Offsets and ranges are plain values, pickled
to the tasks. `split_ranges` is Spark's `KafkaOffsetRangeCalculator`.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from kmirror.client.admin import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Admin
from kmirror.client.cluster import Cluster
from kmirror.client.configs import cluster_from_configs
from kmirror.client.errors import KafkaConnectionError, KafkaError
from kmirror.client.metadata import TopicMetadata
from kmirror.spark.options import EARLIEST, LATEST, KafkaOptionError, OffsetSpec, SourceOptions, Subscription
from kmirror.types import TopicPartition

T = TypeVar("T")
RETRY_BACKOFF_S = 0.25


@dataclass(frozen=True, slots=True, order=True)
class OffsetRange:
    """[from_offset, until_offset) of one partition: one Spark task's share."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return max(0, self.until_offset - self.from_offset)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


async def retrying(operation: Callable[[], Awaitable[T]], timeout_ms: int, what: str,
                   cluster: Cluster | None = None) -> T:
    """`operation()`, retried on connection errors and retriable Kafka errors (a leader that
    moved, a broker restarting) until `timeout_ms`, with fresh metadata from `cluster`."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            return await operation()
        except (KafkaConnectionError, KafkaError) as exc:
            retriable = isinstance(exc, KafkaConnectionError) or exc.retriable
            if not retriable or time.monotonic() >= deadline:
                if isinstance(exc, KafkaError):
                    raise
                raise KafkaConnectionError(f"{what}: {exc}") from None
        await asyncio.sleep(RETRY_BACKOFF_S)
        if cluster is not None:
            try:
                await cluster.refresh()
            except (KafkaConnectionError, KafkaError):
                pass


class Planner:
    """One client connection for the planning calls of one read (open with `async with`)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.cluster: Cluster = cluster_from_configs(options.client_configs, client_id="kmirror-spark-planner")
        self.admin = Admin(self.cluster)
        self.timeout_ms = options.poll_timeout_ms

    async def __aenter__(self) -> Planner:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cluster.close()

    async def partitions(self, *, require_topics: bool = True) -> list[TopicPartition]:
        """The partitions the subscription names now. A topic named by `subscribe` or
        `assign` that does not exist is an error (`require_topics`); a pattern may match none."""
        sub = self.options.subscription

        async def load() -> list[TopicPartition]:
            metadata = await self.cluster.refresh()
            return _subscribed(sub, metadata.topics, require_topics)

        return await retrying(load, self.timeout_ms, "Metadata", self.cluster)

    async def list_offsets(self, requests: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        if not requests:
            return {}

        async def call() -> dict[TopicPartition, int]:
            listed = await self.admin.list_offsets(requests, isolation_level=self.options.isolation_level)
            return {tp: o.offset for tp, o in listed.items()}

        return await retrying(call, self.timeout_ms, "ListOffsets", self.cluster)

    async def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self.list_offsets({tp: EARLIEST_TIMESTAMP for tp in tps})

    async def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log end to read up to: the high watermark, or the LSO under read_committed."""
        return await self.list_offsets({tp: LATEST_TIMESTAMP for tp in tps})

    async def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], *, starting: bool) -> dict[TopicPartition, int]:
        """Offsets of `spec` for each partition in `tps`, as Spark's KafkaOffsetReader resolves them."""
        name = ("starting" if starting else "ending") + spec.option_name
        if spec.kind == "earliest":
            return await self.earliest(tps)
        if spec.kind == "latest":
            return await self.latest(tps)
        if spec.kind == "offsets":
            _check_covers(name, spec.offsets, tps)
            out = {tp: spec.offsets[tp] for tp in tps}
            earliest = await self.earliest([tp for tp, o in out.items() if o == EARLIEST])
            latest = await self.latest([tp for tp, o in out.items() if o == LATEST])
            return {tp: earliest.get(tp, latest.get(tp, o)) for tp, o in out.items()}
        if spec.kind == "timestamps":
            _check_covers(name, spec.offsets, tps)
            timestamps = {tp: spec.offsets[tp] for tp in tps}
        else:
            timestamps = {tp: spec.timestamp for tp in tps}
        found = await self.list_offsets(timestamps)
        missing = [tp for tp in tps if found.get(tp, -1) < 0]
        if missing:
            if starting and self.options.starting_by_timestamp_strategy == "error":
                raise KafkaOptionError(
                    f"option '{name}': no offset with a timestamp at or after the one given for "
                    f"{', '.join(str(tp) for tp in missing)} (set startingOffsetsByTimestampStrategy=latest "
                    "to start those partitions at the latest offset)")
            latest = await self.latest(missing)
            found.update(latest)
        return {tp: found[tp] for tp in tps}


def _subscribed(sub: Subscription, topics: Mapping[str, TopicMetadata], require_topics: bool) -> list[TopicPartition]:
    out: list[TopicPartition] = []
    if sub.strategy == "subscribePattern":
        assert sub.pattern is not None
        pattern = re.compile(sub.pattern)
        for name, meta in sorted(topics.items()):
            if pattern.fullmatch(name) and not meta.is_internal and not meta.error_code:
                out.extend(TopicPartition(name, p) for p in meta.partitions)
        return out
    if sub.strategy == "subscribe":
        for name in sub.topics:
            found = topics.get(name)
            if found is None or found.error_code or not found.partitions:
                if require_topics:
                    raise KafkaOptionError(f"topic '{name}' does not exist (option 'subscribe')")
                continue
            out.extend(TopicPartition(name, p) for p in found.partitions)
        return out
    for tp in sub.assigned:
        found = topics.get(tp.topic)
        if found is None or found.error_code or tp.partition not in found.partitions:
            if require_topics:
                if found is None or found.error_code:
                    raise KafkaOptionError(f"topic '{tp.topic}' does not exist (option 'assign')")
                raise KafkaOptionError(f"partition {tp} does not exist (option 'assign')")
            continue
        out.append(tp)
    return out


def _check_covers(name: str, given: Mapping[TopicPartition, int], tps: list[TopicPartition]) -> None:
    """Spark: specific offsets must name every partition read ("Use -1 for latest, -2 for earliest")."""
    missing = sorted(set(tps) - set(given))
    if missing:
        raise KafkaOptionError(
            f"option '{name}' must specify every partition read; missing {', '.join(str(tp) for tp in missing)} "
            "(use -1 for latest, -2 for earliest)")


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None,
                 max_records_per_partition: int | None = None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator.getRanges: one task per partition range, unless
    `minPartitions` asks for more tasks than ranges (large ranges are split in proportion to
    their size) or `maxRecordsPerPartition` caps a task's records."""
    non_empty = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(non_empty) >= min_partitions) and max_records_per_partition is None:
        return non_empty
    total = sum(r.size for r in non_empty)
    out: list[OffsetRange] = []
    for r in non_empty:
        parts = 1
        if min_partitions is not None and len(non_empty) < min_partitions and total:
            parts = max(parts, math.floor(r.size / total * min_partitions + 0.5))  # Scala's Math.round
        if max_records_per_partition is not None:
            parts = max(parts, math.ceil(r.size / max_records_per_partition))
        parts = min(parts, r.size)
        for i in range(parts):
            lo = r.from_offset + r.size * i // parts
            hi = r.from_offset + r.size * (i + 1) // parts
            out.append(OffsetRange(r.topic, r.partition, lo, hi))
    return out

"""The mirror's source clusters, as the data plane reaches them (`ImageSourceClusters`).

`source_for(mirror)` comes from the mirror's configs in the image: one `ClientSourceCluster`
per mirror with the mirror's `security.*` / `sasl.*` / `ssl.*` configs, replaced when
`bootstrap.servers` or any of those changes (an IncrementalAlterConfigs on the MIRROR
resource); the replaced one is closed at the end of the pass that moved its partitions to
the new one. Topic id lookups made together share one source Metadata request, and last
mirrored epoch lookups one DescribeMirrors per mirror (`CoalescingSourceCluster`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Protocol
from uuid import UUID

from kmirror.config.mirror import (
    BOOTSTRAP_SERVERS,
    InvalidMirrorConfig,
    is_mirror_config_key,
    parse_mirror_config,
)
from kmirror.metadata.image import ConfigResource, MetadataImage
from kmirror.metadata.mirror_records import MIRROR_CONFIG_RESOURCE_TYPE
from kmirror.mirror.coalescer import Coalescer
from kmirror.mirror.fetcher.source_endpoint import ClientSourceCluster, SourceCluster, SourceLeader
from kmirror.mirror.source_waits import BoundedSourceCluster, SourceWaits
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.fetcher.endpoint import LeaderEndPoint
from kmirror.replication.fetcher.engine import EpochQuery
from kmirror.replication.outcomes import EpochEndOffset
from kmirror.security.client_config import ClientSecurity
from kmirror.types import TopicPartition

log = logging.getLogger("kmirror.mirror.wiring")  # one logger for the data plane's lines


SourceFactory = Callable[[str, str, ClientSecurity], SourceCluster]
"""(bootstrap.servers, client id, security) -> the mirror's source cluster."""


class BatchedSourceCluster(SourceCluster, Protocol):
    """A source that answers many lookups of one kind with one request."""

    async def topic_ids(self, topics: Sequence[str]) -> dict[str, UUID | None]: ...

    async def last_mirrored_epochs(self, mirror_name: str, tps: Sequence[TopicPartition]
                                   ) -> dict[TopicPartition, int | None]: ...

    async def epoch_end_offsets(self, queries: Sequence[EpochQuery]
                                ) -> dict[TopicPartition, EpochEndOffset | ErrorCode]: ...


class CoalescingSourceCluster:
    """A `SourceCluster` whose topic id lookups made together share one source Metadata
    request, sent after the last of them was made (each partition's PREPARING asks the
    topic id after its DescribeMirrors answer, and still gets an answer from later than
    that), and whose last mirrored epoch lookups made together share one DescribeMirrors
    per mirror. Across a WAN each request is a round trip: a pass over a hundred new
    topics must not cost a hundred of them. Everything else goes to the wrapped source
    unchanged."""

    def __init__(self, inner: BatchedSourceCluster) -> None:
        self.inner = inner
        self.topic_ids: Coalescer[str, UUID | None] = Coalescer(self._lookup)
        self.epochs: Coalescer[tuple[str, TopicPartition], int | None] = Coalescer(self._epochs)
        self.epoch_ends: Coalescer[EpochQuery, EpochEndOffset | ErrorCode] = Coalescer(self._epoch_ends)

    async def _lookup(self, topics: list[str]) -> list[UUID | None]:
        answers = await self.inner.topic_ids(topics)
        return [answers[topic] for topic in topics]

    async def _epochs(self, asked: list[tuple[str, TopicPartition]]) -> list[int | None]:
        """One DescribeMirrors per mirror name (a source serves one mirror: one request)."""
        by_mirror: dict[str, list[TopicPartition]] = {}
        for mirror_name, tp in asked:
            by_mirror.setdefault(mirror_name, []).append(tp)
        answers = {name: await self.inner.last_mirrored_epochs(name, tps) for name, tps in by_mirror.items()}
        return [answers[mirror_name][tp] for mirror_name, tp in asked]

    async def _epoch_ends(self, queries: list[EpochQuery]) -> list[EpochEndOffset | ErrorCode]:
        """One OffsetsForLeaderEpoch per source leader (a partition asks one epoch at a time)."""
        answers = await self.inner.epoch_end_offsets(queries)
        return [answers.get(q.topic_partition, ErrorCode.unknown_server_error) for q in queries]

    async def topic_id(self, topic: str) -> UUID | None:
        return await self.topic_ids.submit(topic)

    async def epoch_end_offset(self, query: EpochQuery) -> EpochEndOffset | ErrorCode:
        return await self.epoch_ends.submit(query)

    async def cluster_id(self, refresh: bool = False) -> str:
        return await self.inner.cluster_id(refresh)

    async def partition_leader(self, tp: TopicPartition, refresh: bool = False) -> SourceLeader | None:
        return await self.inner.partition_leader(tp, refresh)

    def endpoint(self, leader: SourceLeader, client_id: str,
                 on_leader_change: Callable[[set[TopicPartition]], None]) -> LeaderEndPoint:
        return self.inner.endpoint(leader, client_id, on_leader_change)

    async def last_mirrored_epoch(self, mirror_name: str, tp: TopicPartition) -> int | None:
        return await self.epochs.submit((mirror_name, tp))

    async def high_watermarks(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        return await self.inner.high_watermarks(tps)

    async def close(self) -> None:
        await self.inner.close()


def client_source_cluster(bootstrap: str, client_id: str, security: ClientSecurity, *,
                          request_timeout_ms: int = 30_000) -> SourceCluster:
    """`request_timeout_ms`: the broker's `request.timeout.ms` (KIP-1279)."""
    return CoalescingSourceCluster(ClientSourceCluster(bootstrap, client_id=client_id, security=security,
                                                       request_timeout_ms=request_timeout_ms))


def mirror_source_configs(image: MetadataImage | None, mirror_name: str) -> dict[str, str] | None:
    """The mirror's operator configs from the image (None: no such mirror)."""
    values = image.configs.get(ConfigResource(MIRROR_CONFIG_RESOURCE_TYPE, mirror_name)) if image else None
    if not values:
        return None
    return {k: v for k, v in values.items() if v is not None and is_mirror_config_key(k)}


class ImageSourceClusters:
    """`source_for(mirror_name)`: the mirror's source cluster, from its configs in the image."""

    def __init__(self, broker_id: int, image: Callable[[], MetadataImage | None],
                 factory: SourceFactory | None = None, waits: SourceWaits | None = None) -> None:
        self.broker_id = broker_id
        self.image = image
        self.factory = factory or client_source_cluster
        self.waits = waits
        self.sources: dict[str, tuple[tuple[tuple[str, str], ...], SourceCluster]] = {}
        """mirror -> (its source connection configs, the source connected with them)."""
        self.retired: list[SourceCluster] = []
        self._invalid: dict[str, str] = {}
        self._answered: dict[str, tuple[MetadataImage | None, SourceCluster | None]] = {}
        """mirror -> (the image last asked about, the answer): a mirror's manager asks once per
        partition per pass, and the answer depends on the image's configs alone."""

    def __call__(self, mirror_name: str) -> SourceCluster | None:
        image = self.image()
        answered = self._answered.get(mirror_name)
        if answered is not None and answered[0] is image:
            return answered[1]
        source = self._source(image, mirror_name)
        self._answered[mirror_name] = (image, source)
        return source

    def _source(self, image: MetadataImage | None, mirror_name: str) -> SourceCluster | None:
        configs = mirror_source_configs(image, mirror_name)
        parsed = parse_mirror_config(configs) if configs is not None else None
        if parsed is None or isinstance(parsed, InvalidMirrorConfig):
            if isinstance(parsed, InvalidMirrorConfig) and self._invalid.get(mirror_name) != parsed.message:
                log.warning("mirror %s has no usable source connection: %s", mirror_name, parsed.message)
                self._invalid[mirror_name] = parsed.message
            return None
        self._invalid.pop(mirror_name, None)
        bootstrap = configs[BOOTSTRAP_SERVERS] if configs else ""
        identity = tuple(sorted(parsed.source_connection.items()))
        current = self.sources.get(mirror_name)
        if current is not None and current[0] == identity:
            return current[1]
        if current is not None:
            self.retired.append(current[1])
        source = self.factory(bootstrap, f"broker-{self.broker_id}-mirror-{mirror_name}-metadata",
                              parsed.source_security)
        if self.waits is not None:
            source = BoundedSourceCluster(source, self.waits)
        self.sources[mirror_name] = (identity, source)
        return source

    async def close_retired(self, in_use: Callable[[SourceCluster], bool]) -> None:
        """Close the replaced source connections nothing uses any more (`in_use`: a
        partition still fetches through it); the others are tried again next pass."""
        keep: list[SourceCluster] = []
        for source in self.retired:
            if in_use(source):
                keep.append(source)
                continue
            try:
                await source.close()
            except Exception as exc:  # a broken connection is closed as far as it can be
                log.debug("closing a replaced mirror source connection: %r", exc)
        self.retired = keep

    async def close(self) -> None:
        sources = [s for _, s in self.sources.values()] + self.retired
        self.sources, self.retired, self._answered = {}, [], {}
        for source in sources:
            with contextlib.suppress(Exception):
                await source.close()

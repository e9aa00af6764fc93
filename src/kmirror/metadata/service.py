"""`MetadataService`: the single active controller of this node.

Every operation runs the sans-IO controller logic under one lock (single writer), makes the
records durable in the metadata log (`MetadataLogStore.append`: written and flushed before it
returns), replays them into a new image, notifies subscribers, then answers. A failed append
leaves the image untouched and raises (a broken disk is not an expected outcome).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from kmirror.config.server import ServerConfig
from kmirror.metadata.config_description import DescribeConfigsResult, describe_configs
from kmirror.metadata.controller import acls as acl_ops
from kmirror.metadata.controller import configs as config_ops
from kmirror.metadata.controller import topics as topic_ops
from kmirror.metadata.controller.brokers import register_broker
from kmirror.metadata.controller.features import bootstrap_records
from kmirror.metadata.controller.producer_ids import allocate_producer_ids
from kmirror.metadata.controller.result import ApiError, ControllerResult, Rng
from kmirror.metadata.image import EMPTY_IMAGE, AclBinding, ConfigResource, MetadataImage, TopicImage
from kmirror.metadata.records import BrokerEndpoint, Record, decode, encode
from kmirror.ports import Clock

log = logging.getLogger(__name__)

ImageListener = Callable[[MetadataImage | None, MetadataImage], None]


class MetadataLogStore(Protocol):
    """Durable storage of encoded metadata records (the `__cluster_metadata` log)."""

    def read_all(self) -> list[tuple[int, bytes]]:
        """Every stored `(offset, encoded record)` in offset order."""
        ...

    def append(self, encoded: list[bytes]) -> int:
        """Store the records durably (flushed) and return the offset of the last one."""
        ...

    def bind(self, cluster_id: str, node_id: int) -> None:
        """Called once the cluster id is known: record or check the node's identity (meta.properties)."""
        ...


class MetadataOperationError(RuntimeError):
    """An operation that cannot succeed for a reason callers map to an error code."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message or error.code.name)
        self.error = error


def new_cluster_id(rng: Rng) -> str:
    """Kafka's Uuid.randomUuid().toString(): URL-safe base64 of 16 bytes, no padding."""
    raw = uuid.UUID(int=rng.getrandbits(128), version=4).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class MetadataService:
    def __init__(self, config: ServerConfig, store: MetadataLogStore, clock: Clock, rng: Rng) -> None:
        self._config = config
        self._store = store
        self._clock = clock
        self._rng = rng
        self._image = EMPTY_IMAGE
        self._listeners: list[ImageListener] = []
        self._lock = asyncio.Lock()
        self._started = False
        self.broker_epoch = -1

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Replay the stored log; format it when empty; register this node as a broker."""
        entries = self._store.read_all()
        if entries:
            self._image = EMPTY_IMAGE.apply((decode(data) for _, data in entries), entries[-1][0])
        async with self._lock:
            if self._image.cluster_id is None:
                cluster_id = self._config.cluster_id or new_cluster_id(self._rng)
                self._commit(bootstrap_records(cluster_id))
            elif self._config.cluster_id is not None and self._config.cluster_id != self._image.cluster_id:
                raise MetadataOperationError(
                    ApiError(
                        ErrorCode.inconsistent_cluster_id,
                        f"cluster.id {self._config.cluster_id} does not match the metadata log's {self._image.cluster_id}",
                    )
                )
            assert self._image.cluster_id is not None
            self._store.bind(self._image.cluster_id, self._config.node_id)
            if self._config.is_broker:
                endpoints = tuple(
                    BrokerEndpoint(lst.name, lst.host, lst.port, 0) for lst in self._config.advertised_listeners
                )
                incarnation = uuid.UUID(int=self._rng.getrandbits(128), version=4)
                result = register_broker(self._image, self._config.node_id, incarnation, endpoints, self._config.broker_rack)
                self._commit(result.records)
                assert result.response is not None
                self.broker_epoch = result.response
        self._started = True

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def config(self) -> ServerConfig:
        return self._config

    @property
    def controller_id(self) -> int:
        """The active controller: this node (one controller for now)."""
        return self._config.node_id

    def subscribe(self, callback: ImageListener) -> Callable[[], None]:
        """`callback(old_image, new_image)` after every change; returns an unsubscribe function."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    # -- writing ------------------------------------------------------------------------------

    def _commit(self, records: Sequence[Record]) -> None:
        if not records:
            return
        last_offset = self._store.append([encode(r) for r in records])
        old = self._image
        new = old.apply(records, last_offset)
        self._image = new
        for listener in list(self._listeners):
            try:
                listener(old, new)
            except Exception:  # a subscriber's bug must not undo a durable change
                log.exception("metadata listener %r failed", listener)

    async def _run(self, op: Callable[[MetadataImage], ControllerResult[Any]]) -> Any:
        async with self._lock:
            result = op(self._image)
            self._commit(result.records)
            return result.response

    # -- topics -------------------------------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[topic_ops.CreatableTopic], *, validate_only: bool = False
    ) -> list[topic_ops.CreateTopicResult]:
        result: list[topic_ops.CreateTopicResult] = await self._run(
            lambda image: topic_ops.create_topics(image, topics, self._config, self._rng, validate_only=validate_only)
        )
        return result

    async def delete_topics(
        self, names: Sequence[str] = (), topic_ids: Sequence[uuid.UUID] = ()
    ) -> list[topic_ops.DeleteTopicResult]:
        result: list[topic_ops.DeleteTopicResult] = await self._run(
            lambda image: topic_ops.delete_topics(image, names, topic_ids, self._config)
        )
        return result

    async def create_partitions(
        self, topics: Sequence[topic_ops.CreatePartitionsTopic], *, validate_only: bool = False
    ) -> list[topic_ops.CreatePartitionsResult]:
        result: list[topic_ops.CreatePartitionsResult] = await self._run(
            lambda image: topic_ops.create_partitions(image, topics, self._rng, validate_only=validate_only)
        )
        return result

    async def ensure_internal_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str] | None = None
    ) -> TopicImage:
        """The internal topic, created if missing. Raises MetadataOperationError (e.g.
        INVALID_REPLICATION_FACTOR when fewer brokers are live: callers answer
        COORDINATOR_NOT_AVAILABLE, as Kafka does)."""
        existing = self._image.topics.get(name)
        if existing is not None:
            return existing
        spec = topic_ops.CreatableTopic(name, num_partitions, replication_factor, configs=dict(configs or {}))
        results = await self.create_topics([spec])
        topic = self._image.topics.get(name)
        if topic is not None:
            return topic
        raise MetadataOperationError(results[0].error)

    # -- configs ------------------------------------------------------------------------------

    def describe_configs(self, resource: ConfigResource, keys: Sequence[str] | None = None) -> DescribeConfigsResult:
        return describe_configs(self._image, self._config, resource, keys)

    async def incremental_alter_configs(
        self,
        changes: Sequence[tuple[ConfigResource, Sequence[config_ops.AlterableConfig]]],
        *,
        validate_only: bool = False,
    ) -> list[config_ops.AlterConfigsResult]:
        result: list[config_ops.AlterConfigsResult] = await self._run(
            lambda image: config_ops.incremental_alter_configs(image, changes, validate_only=validate_only)
        )
        return result

    async def alter_configs(
        self,
        changes: Sequence[tuple[ConfigResource, Mapping[str, str | None]]],
        *,
        validate_only: bool = False,
    ) -> list[config_ops.AlterConfigsResult]:
        result: list[config_ops.AlterConfigsResult] = await self._run(
            lambda image: config_ops.alter_configs(image, changes, validate_only=validate_only)
        )
        return result

    # -- ACLs ---------------------------------------------------------------------------------

    async def create_acls(self, creations: Sequence[acl_ops.AclCreation]) -> list[ApiError]:
        result: list[ApiError] = await self._run(lambda image: acl_ops.create_acls(image, creations, self._rng))
        return result

    async def delete_acls(self, filters: Sequence[acl_ops.AclFilter]) -> list[acl_ops.DeleteAclsResult]:
        result: list[acl_ops.DeleteAclsResult] = await self._run(lambda image: acl_ops.delete_acls(image, filters))
        return result

    def describe_acls(self, acl_filter: acl_ops.AclFilter) -> list[AclBinding] | ApiError:
        err = acl_ops.validate_filter(acl_filter)
        return err if err is not None else acl_ops.describe_acls(self._image, acl_filter)

    # -- producer ids -------------------------------------------------------------------------

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int = -1) -> tuple[int, int]:
        """A fresh block `(first_producer_id, size)`, durable before it is handed out."""
        response = await self._run(lambda image: allocate_producer_ids(image, broker_id, broker_epoch))
        if isinstance(response, ApiError):
            raise MetadataOperationError(response)
        first, size = response
        return int(first), int(size)

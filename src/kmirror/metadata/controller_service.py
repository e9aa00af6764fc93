"""`MetadataService`: the single active controller (Kafka's `QuorumController`) of a node with
the controller role, and the metadata image of its broker when the node is combined.

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, NamedTuple, TypeVar

from kio.schema.errors import ErrorCode

from kmirror.config.group import DEFAULT_BOUNDS
from kmirror.config.server import ServerConfig
from kmirror.kip1279.membership import Rejected, SetMirrorName
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.metadata.cluster_control import ClusterControl
from kmirror.metadata.config_description import DescribeConfigsResult, describe_configs
from kmirror.metadata.controller import acls as acl_ops
from kmirror.metadata.controller import client_quotas as quota_ops
from kmirror.metadata.controller import configs as config_ops
from kmirror.metadata.controller import mirrors as mirror_ops
from kmirror.metadata.controller import scram as scram_ops
from kmirror.metadata.controller import topics as topic_ops
from kmirror.metadata.controller.brokers import BrokerHeartbeatManager, register_broker
from kmirror.metadata.controller.features import bootstrap_records
from kmirror.metadata.controller.producer_ids import allocate_producer_ids
from kmirror.metadata.controller.result import ApiError, ControllerResult, MetadataOperationError, Rng
from kmirror.metadata.image import EMPTY_IMAGE, AclBinding, ConfigResource, MetadataImage, TopicImage
from kmirror.metadata.internal_topics import ensure_internal_topic
from kmirror.metadata.quorum_state import QuorumObservers
from kmirror.metadata.records import BrokerEndpoint, Record, encode
from kmirror.metadata.snapshot_service import MetadataLogStore, MetadataSnapshots, SnapshotId
from kmirror.ports import Clock

log = logging.getLogger(__name__)

R = TypeVar("R")


def _response(result: ControllerResult[R]) -> R:
    """Every controller operation answers: a result without a response is a broken invariant."""
    if result.response is None:
        raise AssertionError(f"controller operation answered nothing ({len(result.records)} records)")
    return result.response

ImageListener = Callable[[MetadataImage | None, MetadataImage], None]


# Past this many partitions asked for by one CreateTopics or CreatePartitions, the controller
# works on a worker thread (`MetadataService._run`).
LARGE_OPERATION_PARTITIONS = 100


class _Written(NamedTuple):
    encoded: list[bytes]
    last_offset: int
    image: MetadataImage


def _partitions_asked(counts: Iterable[int | None]) -> int:
    """The partitions a request asks for; nonsense counts are refused by the operation itself."""
    return sum(c for c in counts if isinstance(c, int) and 0 < c)


def new_cluster_id(rng: Rng) -> str:
    """Kafka's Uuid.randomUuid().toString(): URL-safe base64 of 16 bytes, no padding."""
    raw = uuid.UUID(int=rng.getrandbits(128), version=4).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class MetadataService(ClusterControl):
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
        self.heartbeats = BrokerHeartbeatManager(int(config.values.get("broker.session.timeout.ms", 9000)))
        self._entries: list[tuple[int, bytes]] = []
        """The stored log from its start offset, served to brokers (Fetch)."""
        self._changed = asyncio.Event()
        self.snapshots = MetadataSnapshots(config, store, clock)
        self.observers = QuorumObservers()

    forwarding: Literal[False] = False  # admin writes run here; a broker-only node forwards them instead

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Replay the stored log; format it when empty; register this node as a broker."""
        loaded, self._image = self.snapshots.load()
        self._entries = loaded.entries
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
                result = register_broker(
                    self._image, self._config.node_id, incarnation, endpoints, self._config.broker_rack, self.heartbeats
                )
                self._commit(result.records)
                assert result.response is not None
                self.broker_epoch = result.response
                # the co-located broker has replayed everything: its first heartbeat unfences it
                beat = self._heartbeat_result(self._config.node_id, self.broker_epoch, self._image.offset, False, False)
                self._commit(beat.records)
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
        if records:
            self._announce(self._write(self._image, records))

    def _write(self, image: MetadataImage, records: Sequence[Record]) -> _Written:
        """Encode, append durably and replay `records` onto `image`: no loop state is touched,
        so a large operation runs this on a worker thread (under the lock: single writer)."""
        encoded = [encode(r) for r in records]
        last_offset = self._store.append(encoded)
        return _Written(encoded, last_offset, image.apply(records, last_offset))

    def _announce(self, written: _Written) -> None:
        first = written.last_offset - len(written.encoded) + 1
        self._entries.extend((first + i, data) for i, data in enumerate(written.encoded))
        self.snapshots.appended(written.encoded)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        old, self._image = self._image, written.image
        for listener in list(self._listeners):
            try:
                listener(old, written.image)
            except Exception:  # a subscriber's bug must not undo a durable change
                log.exception("metadata listener %r failed", listener)

    async def _run(self, op: Callable[[MetadataImage], ControllerResult[R]], *, large: bool = False) -> R:
        """Run `op` and commit its records. A `large` operation (a creation of thousands of
        partitions: placement, encoding and replay take seconds of CPU) computes and writes on a
        worker thread, so the event loop keeps serving every other client meanwhile; the image
        it starts from cannot change under it, as every commit holds the lock."""
        async with self._lock:
            if not large:
                result = op(self._image)
                self._commit(result.records)
                return _response(result)
            image = self._image
            result, written = await asyncio.to_thread(self._compute_and_write, op, image)
            if written is not None:
                self._announce(written)
            return _response(result)

    async def snapshot_if_due(self) -> None:
        """A periodic task: snapshot the image when due (`MetadataSnapshots`), under the lock,
        so that the snapshot is of the whole log, and keep in memory only the log from its new
        start. Brokers below it fetch the snapshot (FetchSnapshot)."""
        async with self._lock:
            log_start = await self.snapshots.snapshot_if_due(self._image)
        if log_start is not None and self._entries and self._entries[0][0] < log_start:
            del self._entries[: log_start - self._entries[0][0]]

    def _compute_and_write(self, op: Callable[[MetadataImage], ControllerResult[R]],
                           image: MetadataImage) -> tuple[ControllerResult[R], _Written | None]:
        result = op(image)
        return result, (self._write(image, result.records) if result.records else None)

    # -- topics -------------------------------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[topic_ops.CreatableTopic], *, validate_only: bool = False
    ) -> list[topic_ops.CreateTopicResult]:
        result: list[topic_ops.CreateTopicResult] = await self._run(
            lambda image: topic_ops.create_topics(image, topics, self._config, self._rng, validate_only=validate_only),
            large=_partitions_asked(max(t.num_partitions, len(t.assignments)) for t in topics) > LARGE_OPERATION_PARTITIONS,
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
            lambda image: topic_ops.create_partitions(image, topics, self._config, self._rng, validate_only=validate_only),
            large=_partitions_asked(t.count for t in topics) > LARGE_OPERATION_PARTITIONS,
        )
        return result

    async def ensure_internal_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str] | None = None
    ) -> TopicImage:
        return await ensure_internal_topic(self, name, num_partitions, replication_factor, configs)

    # -- configs ------------------------------------------------------------------------------

    def describe_configs(self, resource: ConfigResource, keys: Sequence[str] | None = None) -> DescribeConfigsResult:
        return describe_configs(self._image, self._config, resource, keys)

    def _group_bounds(self) -> dict[str, int]:
        """This controller's `group.consumer.{min,max}.*` (GROUP configs must lie within them)."""
        return {key: int(self._config.get(key)) for key in DEFAULT_BOUNDS if key in self._config.values}

    async def incremental_alter_configs(
        self,
        changes: Sequence[tuple[ConfigResource, Sequence[config_ops.AlterableConfig]]],
        *,
        validate_only: bool = False,
    ) -> list[config_ops.AlterConfigsResult]:
        result: list[config_ops.AlterConfigsResult] = await self._run(
            lambda image: config_ops.incremental_alter_configs(image, changes, validate_only=validate_only,
                                                               group_bounds=self._group_bounds())
        )
        return result

    async def alter_configs(
        self,
        changes: Sequence[tuple[ConfigResource, Mapping[str, str | None]]],
        *,
        validate_only: bool = False,
    ) -> list[config_ops.AlterConfigsResult]:
        result: list[config_ops.AlterConfigsResult] = await self._run(
            lambda image: config_ops.alter_configs(image, changes, validate_only=validate_only,
                                                   group_bounds=self._group_bounds())
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

    # -- SCRAM credentials (KIP-554) ------------------------------------------------------------

    async def alter_user_scram_credentials(
        self, deletions: Sequence[scram_ops.ScramDeletion], upsertions: Sequence[scram_ops.ScramUpsertion]
    ) -> list[scram_ops.ScramAlterationResult]:
        result: list[scram_ops.ScramAlterationResult] = await self._run(
            lambda image: scram_ops.alter_credentials(image, deletions, upsertions))
        return result

    def describe_user_scram_credentials(self, users: Sequence[str] | None) -> list[scram_ops.ScramDescription]:
        return scram_ops.describe_credentials(self._image, users)

    # -- client quotas ------------------------------------------------------------------------

    async def alter_client_quotas(
        self, alterations: Sequence[quota_ops.QuotaAlteration], *, validate_only: bool = False
    ) -> list[ApiError]:
        result: list[ApiError] = await self._run(
            lambda image: quota_ops.alter_client_quotas(image, alterations, validate_only=validate_only))
        return result

    def describe_client_quotas(
        self, components: Sequence[quota_ops.QuotaFilterComponent], strict: bool
    ) -> quota_ops.DescribedQuotas:
        return quota_ops.describe_client_quotas(self._image, components, strict)

    # -- features and mirrors (KIP-1279) -------------------------------------------------------

    async def update_features(
        self, updates: Sequence[mirror_ops.FeatureUpdate], supported: Mapping[str, tuple[int, int]],
        *, validate_only: bool = False,
    ) -> ApiError:
        result: ApiError = await self._run(
            lambda image: mirror_ops.update_features(image, updates, supported, validate_only=validate_only)
        )
        return result

    async def create_mirror(self, name: str, configs: Mapping[str, str | None]) -> ApiError:
        result: ApiError = await self._run(
            lambda image: mirror_ops.create_mirror(image, name, configs, self._config, self._rng))
        return result

    async def set_mirror_source_cluster_id(self, name: str, cluster_id: str) -> ApiError:
        result: ApiError = await self._run(lambda image: mirror_ops.set_source_cluster_id(image, name, cluster_id))
        return result

    async def delete_mirror(
        self, name: str, partition_states: Mapping[str, Iterable[MirrorPartitionState]]
    ) -> ApiError:
        result: ApiError = await self._run(lambda image: mirror_ops.delete_mirror(image, name, partition_states))
        return result

    async def set_mirror_names(self, decisions: Mapping[str, SetMirrorName | Rejected]) -> dict[str, ApiError]:
        result: dict[str, ApiError] = await self._run(lambda image: mirror_ops.set_mirror_names(image, decisions))
        return result

    async def bump_leader_epochs(
        self, bumps: Sequence[mirror_ops.EpochBump], min_producer_id: int = -1
    ) -> list[mirror_ops.EpochBumpResult]:
        result: list[mirror_ops.EpochBumpResult] = await self._run(
            lambda image: mirror_ops.bump_leader_epochs(image, bumps, min_producer_id),
            large=len(bumps) > LARGE_OPERATION_PARTITIONS,  # a failover of thousands of partitions
        )
        return result

    # -- producer ids -------------------------------------------------------------------------

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int = -1) -> tuple[int, int]:
        """A fresh block `(first_producer_id, size)`, durable before it is handed out."""
        response = await self._run(lambda image: allocate_producer_ids(image, broker_id, broker_epoch))
        if isinstance(response, ApiError):
            raise MetadataOperationError(response)
        first, size = response
        return int(first), int(size)

    # -- the metadata log, as the controller serves it to brokers ------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._image.offset + 1

    @property
    def log_start_offset(self) -> int:
        return self._store.log_start_offset

    @property
    def latest_snapshot(self) -> SnapshotId | None:
        return self._store.latest_snapshot

    def read_snapshot(self, snapshot: SnapshotId, position: int, max_bytes: int) -> tuple[int, bytes] | None:
        return self._store.read_snapshot(snapshot, position, max_bytes)

    def observer_fetched(self, replica_id: int, fetch_offset: int) -> None:
        """A broker's fetch of the metadata log (DescribeQuorum reports its position). Only
        registered brokers are tracked, so a client naming made-up ids grows nothing."""
        if replica_id in self._image.brokers:
            self.observers.fetched(replica_id, fetch_offset, self.log_end_offset, self._clock.now_ms())

    def read_entries(self, fetch_offset: int, max_records: int = 1000) -> list[tuple[int, bytes]]:
        """Stored `(offset, encoded record)` from `fetch_offset` (offsets are contiguous from
        the log start offset; nothing below it)."""
        if not self._entries or fetch_offset < self._entries[0][0]:
            return []
        start = fetch_offset - self._entries[0][0]
        return self._entries[start : start + max_records]

    async def wait_for_records(self, fetch_offset: int, max_wait_ms: int) -> None:
        """Return once the log extends past `fetch_offset` or `max_wait_ms` passes (long poll)."""
        if self.log_end_offset > fetch_offset or max_wait_ms <= 0:
            return
        try:
            async with asyncio.timeout(max_wait_ms / 1000):
                await self._changed.wait()
        except TimeoutError:
            pass

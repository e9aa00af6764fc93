"""`BrokerMetadataService`: the metadata of a broker without the controller role (Kafka's
`BrokerMetadataListener` + `MetadataPublisher` + forwarding manager).

- Replication: a fetch loop reads `__cluster_metadata-0` from the active controller (Fetch on the
  controller listener, long poll), appends what it gets to the local copy in this node's log dir
  (flushed), replays it into the image and notifies subscribers. A restart replays the local copy
  (its latest snapshot, then the log after it) first, then catches up from its end offset. A
  broker whose log ends below the controller's log start is answered with the controller's
  latest snapshot id: it downloads that snapshot (FetchSnapshot), replaces its log with it and
  goes on from its end offset. It snapshots its own copy as the controller does (`MetadataSnapshots`).
- Writes: admin requests are forwarded unchanged to the controller (`forward`); the answer is
  given once the local image has caught up with the controller's log end offset seen after
  the write, or after `catch_up_timeout_ms`. `create_topics` and `allocate_producer_ids`,
  which other broker services call with domain values, are translated to CreateTopics and
  AllocateProducerIds requests.
The read-side interface (`image`, `subscribe`, `describe_configs`, `describe_acls`) is the one
`MetadataService` offers, so handlers do not care where the controller runs.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

from kio.schema.errors import ErrorCode

from kmirror.client.protocol import decode_response, encode_request
from kmirror.config.server import ServerConfig
from kmirror.metadata.config_description import DescribeConfigsResult, describe_configs
from kmirror.metadata.controller import acls as acl_ops
from kmirror.metadata.controller import client_quotas as quota_ops
from kmirror.metadata.controller import scram as scram_ops
from kmirror.metadata.controller import topics as topic_ops
from kmirror.metadata.controller.result import ApiError, MetadataOperationError
from kmirror.metadata.controller_service import ImageListener
from kmirror.metadata.image import EMPTY_IMAGE, AclBinding, ConfigResource, MetadataImage, TopicImage
from kmirror.metadata.internal_topics import ensure_internal_topic
from kmirror.metadata.records import decode
from kmirror.metadata.snapshot import batch_entries_by_epoch
from kmirror.metadata.snapshot_service import MetadataLogStore, MetadataSnapshots, SnapshotId, snapshot_image
from kmirror.ports import Clock
from kmirror.protocol.entities import build, has_field, nested
from kmirror.protocol.envelope import ENVELOPE, ForwardedPrincipal, encode_principal, host_address

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
FETCH_MAX_WAIT_MS = 500
SNAPSHOT_CHUNK_BYTES = 8 * 1024 * 1024


class ControllerClient(Protocol):
    """`runtime.controller_channel.ControllerChannel`."""

    async def connection(self) -> Any: ...

    async def send(self, api_key: int, timeout_ms: int | None = None, **fields: Any) -> Any: ...

    async def forward(self, request: Any, timeout_ms: int | None = None) -> Any: ...


class BrokerMetadataService:
    forwarding: Literal[True] = True  # admin writes go to the controller (`forward`)

    def __init__(
        self,
        config: ServerConfig,
        store: MetadataLogStore,
        fetch_channel: ControllerClient,
        write_channel: ControllerClient,
        clock: Clock,
        *,
        catch_up_timeout_ms: int = 5000,
        observer_id: int | None = None,
    ) -> None:
        """`observer_id`: the replica id its fetches name, by default the node id; -1 (an
        anonymous observer) for the broker role of a node that is also a voter, whose id names
        its controller's own fetches."""
        self._config = config
        self._observer_id = config.node_id if observer_id is None else observer_id
        self._clock = clock
        self._store = store
        self._fetch_channel = fetch_channel
        self._channel = write_channel
        self._catch_up_timeout_ms = catch_up_timeout_ms
        self._image = EMPTY_IMAGE
        self._listeners: list[ImageListener] = []
        self._controller_end_offset = 0
        self._log_lock = asyncio.Lock()
        """Fetch answers are applied one at a time (the loop's and a catch-up's may cross), and
        no snapshot is written meanwhile."""
        self._task: asyncio.Task[None] | None = None
        self.snapshots = MetadataSnapshots(config, store, clock)
        self.broker_epoch = -1
        # Clients are told a broker is the controller (KRaft: controllers are not reachable by
        # clients; any broker forwards). This one forwards, so it names itself.
        self.controller_id = config.node_id

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, timeout_ms: int = 60_000) -> None:
        """Replay the local copy, then catch up with the active controller before returning. No
        controller may answer yet (a quorum starting with this node among its voters elects its
        leader meanwhile): fetches are retried until `timeout_ms`."""
        self._image = self.snapshots.load()[1]
        deadline_ms = self._clock.monotonic_ms() + timeout_ms
        fetched = False
        while not fetched or self._image.offset + 1 < self._controller_end_offset or self._image.cluster_id is None:
            try:
                await self.fetch_once(0)
                fetched = True
            except Exception as exc:
                if self._clock.monotonic_ms() > deadline_ms:
                    raise
                log.info("Waiting for the active controller: %s", exc)
                await asyncio.sleep(0.2)
            if self._clock.monotonic_ms() > deadline_ms:
                raise MetadataOperationError(ApiError(ErrorCode.request_timed_out, "metadata log catch-up timed out"))
        assert self._image.cluster_id is not None
        self._store.bind(self._image.cluster_id, self._config.node_id)
        self._task = asyncio.get_running_loop().create_task(self._fetch_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _fetch_loop(self) -> None:
        while True:
            try:
                await self.fetch_once(FETCH_MAX_WAIT_MS)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the controller is away: keep the image, retry
                log.warning("metadata fetch from the controller failed: %s", exc)
                await asyncio.sleep(0.5)

    async def fetch_once(self, max_wait_ms: int, channel: ControllerClient | None = None) -> int:
        """One metadata fetch (on `channel`, by default the fetch loop's), applied; the
        controller's high watermark it answered."""
        channel = channel or self._fetch_channel
        fetch_offset = self._image.offset + 1
        request_type = await _request_type(channel, 1)
        partition = build(
            nested(request_type, "FetchPartition"),
            partition=0,
            fetch_offset=fetch_offset,
            partition_max_bytes=8 * 1024 * 1024,
            current_leader_epoch=-1,
            last_fetched_epoch=-1,
            log_start_offset=-1,
        )
        topic = build(
            nested(request_type, "FetchTopic"), topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=(partition,)
        )
        # an observer names itself (KRaft), unless its id is its node's voter's (then -1)
        observer: dict[str, Any] = {"replica_id": self._observer_id}
        if has_field(request_type, "replica_state"):  # v15+
            observer["replica_state"] = build(nested(request_type, "ReplicaState"), replica_id=self._observer_id,
                                              replica_epoch=self.broker_epoch)
        response = await channel.send(
            1,
            **observer,
            max_wait=datetime.timedelta(milliseconds=max_wait_ms),
            min_bytes=1,
            max_bytes=8 * 1024 * 1024,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(topic,),
            forgotten_topics_data=(),
            rack_id="",
        )
        high_watermark = 0
        async with self._log_lock:
            for topic in response.responses:
                for p in topic.partitions:
                    if p.error_code != ErrorCode.none:
                        raise MetadataOperationError(ApiError(p.error_code, "metadata fetch"))
                    high_watermark = int(p.high_watermark)
                    self._controller_end_offset = max(self._controller_end_offset, high_watermark)
                    snapshot = getattr(p, "snapshot_id", None)
                    if snapshot is not None and int(snapshot.end_offset) > self._image.offset + 1:
                        await self._install_snapshot(SnapshotId(int(snapshot.end_offset), int(snapshot.epoch)))
                    elif p.records:
                        self._append(bytes(p.records))
            await self.snapshots.snapshot_if_due(self._image)
        return high_watermark

    async def _install_snapshot(self, snapshot: SnapshotId) -> None:
        """Download the controller's snapshot `snapshot` (FetchSnapshot, in chunks), make it
        this node's whole log and its image."""
        data = await download_snapshot(self._fetch_channel, snapshot)
        if data is None:
            return
        records = self._store.install_snapshot(snapshot, data)
        self.snapshots.installed()
        old = self._image
        self._image = snapshot_image(records, snapshot.end_offset)
        log.info("Loaded the controller's metadata snapshot at offset %d (%d bytes): this node's metadata log was "
                 "behind the controller's log start", snapshot.end_offset, len(data))
        self._notify(old)

    def _notify(self, old: MetadataImage) -> None:
        for listener in list(self._listeners):
            try:
                listener(old, self._image)
            except Exception:
                log.exception("metadata listener %r failed", listener)

    def _append(self, data: bytes) -> None:
        """Store the fetched batches past this log's end with their leader epochs, then replay
        them (another fetch's answer may have brought some of them already)."""
        encoded: list[bytes] = []
        last = self._image.offset
        for epoch, entries in batch_entries_by_epoch(data):
            entries = [(offset, value) for offset, value in entries if offset > last]
            if not entries:
                continue
            if entries[0][0] != last + 1:
                raise MetadataOperationError(ApiError(ErrorCode.corrupt_message, "gap in the replicated metadata log"))
            last = self._store.append([d for _, d in entries], max(epoch, 0))
            if last != entries[-1][0]:
                raise RuntimeError(f"local metadata log at {last}, controller at {entries[-1][0]}")
            encoded.extend(d for _, d in entries)
        if not encoded:
            return
        self.snapshots.appended(encoded)
        old = self._image
        self._image = old.apply((decode(d) for d in encoded), last)
        self._notify(old)

    async def wait_caught_up(self, timeout_ms: int | None = None) -> bool:
        """Fetch, without waiting, what the controller has committed when this is called (a
        write this node forwarded is among it), on the write channel: the fetch loop's
        connection may be holding a long poll. False if that cannot be done in `timeout_ms`."""
        deadline_ms = self._clock.monotonic_ms() + (timeout_ms if timeout_ms is not None else self._catch_up_timeout_ms)
        target = -1
        while self._clock.monotonic_ms() < deadline_ms:
            try:
                async with asyncio.timeout(max(0.0, (deadline_ms - self._clock.monotonic_ms()) / 1000)):
                    high_watermark = await self.fetch_once(0, self._channel)
            except TimeoutError:
                return False
            except Exception as exc:  # the controller is away or moving: try again until the deadline
                log.debug("metadata catch-up fetch failed: %s", exc)
                await asyncio.sleep(0.05)
                continue
            target = max(target, high_watermark)
            if self._image.offset + 1 >= target:
                return True
        return False

    # -- read side (as MetadataService) ---------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def config(self) -> ServerConfig:
        return self._config

    def subscribe(self, callback: ImageListener) -> Callable[[], None]:
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def describe_configs(self, resource: ConfigResource, keys: Sequence[str] | None = None) -> DescribeConfigsResult:
        return describe_configs(self._image, self._config, resource, keys)

    def describe_user_scram_credentials(self, users: Sequence[str] | None) -> list[scram_ops.ScramDescription]:
        return scram_ops.describe_credentials(self._image, users)

    def describe_acls(self, acl_filter: acl_ops.AclFilter) -> list[AclBinding] | ApiError:
        err = acl_ops.validate_filter(acl_filter)
        return err if err is not None else acl_ops.describe_acls(self._image, acl_filter)

    def describe_client_quotas(
        self, components: Sequence[quota_ops.QuotaFilterComponent], strict: bool
    ) -> quota_ops.DescribedQuotas:
        return quota_ops.describe_client_quotas(self._image, components, strict)

    # -- writes: forwarded to the controller ----------------------------------------------------

    async def forward(self, request: Any, *, catch_up: bool = True) -> Any:
        """The controller's answer to `request`; after a write (`catch_up`), once this node's
        image has caught up with it."""
        response = await self._channel.forward(request)
        if catch_up:
            await self.wait_caught_up()
        return response

    async def forward_as(self, request: Any, principal: ForwardedPrincipal, client_host: str,
                         client_id: str | None) -> Any:
        """The controller's answer to `request` made by `principal` (from `client_host`, with
        `client_id` in its header): wrapped in an Envelope (Kafka's forwarding, KIP-590), so
        that the controller acts as the client; then, as `forward`, once this node's image has
        caught up with it."""
        envelope = await self._channel.send(
            ENVELOPE, request_data=encode_request(request, 0, client_id),
            request_principal=encode_principal(principal), client_host_address=host_address(client_host))
        if envelope.error_code != ErrorCode.none:
            raise MetadataOperationError(ApiError(envelope.error_code, "the controller refused the forwarded request"))
        response = decode_response(bytes(envelope.response_data), type(request))
        await self.wait_caught_up()
        return response

    async def create_topics(
        self, topics: Sequence[topic_ops.CreatableTopic], *, validate_only: bool = False
    ) -> list[topic_ops.CreateTopicResult]:
        conn_type = await _request_type(self._channel, 19)
        topic_cls = nested(conn_type, "CreatableTopic")
        assign_cls = nested(conn_type, "CreatableReplicaAssignment")
        config_cls = nested(conn_type, "CreatableTopicConfig")
        wire = tuple(
            build(
                topic_cls,
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                assignments=tuple(
                    build(assign_cls, partition_index=p, broker_ids=tuple(bs)) for p, bs in t.assignments.items()
                ),
                configs=tuple(build(config_cls, name=k, value=v) for k, v in t.configs.items()),
            )
            for t in topics
        )
        response = await self._channel.send(
            19, topics=wire, timeout=datetime.timedelta(seconds=30), validate_only=validate_only
        )
        await self.wait_caught_up()
        out = []
        for r in response.topics:
            out.append(
                topic_ops.CreateTopicResult(
                    r.name,
                    ApiError(r.error_code, r.error_message),
                    getattr(r, "topic_id", None),
                    int(getattr(r, "num_partitions", -1)),
                    int(getattr(r, "replication_factor", -1)),
                )
            )
        return out

    async def ensure_internal_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str] | None = None
    ) -> TopicImage:
        return await ensure_internal_topic(self, name, num_partitions, replication_factor, configs)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int = -1) -> tuple[int, int]:
        response = await self._channel.send(67, broker_id=broker_id, broker_epoch=self.broker_epoch)
        if response.error_code != ErrorCode.none:
            raise MetadataOperationError(ApiError(response.error_code))
        return int(response.producer_id_start), int(response.producer_id_len)


async def _request_type(channel: ControllerClient, api_key: int) -> type[Any]:
    """The request entity type at the version negotiated with the controller."""
    conn = await channel.connection()
    request_type: type[Any] = conn.request_type(api_key)
    return request_type


async def download_snapshot(channel: ControllerClient, snapshot: SnapshotId) -> bytes | None:
    """The bytes of the controller's snapshot `snapshot` (FetchSnapshot, in chunks); None when
    retention replaced it meanwhile (the next Fetch names the newer one)."""
    chunks: list[bytes] = []
    position, size = 0, None
    while size is None or position < size:
        request_type = await _request_type(channel, 59)
        wanted = build(nested(request_type, "SnapshotId"), end_offset=snapshot.end_offset, epoch=snapshot.epoch)
        partition = build(nested(request_type, "PartitionSnapshot"), partition=0, current_leader_epoch=-1,
                          snapshot_id=wanted, position=position)
        response = await channel.send(
            59, max_bytes=SNAPSHOT_CHUNK_BYTES,
            topics=(build(nested(request_type, "TopicSnapshot"), name=METADATA_TOPIC, partitions=(partition,)),))
        part = response.topics[0].partitions[0]
        if part.error_code in (ErrorCode.snapshot_not_found, ErrorCode.position_out_of_range):
            log.info("The controller's metadata snapshot %s was replaced while this node fetched it: fetching "
                     "again", snapshot)
            return None
        if part.error_code != ErrorCode.none:
            raise MetadataOperationError(ApiError(part.error_code, f"fetching the metadata snapshot {snapshot}"))
        chunk = bytes(part.unaligned_records or b"")
        if not chunk:
            raise MetadataOperationError(ApiError(ErrorCode.corrupt_message, "an empty metadata snapshot chunk"))
        size = int(part.size)
        chunks.append(chunk)
        position += len(chunk)
    return b"".join(chunks)

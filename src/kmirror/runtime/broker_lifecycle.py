"""Runs the broker's lifecycle against the active controller: registration, a heartbeat every
`broker.heartbeat.interval.ms`, controlled shutdown on stop (`quorum.broker_lifecycle` holds the
states). The controller is reached through a `ControllerPort`: the ControllerChannel for a
broker-only node, the in-process controller for a combined node.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode

from kmirror.config.server import ServerConfig
from kmirror.metadata.broker_lifecycle import BrokerLifecycle, BrokerState
from kmirror.metadata.config_description import broker_config_entry
from kmirror.metadata.controller.brokers import HeartbeatReply
from kmirror.metadata.controller.log_dirs import DirAssignment
from kmirror.metadata.controller.result import ApiError
from kmirror.metadata.controller_service import MetadataService
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import BrokerEndpoint
from kmirror.protocol.entities import build, nested
from kmirror.runtime.controller_channel import ControllerChannel
from kmirror.runtime.metadata_log import log_dir_ids

log = logging.getLogger("kmirror.broker_lifecycle")

METADATA_VERSION_RANGE = (1, 27)
MOVE_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


class ControllerPort(Protocol):
    async def register(self, cluster_id: str, incarnation_id: uuid.UUID,
                       log_dirs: tuple[uuid.UUID, ...]) -> int | ApiError: ...

    async def heartbeat(self, broker_epoch: int, offset: int, want_shut_down: bool,
                        cordoned_log_dirs: tuple[uuid.UUID, ...] | None,
                        offline_log_dirs: tuple[uuid.UUID, ...] = ()) -> HeartbeatReply: ...

    async def assign_replicas_to_dirs(self, broker_epoch: int,
                                      assignments: Sequence[DirAssignment]) -> dict[DirAssignment, ErrorCode]: ...


class LocalController:
    """A combined node: the controller is in this process."""

    def __init__(self, config: ServerConfig, controller: MetadataService) -> None:
        self._config = config
        self._controller = controller

    async def register(self, cluster_id: str, incarnation_id: uuid.UUID,
                       log_dirs: tuple[uuid.UUID, ...]) -> int | ApiError:
        endpoints = tuple(BrokerEndpoint(x.name, x.host, x.port, 0) for x in self._config.advertised_listeners)
        return await self._controller.register_broker(
            self._config.node_id, incarnation_id, endpoints, self._config.broker_rack, cluster_id, log_dirs
        )

    async def heartbeat(self, broker_epoch: int, offset: int, want_shut_down: bool,
                        cordoned_log_dirs: tuple[uuid.UUID, ...] | None,
                        offline_log_dirs: tuple[uuid.UUID, ...] = ()) -> HeartbeatReply:
        return await self._controller.broker_heartbeat(self._config.node_id, broker_epoch, offset, False,
                                                       want_shut_down, cordoned_log_dirs, offline_log_dirs)

    async def assign_replicas_to_dirs(self, broker_epoch: int,
                                      assignments: Sequence[DirAssignment]) -> dict[DirAssignment, ErrorCode]:
        error, errors = await self._controller.assign_replicas_to_dirs(self._config.node_id, broker_epoch, assignments)
        return {a: (errors.get(a) or error).code for a in assignments}


class RemoteController:
    """A broker-only node: BrokerRegistration / BrokerHeartbeat over the ControllerChannel."""

    def __init__(self, config: ServerConfig, channel: ControllerChannel) -> None:
        self._config = config
        self._channel = channel

    async def register(self, cluster_id: str, incarnation_id: uuid.UUID,
                       log_dirs: tuple[uuid.UUID, ...]) -> int | ApiError:
        conn = await self._channel.connection()
        rt = conn.request_type(62)
        listeners = tuple(
            build(nested(rt, "Listener"), name=x.name, host=x.host, port=x.port, security_protocol=0)
            for x in self._config.advertised_listeners
        )
        features = (
            build(
                nested(rt, "Feature"),
                name="metadata.version",
                min_supported_version=METADATA_VERSION_RANGE[0],
                max_supported_version=METADATA_VERSION_RANGE[1],
            ),
        )
        response = await self._channel.send(
            62,
            broker_id=self._config.node_id,
            cluster_id=cluster_id,
            incarnation_id=incarnation_id,
            listeners=listeners,
            features=features,
            rack=self._config.broker_rack,
            is_migrating_zk_broker=False,
            log_dirs=log_dirs,
            previous_broker_epoch=-1,
        )
        if response.error_code != ErrorCode.none:
            return ApiError(response.error_code)
        return int(response.broker_epoch)

    async def heartbeat(self, broker_epoch: int, offset: int, want_shut_down: bool,
                        cordoned_log_dirs: tuple[uuid.UUID, ...] | None,
                        offline_log_dirs: tuple[uuid.UUID, ...] = ()) -> HeartbeatReply:
        response = await self._channel.send(
            63,
            broker_id=self._config.node_id,
            broker_epoch=broker_epoch,
            current_metadata_offset=offset,
            want_fence=False,
            want_shut_down=want_shut_down,
            offline_log_dirs=offline_log_dirs,
            cordoned_log_dirs=cordoned_log_dirs,
        )
        return HeartbeatReply(
            ApiError(response.error_code),
            bool(response.is_caught_up),
            bool(response.is_fenced),
            bool(response.should_shut_down),
        )

    async def assign_replicas_to_dirs(self, broker_epoch: int,
                                      assignments: Sequence[DirAssignment]) -> dict[DirAssignment, ErrorCode]:
        conn = await self._channel.connection()
        rt = conn.request_type(73)
        by_dir: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
        for a in assignments:
            by_dir.setdefault(a.directory, {}).setdefault(a.topic_id, []).append(a.partition)
        directories = tuple(
            build(nested(rt, "DirectoryData"), id_=d, topics=tuple(
                build(nested(rt, "TopicData"), topic_id=t, partitions=tuple(
                    build(nested(rt, "PartitionData"), partition_index=p) for p in ps))
                for t, ps in topics.items()))
            for d, topics in by_dir.items())
        response = await self._channel.send(73, broker_id=self._config.node_id, broker_epoch=broker_epoch,
                                            directories=directories)
        out = {a: ErrorCode(response.error_code) for a in assignments}
        for d in response.directories:
            for t in d.topics:
                for p in t.partitions:
                    out[DirAssignment(d.id_, t.topic_id, int(p.partition_index))] = ErrorCode(p.error_code)
        return out


class LogDirs:
    """This broker's log directories as the controller knows them: their ids, those that are
    cordoned now (KIP-1066), and those that failed (KIP-858, `offline`: the failure handler's)."""

    def __init__(self, config: ServerConfig, image: Callable[[], MetadataImage],
                 offline: Collection[str] = ()) -> None:
        self._config = config
        self._image = image
        self._ids: dict[str, uuid.UUID] | None = None
        self.offline = offline

    def cordoned(self) -> list[str]:
        """The cordoned log dirs now: the static value, or the dynamic one set for this broker."""
        return self._config.cordoned_log_dirs(self._image().broker_config(self._config.node_id))

    def move_rate(self) -> int:
        """`replica.alter.log.dirs.io.max.bytes.per.second` now (dynamic, per broker or cluster-wide)."""
        return int(str(broker_config_entry(self._image(), self._config, MOVE_RATE).value))

    def ids(self, cluster_id: str) -> dict[str, uuid.UUID]:
        """Nothing while the cluster id is unknown: a `meta.properties` is written only with it."""
        if self._ids is None:
            if not cluster_id:
                return {}
            self._ids = log_dir_ids([d for d in self._config.log_dirs if d not in self.offline], cluster_id,
                                    self._config.node_id)
        return self._ids

    def cordoned_ids(self, cluster_id: str) -> tuple[uuid.UUID, ...]:
        ids = self.ids(cluster_id)
        return tuple(ids[d] for d in self.cordoned() if d in ids)

    def online_ids(self, cluster_id: str) -> tuple[uuid.UUID, ...]:
        return tuple(i for d, i in self.ids(cluster_id).items() if d not in self.offline)

    def offline_ids(self, cluster_id: str) -> tuple[uuid.UUID, ...]:
        ids = self.ids(cluster_id)
        return tuple(ids[d] for d in self.offline if d in ids)


class BrokerLifecycleManager:
    def __init__(
        self,
        config: ServerConfig,
        controller: ControllerPort,
        cluster_id: Callable[[], str],
        metadata_offset: Callable[[], int],
        incarnation_id: uuid.UUID,
        log_dirs: LogDirs | None = None,
    ) -> None:
        self._config = config
        self.controller = controller
        self._cluster_id = cluster_id
        self._metadata_offset = metadata_offset
        self._incarnation_id = incarnation_id
        self._log_dirs = log_dirs
        self.lifecycle = BrokerLifecycle()
        self.interval_ms = int(config.values.get("broker.heartbeat.interval.ms", 2000))
        self._task: asyncio.Task[None] | None = None
        self._beats: set[asyncio.Task[None]] = set()

    async def register(self) -> int:
        while True:
            cluster_id = self._cluster_id()
            ids = () if self._log_dirs is None else self._log_dirs.online_ids(cluster_id)
            result = await self.controller.register(cluster_id, self._incarnation_id, ids)
            if not isinstance(result, ApiError):
                self.lifecycle.on_registered(result)
                log.info("broker %d registered with broker epoch %d", self._config.node_id, result)
                return result
            log.warning("broker registration refused: %s; retrying", result.code.name)
            await asyncio.sleep(self.interval_ms / 1000)

    async def heartbeat_once(self) -> HeartbeatReply:
        lc = self.lifecycle
        if lc.state is BrokerState.STARTING:
            await self.register()
        cordoned = None  # reported once caught up, so that the dynamic value is the image's
        if self._log_dirs is not None and lc.state is BrokerState.RUNNING:
            cordoned = self._log_dirs.cordoned_ids(self._cluster_id())
        offline = () if self._log_dirs is None else self._log_dirs.offline_ids(self._cluster_id())
        reply = await self.controller.heartbeat(lc.broker_epoch, self._metadata_offset(), lc.want_shut_down,
                                                 cordoned, offline)
        if reply.error.code in (ErrorCode.stale_broker_epoch, ErrorCode.broker_id_not_registered):
            lc.on_stale_epoch()
        elif reply.error.code == ErrorCode.none:
            before = lc.state
            lc.on_heartbeat(reply.is_fenced, reply.should_shut_down)
            if lc.state is not before:
                log.info("broker %d: %s -> %s", self._config.node_id, before.value, lc.state.value)
        return reply

    async def wait_unfenced(self, timeout_ms: int = 60_000) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while self.lifecycle.state is not BrokerState.RUNNING:
            if loop.time() > deadline:
                return False
            try:
                await self.heartbeat_once()
            except Exception as exc:
                log.warning("heartbeat failed: %s", exc)
            if self.lifecycle.state is not BrokerState.RUNNING:
                await asyncio.sleep(0.1)
        return True

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def heartbeat_soon(self) -> None:
        """A heartbeat now, besides the periodic ones (a log dir failed: the controller is told
        at once, as Kafka's `BrokerLifecycleManager.propagateDirectoryFailure`)."""
        async def beat() -> None:
            try:
                await self.heartbeat_once()
            except Exception as exc:
                log.warning("heartbeat to the controller failed: %s", exc)
        self._beats.add(task := asyncio.get_running_loop().create_task(beat()))
        task.add_done_callback(self._beats.discard)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_ms / 1000)
            try:
                await self.heartbeat_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("heartbeat to the controller failed: %s", exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def controlled_shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Ask the controller to move our leaderships; True once it answers should_shut_down."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.lifecycle.begin_controlled_shutdown()
        try:
            async with asyncio.timeout(timeout_ms / 1000):  # a heartbeat too: no controller may answer
                while True:
                    try:
                        await self.heartbeat_once()
                    except Exception as exc:
                        log.warning("controlled shutdown heartbeat failed: %s", exc)
                        return False
                    if self.lifecycle.state is BrokerState.SHUTTING_DOWN:
                        log.info("broker %d: controlled shutdown complete", self._config.node_id)
                        return True
                    await asyncio.sleep(0.1)
        except TimeoutError:
            log.warning("broker %d: no controller completed its controlled shutdown within %d ms; stopping anyway",
                        self._config.node_id, timeout_ms)
            return False

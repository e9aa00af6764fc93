"""Node composition: builds one kmirror node from its ServerConfig and runs it.

Roles (`process.roles`): a controller owns the metadata log (`MetadataService`) and serves the
controller listener; a broker-only node replicates the metadata log from the controller
(`BrokerMetadataService`); a combined node's broker uses the in-process controller's image.

Start order (each step durable before the next is visible to clients):
1. metadata: read (or format) the metadata log and replay it into the image (a broker-only
   node replays its local copy and catches up with the controller);
2. logs: load and recover every partition directory under `log.dirs`;
3. replica manager follows the image (creates, updates, deletes partitions);
4. group and transaction coordinators load the `__consumer_offsets` and
   `__transaction_state` partitions this node leads;
5. the broker registers and heartbeats until the controller unfences it;
6. listeners open. Stop first runs the controlled shutdown (leaderships move away), then the
   reverse order, and checkpoints the logs.
"""

from __future__ import annotations

import asyncio
import logging
import random
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

from kmirror.broker.api import build_registry
from kmirror.broker.handlers.fetch import fetch_session_cache
from kmirror.broker.quotas.managers import QuotaManagers
from kmirror.broker.services import BrokerServices
from kmirror.client.tls import TlsSetupError, server_context
from kmirror.config.mirror import MIRROR_STATE_TOPIC, state_topic_configs
from kmirror.config.server import ServerConfig
from kmirror.config.topic import TOPIC_CONFIG_DEFS, topic_default
from kmirror.coordinator.consumer_group.ports import topics_of
from kmirror.coordinator.runtime import GroupCoordinatorService
from kmirror.coordinator.transaction.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from kmirror.coordinator.transaction.service import TransactionCoordinatorService
from kmirror.kip1279.errors import error_name
from kmirror.log.cleaner.config import CleanerConfig
from kmirror.log.config import LogConfig
from kmirror.log.log_manager import LogManager
from kmirror.metadata.broker_service import BrokerMetadataService
from kmirror.metadata.controller_service import MetadataService
from kmirror.metrics.cleaner_metrics import register_cleaner_metrics
from kmirror.metrics.mirror_metrics import register_mirror_metrics
from kmirror.metrics.node_metrics import register_fetch_session_metrics, register_node_metrics
from kmirror.metrics.quota_metrics import register_quota_metrics
from kmirror.metrics.registry import MetricsRegistry
from kmirror.metrics.request_metrics import RequestChannelMetrics
from kmirror.mirror.coordinator.coordinator import MirrorCoordinator
from kmirror.mirror.read_only import MirrorWriteGuard
from kmirror.mirror.service import MirrorCoordinatorService
from kmirror.mirror.wiring import MirrorDataPlane
from kmirror.replication.producer_id_source import producer_id_source
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.replication.service import ReplicationService
from kmirror.runtime.broker_lifecycle import BrokerLifecycleManager, LocalController, RemoteController
from kmirror.runtime.broker_sender import ListenerBrokerSender
from kmirror.runtime.controller_channel import ControllerChannel
from kmirror.runtime.coordinator_log import ReplicatedCoordinatorLog
from kmirror.runtime.log_cleaner import LogCleanerService
from kmirror.runtime.loop_lag import LoopLagMonitor
from kmirror.runtime.metadata_log import FileMetadataLogStore, MetaPropertiesError
from kmirror.runtime.metadata_publisher import MetadataPublisher
from kmirror.runtime.metrics_http import MetricsServer
from kmirror.runtime.os_fs import OsFileSystem
from kmirror.runtime.server import KafkaServer, ListenerLimits
from kmirror.runtime.transaction_wiring import (
    TxnMarkerWriter,
    TxnVerifier,
    coordinator_epoch_lookup,
    leader_lookup,
)

log = logging.getLogger("kmirror.node")

CONSUMER_OFFSETS = "__consumer_offsets"
RECOVERY_POINT_CHECKPOINT_INTERVAL_MS = 60_000
CONTROLLER_SESSION_CHECK_MS = 1000
CONTROLLED_SHUTDOWN_TIMEOUT_MS = 15_000


def _broker_log_defaults(cfg: ServerConfig) -> LogConfig:
    """The LogConfig of a topic without overrides: the broker's `log.*` keys, else Kafka's defaults."""
    defaults = {name: topic_default(cfg, name)[0] for name in TOPIC_CONFIG_DEFS}
    return LogConfig.from_topic_config({k: v for k, v in defaults.items() if v is not None})


class OsDiskUsage:
    def usage(self, path: str) -> tuple[int, int]:
        du = shutil.disk_usage(path)
        return du.total, du.free


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class Node:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.clock = SystemClock()
        self._servers: list[KafkaServer] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.ports: dict[str, int] = {}
        self.metadata: Any = None
        self.log_manager: Any = None
        self.replica_manager: Any = None
        self.group_coordinator: Any = None
        self.transaction_coordinator: TransactionCoordinatorService | None = None
        self._broker_services: BrokerServices | None = None
        self.mirror_coordinator: Any = None
        self.mirror_data_plane: MirrorDataPlane | None = None
        self.metrics = MetricsRegistry(self.clock)
        self.request_metrics = RequestChannelMetrics(self.metrics, error_name)
        self.metrics_server: MetricsServer | None = None
        self._checkpoint_write: asyncio.Future[None] | None = None
        self.loop_lag = LoopLagMonitor(self.metrics, int(config.get("event.loop.stall.log.ms")))
        self.lifecycle: BrokerLifecycleManager | None = None
        self.replication: ReplicationService | None = None
        self.publisher: MetadataPublisher | None = None
        self._channels: list[ControllerChannel] = []
        self.log_cleaner: LogCleanerService | None = None
        self.quotas = QuotaManagers.from_config(config.get)

    async def start(self) -> None:
        cfg = self.config
        registries = {plane: build_registry(plane=plane) for plane in ("broker", "controller")}
        if cfg.is_controller:
            self.metadata = MetadataService(cfg, FileMetadataLogStore(cfg.log_dirs[0]), self.clock, random.Random())
            await self.metadata.start()
        else:
            voters = [(v.node_id, v.host, v.port) for v in cfg.controller_quorum_voters] or [
                (-1, host, port) for host, port in cfg.controller_quorum_bootstrap_servers
            ]
            fetch_channel = ControllerChannel(voters, client_id=f"broker-{cfg.node_id}-metadata-fetch")
            write_channel = ControllerChannel(voters, client_id=f"broker-{cfg.node_id}-to-controller")
            self._channels = [fetch_channel, write_channel]
            self.metadata = BrokerMetadataService(
                cfg, FileMetadataLogStore(cfg.log_dirs[0]), fetch_channel, write_channel, self.clock
            )
            await self.metadata.start()
        self.metadata.subscribe(lambda _old, new: self.quotas.update_quotas(new.client_quotas))
        self.quotas.update_quotas(self.metadata.image.client_quotas)
        if not cfg.is_broker:
            await self._open_listeners(registries)
            self._start_controller_tasks()
            return

        self.log_manager = LogManager(OsFileSystem(int(cfg.get("log.max.open.files"))), cfg.log_dirs, self.clock, _broker_log_defaults(cfg))
        self.log_manager.load_logs()
        self.replica_manager = ReplicaManager(cfg.node_id, self.log_manager, self.clock, cfg, OsDiskUsage())
        # KIP-98 transaction coordinator: state in __transaction_state, markers to leaders
        self.transaction_coordinator = TransactionCoordinatorService(
            cfg.node_id, TransactionConfig.from_server_config(cfg),
            ReplicatedCoordinatorLog(self.replica_manager, TRANSACTION_STATE_TOPIC), self.clock,
            producer_ids=producer_id_source(self.metadata, cfg.node_id),
            write_markers=TxnMarkerWriter(cfg.node_id, lambda: self._broker_services, ListenerBrokerSender(
                self.metadata, cfg.inter_broker_listener_name, f"broker-{cfg.node_id}-txn-marker-sender")),
            leader_of=leader_lookup(self.metadata),
            coordinator_epoch_of=coordinator_epoch_lookup(self.replica_manager, TRANSACTION_STATE_TOPIC),
            verify_remote=TxnVerifier(ListenerBrokerSender(
                self.metadata, cfg.inter_broker_listener_name, f"broker-{cfg.node_id}-txn-verification")),
        )
        # TxnOffsetCommit's partition is verified with the transaction coordinator (KIP-890 part 1)
        self.group_coordinator = GroupCoordinatorService(
            cfg.node_id, cfg,
            ReplicatedCoordinatorLog(self.replica_manager, CONSUMER_OFFSETS, verifier=self.transaction_coordinator),
            self.clock, topics=lambda: topics_of(self.metadata.image),
        )
        await self.group_coordinator.start()
        await self.transaction_coordinator.start()
        # KIP-1279 MirrorCoordinator: states persisted in __mirror_state, loaded on leadership
        self.mirror_coordinator = MirrorCoordinatorService(
            MirrorCoordinator(int(cfg.values.get("mirror.topic.num.partitions", 50))),
            log=ReplicatedCoordinatorLog(self.replica_manager, MIRROR_STATE_TOPIC),
            node_id=cfg.node_id,
            metadata=self.metadata,
            send=ListenerBrokerSender(
                self.metadata, cfg.inter_broker_listener_name, f"broker-{cfg.node_id}-mirror-coordinator"
            ),
            replication_factor=int(cfg.values.get("mirror.topic.replication.factor", 3)),
            state_topic_configs=state_topic_configs(cfg.values),
            clock=self.clock,
        )
        await self.mirror_coordinator.start()
        # KIP-1279 data plane: mirror fetchers and the partition lifecycle on mirror leaders
        self.mirror_data_plane = MirrorDataPlane(
            cfg.node_id, cfg, self.clock, self.replica_manager, self.metadata, self.mirror_coordinator
        )
        self.replica_manager.write_guard = MirrorWriteGuard(
            lambda: self.metadata.image, self.mirror_coordinator, self.mirror_data_plane.manager)
        self.publisher = MetadataPublisher(self.replica_manager, self._metadata_change_steps)
        self.metadata.subscribe(self.publisher.on_change)
        self.publisher.on_change(None, self.metadata.image)

        incarnation = uuid.uuid4()
        if cfg.is_controller:
            self.lifecycle = BrokerLifecycleManager(
                cfg, LocalController(cfg, self.metadata), lambda: self.metadata.image.cluster_id or "",
                lambda: self.metadata.image.offset, incarnation,
            )
            self.lifecycle.lifecycle.on_registered(self.metadata.broker_epoch)
        else:
            self.lifecycle = BrokerLifecycleManager(
                cfg, RemoteController(cfg, self._channels[1]), lambda: self.metadata.image.cluster_id or "",
                lambda: self.metadata.image.offset, incarnation,
            )
            self.metadata.broker_epoch = await self.lifecycle.register()
        if not await self.lifecycle.wait_unfenced():
            log.warning("broker %d not unfenced by the controller yet; serving anyway", cfg.node_id)
        self.lifecycle.start()
        # followers fetch from their leaders; leaders send ISR changes to the controller
        self.replication = ReplicationService(
            cfg,
            self.replica_manager,
            None if cfg.is_controller else self._channels[1],
            self.clock,
            broker_epoch=lambda: int(self.metadata.broker_epoch),
            local_controller=self.metadata if cfg.is_controller else None,
        )
        self.replication.start()
        self.mirror_data_plane.start()
        await self._open_listeners(registries)
        if cfg.is_controller:
            self._start_controller_tasks()

    async def _open_listeners(self, registries: dict[str, Any]) -> None:
        cfg = self.config
        services = {
            plane: BrokerServices(
                node_id=cfg.node_id,
                config=cfg,
                registry=registry,
                clock=self.clock,
                metadata=self.metadata,
                replica_manager=self.replica_manager,
                group_coordinator=self.group_coordinator,
                transaction_coordinator=self.transaction_coordinator,
                mirror_coordinator=self.mirror_coordinator,
                mirror_manager=None if self.mirror_data_plane is None else self.mirror_data_plane.manager,
                quotas=self.quotas if plane == "broker" else None,
            )
            for plane, registry in registries.items()
        }
        self._broker_services = services["broker"]
        limits = ListenerLimits(
            max_request_bytes=cfg.socket_request_max_bytes,
            queued_max_requests=int(cfg.get("queued.max.requests")),
            max_connections=int(cfg.get("max.connections")),
            max_connections_per_ip=int(cfg.get("max.connections.per.ip")),
            max_connections_per_ip_overrides=cfg.max_connections_per_ip_overrides,
        )
        for listener in cfg.listeners:
            plane = "controller" if listener.name in cfg.controller_listener_names else "broker"
            security = cfg.listener_securities.get(listener.name)
            server = KafkaServer(registries[plane], services[plane], cfg.socket_request_max_bytes,
                                 request_metrics=self.request_metrics, listener=listener.name,
                                 sasl=None if security is None else security.sasl, limits=limits)
            tls = None if security is None or security.tls is None else server_context(security.tls)
            self.ports[listener.name] = await server.start(listener.host, listener.port, tls)
            self._servers.append(server)
        log.info("node %d serving %s", cfg.node_id, ", ".join(f"{k}={v}" for k, v in self.ports.items()))
        self.loop_lag.start()
        if not cfg.is_broker:
            return
        register_node_metrics(self.metrics, node_id=cfg.node_id, metadata=self.metadata,
                              replica_manager=self.replica_manager,
                              default_min_insync_replicas=cfg.min_insync_replicas)
        register_fetch_session_metrics(self.metrics, fetch_session_cache(services["broker"]))
        if self.mirror_data_plane is not None:
            register_mirror_metrics(self.metrics, self.mirror_data_plane)
        register_quota_metrics(self.metrics, self.quotas, self.clock,
                               None if self.mirror_data_plane is None else self.mirror_data_plane.replication_quota)
        if cfg.metrics_port:
            self.metrics_server = MetricsServer(self.metrics, "127.0.0.1", cfg.metrics_port)
            self.ports["metrics"] = await self.metrics_server.start()
        loop = asyncio.get_running_loop()
        self.log_cleaner = LogCleanerService(CleanerConfig.from_values(cfg.values), self.log_manager, self.clock,
                                             self._may_clean)
        self.log_cleaner.start()
        register_cleaner_metrics(self.metrics, self.log_cleaner.cleaner_metrics)
        self._tasks.append(loop.create_task(self._every(cfg.log_retention_check_interval_ms, self._retention)))
        self._tasks.append(loop.create_task(self._every_async(RECOVERY_POINT_CHECKPOINT_INTERVAL_MS,
                                                              self._checkpoint)))
        self._tasks.append(loop.create_task(self._every(1000, self._flush)))
        # Kafka's producer.id.expiration.check.interval.ms default: stale verification entries
        self._tasks.append(loop.create_task(self._every(600_000, self._expire_verification_states)))
        self.log_manager.defer_removal = True  # deleted logs' directories go on a worker thread
        self._tasks.append(loop.create_task(self._every_async(1000, self._remove_deleted_dirs)))

    def _start_controller_tasks(self) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._every_async(CONTROLLER_SESSION_CHECK_MS, self.metadata.check_broker_sessions)))
        if cfg.auto_leader_rebalance_enable:
            interval_ms = cfg.leader_imbalance_check_interval_seconds * 1000
            self._tasks.append(loop.create_task(self._every_async(interval_ms, self.metadata.rebalance_leaders)))

    async def _every_async(self, interval_ms: int, action: Any) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()
            except Exception:
                log.exception("controller task %s failed", getattr(action, "__name__", action))

    def _metadata_change_steps(self, old_image: Any, new_image: Any) -> Iterator[None]:
        """Publish an image to the broker components; yields between bounded steps of the
        replica manager's application (`MetadataPublisher` runs the steps)."""
        yield from self.replica_manager.apply_image_steps(old_image, new_image)
        yield
        if self.replication is not None:
            self.replication.on_metadata_change(old_image, new_image)
            yield
        led = self.replica_manager.leader_partitions(CONSUMER_OFFSETS)
        self.group_coordinator.on_partitions_led(led)
        if self.transaction_coordinator is not None:
            self.transaction_coordinator.on_partitions_led(
                self.replica_manager.leader_partitions(TRANSACTION_STATE_TOPIC))
        self.mirror_coordinator.on_partitions_led(self.replica_manager.leader_partitions(MIRROR_STATE_TOPIC))
        yield
        if self.mirror_data_plane is not None:
            self.mirror_data_plane.on_metadata_change(new_image)

    async def _every(self, interval_ms: int, action: Any) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                action()
            except Exception:
                log.exception("background task %s failed", getattr(action, "__name__", action))

    def _may_clean(self, tp: Any) -> bool:
        """A mirror partition that is still read-only is not cleaned here: it stays a
        byte-identical copy of its source (docs/design/storage.md)."""
        guard = self.replica_manager.write_guard
        return guard is None or guard.write_refusal(tp) is None

    def _retention(self) -> None:
        self.log_manager.run_retention(self.clock.now_ms())

    async def _remove_deleted_dirs(self) -> None:
        await asyncio.to_thread(self.log_manager.remove_deleted_dirs)

    async def _checkpoint(self) -> None:
        """The offsets are read on the loop, the files (one line per partition, fsync'd) are
        written on a worker thread; `stop` waits for a write in flight before the last one."""
        snapshot = self.log_manager.checkpoint_snapshot()
        self._checkpoint_write = asyncio.ensure_future(asyncio.to_thread(self.log_manager.write_checkpoints,
                                                                         snapshot))
        await asyncio.shield(self._checkpoint_write)

    def _expire_verification_states(self) -> None:
        self.log_manager.remove_expired_verification_states(self.clock.now_ms())

    def _flush(self) -> None:
        self.log_manager.flush_dirty(self.clock.now_ms())

    async def stop(self) -> None:
        # a combined node's controller stops with it: nobody else could take its leaderships
        if self.lifecycle is not None and not self.config.is_controller:
            try:
                await self.lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_MS)
            except Exception:
                log.exception("controlled shutdown failed")
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        await self.loop_lag.stop()
        for server in self._servers:
            await server.stop()
        if self.mirror_data_plane is not None:
            await self.mirror_data_plane.stop()
        if self.replication is not None:
            await self.replication.stop()
        if self.lifecycle is not None:
            await self.lifecycle.stop()
        if self.log_cleaner is not None:
            await self.log_cleaner.stop()
        for task in self._tasks:
            task.cancel()
        if self.group_coordinator is not None:
            await self.group_coordinator.stop()
        if self.transaction_coordinator is not None:
            await self.transaction_coordinator.stop()
        if self.mirror_coordinator is not None:
            await self.mirror_coordinator.stop()
        if isinstance(self.metadata, BrokerMetadataService):
            await self.metadata.stop()
        for channel in self._channels:
            await channel.close()
        if self.publisher is not None:
            await self.publisher.stop()
        if self._checkpoint_write is not None:
            await asyncio.wait([self._checkpoint_write])
        if self.log_manager is not None:
            self.log_manager.close()
        log.info("node %d stopped", self.config.node_id)


async def serve(config: ServerConfig) -> None:
    node = Node(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await node.start()
    await stop.wait()
    await node.stop()


def run(config: ServerConfig) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(serve(config))
    except (MetaPropertiesError, OSError, TlsSetupError) as exc:
        # a start-up refusal (wrong meta.properties, port in use, unreadable log dir or PEM): one line
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0

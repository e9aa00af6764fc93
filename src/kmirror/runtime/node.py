"""Node composition: builds one kmirror node from its ServerConfig and runs it.

Roles (`process.roles`): a controller owns a voter's copy of the metadata log (`MetadataService`)
and serves the controller listener; a broker replicates the metadata log from the active
controller (`BrokerMetadataService`) and sends it its writes. A combined node that is the only
voter is the exception: its broker uses the in-process controller's image and calls it directly.

Start order (each step durable before the next is visible to clients):
1. controller role: read (or format) its metadata log, replay it into the image, open the
   controller listener and join the quorum;
2. broker role: its metadata (a replica replays its local copy and catches up with the
   active controller);
3. logs: load and recover every partition directory under `log.dirs`;
4. replica manager follows the image (creates, updates, deletes partitions);
5. group and transaction coordinators load the `__consumer_offsets` and
   `__transaction_state` partitions this node leads;
6. the broker registers and heartbeats until the controller unfences it;
7. the broker listeners open. Stop first runs the controlled shutdown (leaderships move away),
   then the reverse order, and checkpoints the logs.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import random
import signal
import sys
import time
import uuid

from kmirror.broker.api import build_registry
from kmirror.broker.authorization import RequestAuthorizer
from kmirror.broker.quotas.managers import QuotaManagers
from kmirror.broker.services import BrokerServices
from kmirror.client.tls import TlsSetupError, server_context
from kmirror.config.mirror import MIRROR_STATE_TOPIC, REQUEST_TIMEOUT_MS, state_topic_configs
from kmirror.config.server import ServerConfig
from kmirror.config.topic import TOPIC_CONFIG_DEFS, topic_default
from kmirror.coordinator.consumer_group.ports import topics_of
from kmirror.coordinator.group.service import GroupCoordinatorService
from kmirror.coordinator.transaction.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from kmirror.coordinator.transaction.service import TransactionCoordinatorService
from kmirror.kip1279.errors import error_name
from kmirror.log.config import LogConfig
from kmirror.log.log_manager import LogManager
from kmirror.metadata.broker_service import BrokerMetadataService
from kmirror.metadata.controller_service import MetadataService
from kmirror.metrics.raft_metrics import register_raft_metrics
from kmirror.metrics.registry import MetricsRegistry
from kmirror.metrics.request_metrics import RequestChannelMetrics
from kmirror.mirror.coordinator.coordinator import MirrorCoordinator
from kmirror.mirror.read_only import MirrorWriteGuard
from kmirror.mirror.service import MirrorCoordinatorService
from kmirror.mirror.wiring import MirrorDataPlane
from kmirror.protocol.registry import ApiRegistry
from kmirror.replication.producer_id_source import producer_id_source
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.replication.service import ReplicationService
from kmirror.runtime.broker_lifecycle import (
    BrokerLifecycleManager,
    ControllerPort,
    LocalController,
    LogDirs,
    RemoteController,
)
from kmirror.runtime.broker_log_tasks import BrokerLogTasks
from kmirror.runtime.broker_metrics import register_broker_metrics
from kmirror.runtime.broker_sender import ListenerBrokerSender
from kmirror.runtime.controller_channel import ControllerChannel
from kmirror.runtime.coordinator_log import ReplicatedCoordinatorLog
from kmirror.runtime.dir_assignments import serve_log_dirs
from kmirror.runtime.kerberos import KerberosSetupError, acceptor_credentials
from kmirror.runtime.log_dir_failure import LogDirFailureHandler
from kmirror.runtime.log_dir_mover import LogDirMover
from kmirror.runtime.logger_levels import ProcessLoggerLevels
from kmirror.runtime.loop_lag import LoopLagMonitor, TimedEventLoop
from kmirror.runtime.metadata_log import (
    BROKER_METADATA_DIR,
    METADATA_PARTITION_DIR,
    FileMetadataLogStore,
    MetaPropertiesError,
)
from kmirror.runtime.metadata_publisher import BrokerPublishSteps, MetadataPublisher
from kmirror.runtime.metrics_http import MetricsServer
from kmirror.runtime.oauth import JwksValidator, token_validator
from kmirror.runtime.os_fs import OsDiskUsage, OsFileSystem
from kmirror.runtime.quorum_client import QuorumClient
from kmirror.runtime.scheduler import Scheduler
from kmirror.runtime.server import KafkaServer, ListenerLimits
from kmirror.runtime.share_persister import CoordinatorSharePersister
from kmirror.runtime.transaction_wiring import (
    TxnMarkerWriter,
    TxnVerifier,
    coordinator_epoch_lookup,
    leader_lookup,
)

log = logging.getLogger("kmirror.node")

CONSUMER_OFFSETS = "__consumer_offsets"
CONTROLLER_SESSION_CHECK_MS = METADATA_SNAPSHOT_CHECK_MS = 1000
"""How often a controller checks sessions and whether its metadata snapshot is due (a broker checks at each fetch)."""
CONTROLLED_SHUTDOWN_TIMEOUT_MS = 15_000


def _broker_log_defaults(cfg: ServerConfig) -> LogConfig:
    """The LogConfig of a topic without overrides: the broker's `log.*` keys, else Kafka's defaults."""
    defaults = {name: topic_default(cfg, name)[0] for name in TOPIC_CONFIG_DEFS}
    return LogConfig.from_topic_config({k: v for k, v in defaults.items() if v is not None})


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
        self._jwks: list[JwksValidator] = []  # OAUTHBEARER listeners' key sets, refreshed in the background
        self.scheduler = Scheduler()
        self.ports: dict[str, int] = {}
        self.metrics = MetricsRegistry(self.clock)
        self.request_metrics = RequestChannelMetrics(self.metrics, error_name)
        self.loop_lag = LoopLagMonitor(self.metrics, int(config.get("event.loop.stall.log.ms")))
        self.quotas = QuotaManagers.from_config(config.get)
        self.log_dir_failure = LogDirFailureHandler(config.log_dirs)  # a failed disk goes offline, or halts
        self.log_dirs = LogDirs(config, lambda: self.metadata.image, self.log_dir_failure.offline)
        # Built by `start`. The metadata log: the controller's on a node with the controller
        # role, else the broker's replica of it, reached through the two channels.
        self.controller: MetadataService | None = None
        self.broker_metadata: BrokerMetadataService | None = None
        self._metadata_fetch_channel: ControllerChannel | None = None
        self._controller_channel: ControllerChannel | None = None  # writes: registration, heartbeats, ISR
        # The broker role's components, in the order `start` builds them (None on a controller-only node).
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.transaction_coordinator: TransactionCoordinatorService | None = None
        self.group_coordinator: GroupCoordinatorService | None = None
        self.share_persister: CoordinatorSharePersister | None = None
        self.mirror_coordinator: MirrorCoordinatorService | None = None
        self.mirror_data_plane: MirrorDataPlane | None = None
        self.publisher: MetadataPublisher | None = None
        self.lifecycle: BrokerLifecycleManager | None = None
        self.replication: ReplicationService | None = None
        self._broker_services: BrokerServices | None = None  # the broker plane's, once the listeners open
        self.log_tasks: BrokerLogTasks | None = None
        self.log_dir_mover: LogDirMover | None = None  # AlterReplicaLogDirs
        self.metrics_server: MetricsServer | None = None  # with `metrics.port`
        self.quorum_client: QuorumClient | None = None

    @property
    def metadata(self) -> MetadataService | BrokerMetadataService:
        """The broker role's metadata: its replica of the metadata log, or the controller's own on
        a single voter (and on a controller-only node)."""
        if self.broker_metadata is not None:
            return self.broker_metadata
        if self.controller is not None:
            return self.controller
        raise RuntimeError(f"node {self.config.node_id} has not started")

    async def start(self) -> None:
        cfg = self.config
        registries = {plane: build_registry(plane=plane) for plane in ("broker", "controller")}
        if cfg.is_controller:
            await self._start_controller(registries["controller"])
        if cfg.is_broker:
            if self.controller is not None and self.controller.quorum is None:
                metadata: MetadataService | BrokerMetadataService = self.controller
            else:
                metadata = await self._start_broker_metadata()
            metadata.subscribe(lambda _old, new: self.quotas.update_quotas(new.client_quotas))
            self.quotas.update_quotas(metadata.image.client_quotas)
            await self._start_broker(metadata)
            await self._open_listeners("broker", registries["broker"])
        await self._serve()

    async def _start_controller(self, registry: ApiRegistry) -> None:
        """The controller role serves (and, with several voters, elects) before a broker role on
        the same node asks it for anything."""
        cfg = self.config
        store = FileMetadataLogStore(cfg.log_dirs[0], on_failure=self.log_dir_failure)
        controller = self.controller = MetadataService(cfg, store, self.clock, random.Random())
        if cfg.is_broker:
            controller.broker_log_dirs = self.log_dirs.online_ids
        await controller.start()
        await self._open_listeners("controller", registry)
        if controller.quorum is not None:  # several voters: elections and fetches between them
            self.quorum_client = QuorumClient(controller, list(cfg.controller_quorum_voters),
                                              int(cfg.get("controller.quorum.request.timeout.ms")))
            self.quorum_client.start()
        self._start_controller_tasks(controller)

    async def _start_broker_metadata(self) -> BrokerMetadataService:
        """The broker role's replica of the metadata log, fetched from the active controller, to
        which its writes go. On a node that is also one voter of several, that replica is kept
        apart from the voter's log, and its fetches name no replica id (the node's id is the
        voter's), as Kafka's combined mode reads the voter's log."""
        cfg = self.config
        voters = [(v.node_id, v.host, v.port) for v in cfg.controller_quorum_voters] or [
            (-1, host, port) for host, port in cfg.controller_quorum_bootstrap_servers
        ]
        fetch_channel = ControllerChannel(voters, client_id=f"broker-{cfg.node_id}-metadata-fetch")
        write_channel = ControllerChannel(voters, client_id=f"broker-{cfg.node_id}-to-controller")
        self._metadata_fetch_channel, self._controller_channel = fetch_channel, write_channel
        voter = cfg.is_controller
        store = FileMetadataLogStore(cfg.log_dirs[0], on_failure=self.log_dir_failure,
                                     directory=BROKER_METADATA_DIR if voter else METADATA_PARTITION_DIR)
        self.broker_metadata = BrokerMetadataService(cfg, store, fetch_channel, write_channel, self.clock,
                                                     observer_id=-1 if voter else None)
        await self.broker_metadata.start()
        return self.broker_metadata

    async def _start_broker(self, metadata: MetadataService | BrokerMetadataService) -> None:
        cfg = self.config
        fs = OsFileSystem(int(cfg.get("log.max.open.files")), self.log_dir_failure)
        self.log_manager = LogManager(fs, cfg.log_dirs, self.clock, _broker_log_defaults(cfg))
        self.log_manager.cordoned = self.log_dirs.cordoned
        self.log_manager.load_logs(self.log_dir_failure.load_failed)  # a dir that fails to load is offline
        replica_manager = ReplicaManager(cfg.node_id, self.log_manager, self.clock, cfg, OsDiskUsage())
        self.replica_manager = replica_manager
        # KIP-98 transaction coordinator: state in __transaction_state, markers to leaders
        transactions = TransactionCoordinatorService(
            cfg.node_id, TransactionConfig.from_server_config(cfg),
            ReplicatedCoordinatorLog(replica_manager, TRANSACTION_STATE_TOPIC), self.clock,
            producer_ids=producer_id_source(metadata, cfg.node_id),
            write_markers=TxnMarkerWriter(cfg.node_id, lambda: self._broker_services, ListenerBrokerSender(
                metadata, cfg.inter_broker_listener_name, f"broker-{cfg.node_id}-txn-marker-sender")),
            leader_of=leader_lookup(metadata),
            coordinator_epoch_of=coordinator_epoch_lookup(replica_manager, TRANSACTION_STATE_TOPIC),
            verify_remote=TxnVerifier(ListenerBrokerSender(
                metadata, cfg.inter_broker_listener_name, f"broker-{cfg.node_id}-txn-verification")),
        )
        self.transaction_coordinator = transactions
        # TxnOffsetCommit's partition is verified with the transaction coordinator (KIP-890 part 1)
        groups = GroupCoordinatorService(
            cfg.node_id, cfg, ReplicatedCoordinatorLog(replica_manager, CONSUMER_OFFSETS, verifier=transactions),
            self.clock, topics=lambda: topics_of(metadata.image),
        )
        self.group_coordinator = groups
        self.share_persister = CoordinatorSharePersister(cfg.node_id, groups, leader_lookup(metadata), ListenerBrokerSender(
            metadata, cfg.inter_broker_listener_name, f"broker-{cfg.node_id}-share-persister"))
        await groups.start()
        await transactions.start()
        # KIP-1279 MirrorCoordinator: states persisted in __mirror_state, loaded on leadership
        mirrors = MirrorCoordinatorService(
            MirrorCoordinator(int(cfg.values.get("mirror.topic.num.partitions", 50))),
            log=ReplicatedCoordinatorLog(replica_manager, MIRROR_STATE_TOPIC),
            node_id=cfg.node_id,
            metadata=metadata,
            send=ListenerBrokerSender(metadata, cfg.inter_broker_listener_name, f"broker-{cfg.node_id}-mirror-coordinator"),
            replication_factor=int(cfg.values.get("mirror.topic.replication.factor", 3)),
            state_topic_configs=state_topic_configs(cfg.values),
            clock=self.clock,
            source_request_timeout_ms=int(cfg.get(REQUEST_TIMEOUT_MS)),
        )
        self.mirror_coordinator = mirrors
        await mirrors.start()
        # KIP-1279 data plane: mirror fetchers and the partition lifecycle on mirror leaders
        data_plane = MirrorDataPlane(cfg.node_id, cfg, self.clock, replica_manager, metadata, mirrors)
        self.mirror_data_plane = data_plane
        replica_manager.write_guard = MirrorWriteGuard(lambda: metadata.image, mirrors, data_plane.manager)
        steps = BrokerPublishSteps(replica_manager, groups, transactions, mirrors, data_plane)
        self.publisher = MetadataPublisher(replica_manager, steps)
        metadata.subscribe(self.publisher.on_change)
        self.publisher.on_change(None, metadata.image)

        self.lifecycle = await self._register_broker(metadata)
        if not await self.lifecycle.wait_unfenced():
            log.warning("broker %d not unfenced by the controller yet; serving anyway", cfg.node_id)
        self.lifecycle.start()
        self.log_dir_mover = serve_log_dirs(
            self.log_dir_failure, self.lifecycle, self.log_manager, replica_manager, self.log_dirs, steps, metadata.image,
            lambda tp: self.log_tasks is not None and tp in self.log_tasks.cleaner.manager.in_progress)
        # followers fetch from their leaders; leaders send ISR changes to the controller
        self.replication = ReplicationService(
            cfg,
            replica_manager,
            self._controller_channel,
            self.clock,
            broker_epoch=lambda: int(metadata.broker_epoch),
            local_controller=self.controller if self.broker_metadata is None else None,
        )
        steps.replication = self.replication
        self.replication.start()
        data_plane.start()

    async def _register_broker(self, metadata: MetadataService | BrokerMetadataService) -> BrokerLifecycleManager:
        """The broker of a single voter is registered by its controller's `start`; any other
        registers with the active controller."""
        cfg = self.config
        local = self.broker_metadata is None
        port: ControllerPort
        if local:
            assert self.controller is not None
            port = LocalController(cfg, self.controller)
        else:
            assert self._controller_channel is not None
            port = RemoteController(cfg, self._controller_channel)
        lifecycle = BrokerLifecycleManager(cfg, port, lambda: metadata.image.cluster_id or "",
                                           lambda: metadata.image.offset, uuid.uuid4(), self.log_dirs)
        if self.controller is not None and local:
            lifecycle.lifecycle.on_registered(self.controller.broker_epoch)
        elif self.broker_metadata is not None:
            self.broker_metadata.broker_epoch = await lifecycle.register()
        return lifecycle

    def _services(self, plane: str, registry: ApiRegistry) -> BrokerServices:
        cfg = self.config
        metadata = self.controller if plane == "controller" and self.controller is not None else self.metadata
        services = BrokerServices(
            node_id=cfg.node_id,
            config=cfg,
            registry=registry,
            clock=self.clock,
            metadata=metadata,
            group_coordinator=self.group_coordinator,
            transaction_coordinator=self.transaction_coordinator,
            mirror_coordinator=self.mirror_coordinator,
            mirror_manager=None if self.mirror_data_plane is None else self.mirror_data_plane.manager,
            quotas=self.quotas if plane == "broker" else None,
            authorization=RequestAuthorizer.from_config(cfg, lambda: metadata.image.acls, self.clock),
            loggers=ProcessLoggerLevels(),
            share_persister=self.share_persister if plane == "broker" else None,
            log_dir_moves=self.log_dir_mover if plane == "broker" else None,
        )
        if self.replica_manager is not None:  # a controller-only node's handlers never use one
            services.replica_manager = self.replica_manager
        return services

    async def _open_listeners(self, plane: str, registry: ApiRegistry) -> None:
        """Open the listeners of `plane` ("controller": those of `controller.listener.names`)."""
        cfg = self.config
        services = self._services(plane, registry)
        if plane == "broker":
            self._broker_services = services
        limits = ListenerLimits(
            max_request_bytes=cfg.socket_request_max_bytes,
            queued_max_requests=int(cfg.get("queued.max.requests")),
            max_connections=int(cfg.get("max.connections")),
            max_connections_per_ip=int(cfg.get("max.connections.per.ip")),
            max_connections_per_ip_overrides=cfg.max_connections_per_ip_overrides,
        )
        for listener in cfg.listeners:
            if ("controller" if listener.name in cfg.controller_listener_names else "broker") != plane:
                continue
            security = cfg.listener_securities.get(listener.name)
            server = KafkaServer(registry, services, cfg.socket_request_max_bytes,
                                 request_metrics=self.request_metrics, listener=listener.name,
                                 sasl=None if security is None else security.sasl, limits=limits,
                                 certificate_principal_rules=None if security is None or security.tls is None
                                 else security.tls.principal_rules)
            tls = None if security is None or security.tls is None else server_context(security.tls)
            sasl = None if security is None else security.sasl
            if sasl is not None and sasl.kerberos is not None:
                acceptor_credentials(sasl.kerberos)  # a keytab without the principal refuses the start
            validator = None if sasl is None or sasl.oauthbearer is None else token_validator(sasl.oauthbearer, self.clock)
            if isinstance(validator, JwksValidator):
                validator.start()
                self._jwks.append(validator)
            server.token_validator = validator
            self.ports[listener.name] = await server.start(listener.host, listener.port, tls)
            self._servers.append(server)

    async def _serve(self) -> None:
        """Every listener is open: metrics and the broker's log tasks."""
        cfg = self.config
        log.info("node %d serving %s", cfg.node_id, ", ".join(f"{k}={v}" for k, v in self.ports.items()))
        self.loop_lag.start()
        if self.controller is not None:
            register_raft_metrics(self.metrics, self.controller)
        services = self._broker_services
        if self.replica_manager is None or self.log_manager is None or services is None:  # a controller-only node
            await self._serve_metrics()
            return
        register_broker_metrics(self, services)
        await self._serve_metrics()
        mover = self.log_dir_mover
        self.log_tasks = BrokerLogTasks(cfg, self.clock, self.scheduler, self.log_manager, self.replica_manager,
                                        lambda: self.metadata.image, lambda tp: mover is not None and tp in mover.moves)
        self.log_tasks.start(self.metrics)

    async def _serve_metrics(self) -> None:
        if self.config.metrics_port:
            self.metrics_server = MetricsServer(self.metrics, "127.0.0.1", self.config.metrics_port)
            self.ports["metrics"] = await self.metrics_server.start()

    def _start_controller_tasks(self, controller: MetadataService) -> None:
        cfg = self.config
        self.scheduler.schedule_async("broker session check", controller.check_broker_sessions,
                                      CONTROLLER_SESSION_CHECK_MS)
        self.scheduler.schedule_async("metadata snapshot check", controller.snapshot_if_due, METADATA_SNAPSHOT_CHECK_MS)
        self.scheduler.schedule_async("delegation-token-expiry", controller.remove_expired_delegation_tokens,
                                      int(cfg.get("delegation.token.expiry.check.interval.ms")))
        if cfg.auto_leader_rebalance_enable:
            interval_ms = cfg.leader_imbalance_check_interval_seconds * 1000
            self.scheduler.schedule_async("auto-leader-rebalance-task", controller.rebalance_leaders, interval_ms)

    async def stop(self) -> None:
        # a single voter's broker stops with its controller: nobody else could take its leaderships
        if self.lifecycle is not None and self.broker_metadata is not None:
            try:
                await self.lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_MS)
            except Exception:
                log.exception("controlled shutdown failed")
        if self.quorum_client is not None:  # a leader resigns while it can still answer fetches
            await self.quorum_client.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        await self.loop_lag.stop()
        for server in self._servers:
            await server.stop()
        for jwks in self._jwks:
            await jwks.stop()
        if self.mirror_data_plane is not None:
            await self.mirror_data_plane.stop()
        if self.replication is not None:
            await self.replication.stop()
        if self.lifecycle is not None:
            await self.lifecycle.stop()
        if self.log_tasks is not None:
            await self.log_tasks.stop()
        if self.log_dir_mover is not None:
            await self.log_dir_mover.stop()
        self.scheduler.shutdown()
        if self.group_coordinator is not None:
            await self.group_coordinator.stop()
        if self.transaction_coordinator is not None:
            await self.transaction_coordinator.stop()
        if self.mirror_coordinator is not None:
            await self.mirror_coordinator.stop()
        if self.broker_metadata is not None:
            await self.broker_metadata.stop()
        for channel in (self._metadata_fetch_channel, self._controller_channel):
            if channel is not None:
                await channel.close()
        if self.publisher is not None:
            await self.publisher.stop()
        if self.log_tasks is not None:
            await self.log_tasks.checkpoint_written()
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


# The interpreter's collector thresholds for a node (CPython's defaults: 700, 10, 10). The node
# freezes its heap after each metadata publication (`metadata_publisher`), and frozen objects
# do not count as long-lived, so with the defaults a full (generation-2) collection ran after
# every ten generation-1 ones: one or two a second under load, 20-110 ms each, collecting
# nothing (a 10,000-partition mirror at 9 MB/s, both nodes). Objects are freed by reference
# counting; the collector is for cycles, and rarer passes find the same ones.
GC_THRESHOLDS = (50_000, 20, 20)


def run(config: ServerConfig) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    for spec in filter(None, os.environ.get("KMIRROR_LOG_LEVELS", "").split(",")):
        name, _, level = spec.partition("=")
        logging.getLogger(name.strip()).setLevel(level.strip().upper())
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        with asyncio.Runner(loop_factory=TimedEventLoop) as runner:
            runner.run(serve(config))
    except (MetaPropertiesError, OSError, TlsSetupError, KerberosSetupError) as exc:
        # a start-up refusal (wrong meta.properties, port in use, unreadable log dir, PEM or keytab): one line
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0

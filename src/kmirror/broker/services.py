"""What handlers may call: the node's domain services, each behind a narrow interface."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kmirror.broker.authorization import ALLOW_ALL, RequestAuthorizer
from kmirror.broker.loggers import LoggerLevels
from kmirror.broker.quotas.managers import QuotaManagers
from kmirror.config.server import ServerConfig
from kmirror.coordinator.group.service import GroupCoordinatorService
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.coordinator.transaction.service import TransactionCoordinatorService
from kmirror.metadata.broker_service import BrokerMetadataService
from kmirror.metadata.controller.result import ApiError
from kmirror.metadata.controller_service import MetadataService
from kmirror.mirror.manager import MirrorManager
from kmirror.mirror.service import MirrorCoordinatorService
from kmirror.ports import Clock
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.registry import ApiRegistry
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.types import TopicPartition


class SharePersister(Protocol):
    """Where share partition states are kept: the group's coordinator (`runtime.share_persister`)."""

    async def read(self, key: ShareStateKey, leader_epoch: int) -> ShareSnapshot | None | ErrorCode: ...

    async def write(self, key: ShareStateKey, snapshot: ShareSnapshot) -> ErrorCode: ...


class LogDirMoves(Protocol):
    """Replica moves between this broker's log dirs (AlterReplicaLogDirs; `runtime.log_dir_mover`)."""

    def alter(self, tp: TopicPartition, path: str) -> ApiError: ...

    def futures(self) -> list[tuple[TopicPartition, str, int, int]]:
        """(partition, destination log dir, size in bytes, offset lag) of each move under way."""
        ...


@dataclass
class BrokerServices:
    node_id: int
    config: ServerConfig
    registry: ApiRegistry
    clock: Clock
    # The controller's MetadataService on a node with process.roles=controller, else the
    # broker's replica of the metadata log, which forwards writes to the controller.
    metadata: MetadataService | BrokerMetadataService
    replica_manager: ReplicaManager = None  # type: ignore[assignment]  # None only on a controller-only node, whose handlers never use it
    group_coordinator: GroupCoordinatorService | None = None
    transaction_coordinator: TransactionCoordinatorService | None = None
    controller: Any = None  # the active controller, on nodes with process.roles=controller
    mirror_coordinator: MirrorCoordinatorService | None = None  # KIP-1279 MirrorCoordinator
    mirror_manager: MirrorManager | None = None  # KIP-1279 data plane: DescribeMirrors, states
    quotas: QuotaManagers | None = None  # client quotas; None on the controller plane (exempt)
    authorization: RequestAuthorizer = ALLOW_ALL  # `authorizer.class.name`; ALLOW_ALL without one
    loggers: LoggerLevels | None = None  # BROKER_LOGGER configs (KIP-412); every node has them
    # where share partition states are stored (`runtime.share_persister`); None: this node's memory
    share_persister: SharePersister | None = None
    log_dir_moves: LogDirMoves | None = None  # AlterReplicaLogDirs; None on the controller plane

    @property
    def logger_levels(self) -> LoggerLevels:
        if self.loggers is None:
            raise RuntimeError(f"node {self.node_id} has no logger levels")
        return self.loggers

    @property
    def groups(self) -> GroupCoordinatorService:
        """The group coordinator; every broker has one (handlers of the broker plane only)."""
        if self.group_coordinator is None:
            raise RuntimeError(f"node {self.node_id} has no group coordinator")
        return self.group_coordinator

    @property
    def controller_metadata(self) -> MetadataService:
        """The controller's MetadataService: handlers of the controller plane only run where it is."""
        if self.metadata.forwarding:
            raise RuntimeError(f"node {self.node_id} is not a controller")
        return self.metadata

    @property
    def broker_metadata(self) -> BrokerMetadataService:
        """The broker's replica of the metadata log, which forwards admin writes (`forward`)."""
        if not self.metadata.forwarding:
            raise RuntimeError(f"node {self.node_id} runs the controller: nothing to forward")
        return self.metadata

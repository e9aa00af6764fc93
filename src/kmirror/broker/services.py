"""What handlers may call: the node's domain services, each behind a narrow interface."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kmirror.ports import Clock
from kmirror.protocol.registry import ApiRegistry


@dataclass
class BrokerServices:
    node_id: int
    config: Any  # kmirror.config.server.ServerConfig
    registry: ApiRegistry
    clock: Clock
    metadata: Any = None  # kmirror.metadata.service.MetadataService
    replica_manager: Any = None  # kmirror.replication.replica_manager.ReplicaManager
    group_coordinator: Any = None  # kmirror.coordinator.group.GroupCoordinator
    transaction_coordinator: Any = None  # kmirror.coordinator.transaction.service.TransactionCoordinatorService
    controller: Any = None  # the active controller, on nodes with process.roles=controller
    mirror_coordinator: Any = None  # kmirror.mirror.service.MirrorCoordinatorService (KIP-1279)
    mirror_manager: Any = None  # kmirror.mirror.manager.MirrorManager: DescribeMirrors, the data plane

"""The metrics a broker registers once its listeners are open (Kafka's broker metrics groups:
ReplicaManager, KafkaController, FetchSessionCache, replica-fetcher-metrics, the KIP-1279
mirror metrics, quotas, the authorizer, the group and transaction coordinators)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kmirror.broker.handlers.fetch import fetch_session_cache
from kmirror.metrics.authorizer_metrics import register_authorizer_metrics
from kmirror.metrics.coordinator_metrics import register_coordinator_metrics
from kmirror.metrics.mirror_metrics import register_mirror_metrics
from kmirror.metrics.network_metrics import register_replica_fetcher_network_metrics
from kmirror.metrics.node_metrics import register_fetch_session_metrics, register_node_metrics
from kmirror.metrics.quota_metrics import register_quota_metrics

if TYPE_CHECKING:
    from kmirror.broker.services import BrokerServices
    from kmirror.runtime.node import Node


def register_broker_metrics(node: Node, services: BrokerServices) -> None:
    """`node`: a broker whose replica manager, replication and coordinators are running."""
    registry, cfg, plane = node.metrics, node.config, node.mirror_data_plane
    register_node_metrics(registry, node_id=cfg.node_id, metadata=node.metadata, now_ms=node.clock.now_ms,
                          replica_manager=node.replica_manager, default_min_insync_replicas=cfg.min_insync_replicas)
    register_fetch_session_metrics(registry, fetch_session_cache(services))
    if node.replication is not None:
        register_replica_fetcher_network_metrics(registry, node.replication.fetcher_manager)
    if plane is not None:
        register_mirror_metrics(registry, plane)
    register_quota_metrics(registry, node.quotas, node.clock, None if plane is None else plane.replication_quota)
    register_authorizer_metrics(registry, services.authorization)
    register_coordinator_metrics(registry, node.clock, node.group_coordinator, node.transaction_coordinator)

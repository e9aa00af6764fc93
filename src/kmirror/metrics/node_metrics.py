"""`register_node_metrics`: every replication and controller metric of one broker, in one call
(a controller's own, ActiveControllerCount among them, are `raft_metrics`).

Providers (read at scrape time, never pushed):
- the replica manager's `replication_metrics() -> dict[str, float]` with keys
  UnderReplicatedPartitions, UnderMinIsrPartitionCount, AtMinIsrPartitionCount, IsrShrinks and
  IsrExpands (cumulative counts, rated by meters), ReplicaLagTimeMax (ms), MaxLag (messages),
  LeaderCount, PartitionCount, OfflineReplicaCount. A key it lacks falls back to the image-based gauge, or is left out of the scrape;
- the metadata image (`metadata.image`) for controller gauges and the image-based fallbacks;
- `metadata.snapshots` (`MetadataSnapshots`) for the metadata snapshot gauges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kmirror.metadata.image import MetadataImage
from kmirror.metrics import image_gauges
from kmirror.metrics.registry import GaugeFn, MetricsRegistry, metric_name

REPLICA_MANAGER = ("kafka.server", "ReplicaManager")
FETCH_SESSION_CACHE = ("kafka.server", "FetchSessionCache")
CONTROLLER = ("kafka.controller", "KafkaController")
SNAPSHOT_EMITTER = ("kafka.server", "SnapshotEmitter")
METADATA_LOADER = ("kafka.server", "MetadataLoader")


def register_node_metrics(
    registry: MetricsRegistry,
    *,
    node_id: int,
    metadata: Any,
    now_ms: Callable[[], int],
    replica_manager: Any = None,
    default_min_insync_replicas: int = 1,
) -> None:
    """Register the ReplicaManager, ReplicaFetcherManager and KafkaController metrics.

    `metadata` needs `image` (a MetadataImage) and may have `controller_id`; `replica_manager`
    may be None or lack `replication_metrics` (image-based values are used instead)."""

    def image() -> MetadataImage:
        return metadata.image  # type: ignore[no-any-return]

    def replication_metrics() -> Mapping[str, float]:
        read = getattr(replica_manager, "replication_metrics", None)
        return read() if read is not None else {}

    # once per read of the registry: a scan of every hosted partition (ten thousand of them are
    # tens of ms on the event loop)
    reported = registry.once_per_read(replication_metrics)

    def reported_or(key: str, fallback: Callable[[], float | int | None]) -> GaugeFn:
        def read() -> float | int | None:
            value = reported().get(key)
            return fallback() if value is None else value

        return read

    def nothing() -> None:
        return None

    rm = REPLICA_MANAGER
    min_isr = default_min_insync_replicas
    gauges: list[tuple[tuple[str, str], str, GaugeFn]] = [
        (rm, "UnderReplicatedPartitions", reported_or(
            "UnderReplicatedPartitions", lambda: image_gauges.under_replicated_partitions(image(), node_id))),
        (rm, "UnderMinIsrPartitionCount", reported_or(
            "UnderMinIsrPartitionCount",
            lambda: image_gauges.under_min_isr_partition_count(image(), node_id, min_isr))),
        (rm, "AtMinIsrPartitionCount", reported_or(
            "AtMinIsrPartitionCount", lambda: image_gauges.at_min_isr_partition_count(image(), node_id, min_isr))),
        (rm, "ReplicaLagTimeMax", reported_or("ReplicaLagTimeMax", nothing)),
        (rm, "LeaderCount", reported_or("LeaderCount", lambda: image_gauges.leader_count(image(), node_id))),
        (rm, "PartitionCount", reported_or("PartitionCount", lambda: image_gauges.partition_count(image(), node_id))),
        (rm, "OfflineReplicaCount", reported_or("OfflineReplicaCount", nothing)),
        (CONTROLLER, "OfflinePartitionsCount", lambda: image_gauges.offline_partitions_count(image())),
        (CONTROLLER, "GlobalTopicCount", lambda: image_gauges.global_topic_count(image())),
        (CONTROLLER, "GlobalPartitionCount", lambda: image_gauges.global_partition_count(image())),
        (CONTROLLER, "FencedBrokerCount", lambda: image_gauges.fenced_broker_count(image())),
        (CONTROLLER, "ActiveBrokerCount", lambda: image_gauges.active_broker_count(image())),
        (CONTROLLER, "PreferredReplicaImbalanceCount",
         lambda: image_gauges.preferred_replica_imbalance_count(image())),
        (SNAPSHOT_EMITTER, "LatestSnapshotGeneratedBytes", lambda: metadata.snapshots.latest_generated_bytes),
        (SNAPSHOT_EMITTER, "LatestSnapshotGeneratedAgeMs",
         lambda: now_ms() - metadata.snapshots.latest_generated_ms),
        (METADATA_LOADER, "HandleLoadSnapshotCount", lambda: metadata.snapshots.snapshots_loaded),
    ]
    for (domain, type_), name, read in gauges:
        registry.gauge(metric_name(domain, type_, name), read)
    registry.gauge(
        metric_name("kafka.server", "ReplicaFetcherManager", "MaxLag", clientId="Replica"),
        reported_or("MaxLag", nothing),
    )
    registry.meter(metric_name(*rm, "IsrShrinksPerSec"), source=lambda: reported().get("IsrShrinks"))
    registry.meter(metric_name(*rm, "IsrExpandsPerSec"), source=lambda: reported().get("IsrExpands"))


def register_fetch_session_metrics(registry: MetricsRegistry, cache: Any) -> None:
    """Kafka's FetchSessionCache gauges: incremental fetch sessions (KIP-227) the broker holds,
    and the partitions they hold. `cache` has `__len__` and `partitions_cached()`."""
    registry.gauge(metric_name(*FETCH_SESSION_CACHE, "NumIncrementalFetchSessions"), lambda: len(cache))
    registry.gauge(metric_name(*FETCH_SESSION_CACHE, "NumIncrementalFetchPartitionsCached"), cache.partitions_cached)

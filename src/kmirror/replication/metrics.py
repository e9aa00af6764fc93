"""Replication metrics over a node's hosted partitions (Kafka's replication metrics and names)."""

from __future__ import annotations

from collections.abc import Iterable

from kmirror.replication.log_port import PartitionLog
from kmirror.replication.partition import Partition


def replication_metrics(partitions: Iterable[Partition[PartitionLog]], now_ms: int) -> dict[str, float]:
    """Kafka's replication metrics as plain values; the metrics layer turns the
    IsrShrinks/IsrExpands counts into rates."""
    under_replicated = under_min = at_min = leaders = 0
    shrinks = expands = 0
    max_lag = 0
    max_lag_ms = 0
    count = 0
    for partition in partitions:
        count += 1
        shrinks += partition.isr_shrinks
        expands += partition.isr_expands
        if not partition.is_leader:
            continue
        leaders += 1
        isr_size = len(partition.isr)
        if isr_size < len(partition.replicas):
            under_replicated += 1
        if isr_size < partition.min_insync_replicas:
            under_min += 1
        elif isr_size == partition.min_insync_replicas:
            at_min += 1
        lag, lag_ms = partition.follower_lag_max(now_ms)
        max_lag = max(max_lag, lag)
        max_lag_ms = max(max_lag_ms, lag_ms)
    return {
        "UnderReplicatedPartitions": float(under_replicated),
        "UnderMinIsrPartitionCount": float(under_min),
        "AtMinIsrPartitionCount": float(at_min),
        # Kafka counts replicas on failed log dirs; a failed log dir stops this node.
        "OfflineReplicaCount": 0.0,
        "LeaderCount": float(leaders),
        "PartitionCount": float(count),
        "IsrShrinks": float(shrinks),
        "IsrExpands": float(expands),
        "MaxLag": float(max_lag),
        "ReplicaLagTimeMax": float(max_lag_ms),
    }

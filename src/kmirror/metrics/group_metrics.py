"""`register_group_coordinator_metrics`: Kafka's group coordinator metrics of one node
(`kmirror.coordinator.group.metrics`), read at scrape time:
- `kafka.server:type=group-coordinator-metrics,name=offset-count`,
  `name=group-count,protocol=classic|consumer|share`,
  `name=classic-group-count,state=PreparingRebalance|CompletingRebalance|Stable|Dead|Empty`,
  `name=consumer-group-count,state=Empty|Assigning|Reconciling|Stable|Dead` and
  `name=share-group-count,state=Empty|Stable|Dead`;
- `kafka.coordinator.group:type=GroupMetadataManager,name=NumOffsets|NumGroups|
  NumGroupsPreparingRebalance|NumGroupsCompletingRebalance|NumGroupsStable|NumGroupsDead|
  NumGroupsEmpty` (deprecated by Kafka 4.4 for the above);
- the meters `kafka.server:type=group-coordinator-metrics,name=<sensor>-rate|<sensor>-count` of
  `offset-commit`, `offset-expiration`, `offset-deletion`, `group-completed-rebalance` and
  `consumer-group-rebalance` (`kmirror.coordinator.group.sensors`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kmirror.coordinator.consumer_group.state import ConsumerGroupState
from kmirror.coordinator.group.metrics import CLASSIC_STATE_GAUGES, PROTOCOLS
from kmirror.coordinator.group.sensors import GroupSensor
from kmirror.coordinator.share_group.group import ShareGroupState
from kmirror.metrics.registry import GaugeFn, MetricsRegistry, metric_name

GROUP_METADATA_MANAGER = ("kafka.coordinator.group", "GroupMetadataManager")
GROUP_COORDINATOR_METRICS = ("kafka.server", "group-coordinator-metrics")


def register_group_coordinator_metrics(registry: MetricsRegistry, read: Callable[[], Mapping[str, float]]) -> None:
    """`read`: `group_coordinator_metrics` of the node's coordinator, called once per read of
    the registry (it walks every loaded group)."""
    values = registry.once_per_read(read)

    def reader(key: str) -> GaugeFn:
        return lambda: values().get(key)

    for name in ("NumOffsets", "NumGroups", *(gauge for gauge, _ in CLASSIC_STATE_GAUGES)):
        registry.gauge(metric_name(*GROUP_METADATA_MANAGER, name), reader(name))
    registry.gauge(metric_name(*GROUP_COORDINATOR_METRICS, "offset-count"), reader("offset-count"))
    for protocol in PROTOCOLS:
        registry.gauge(metric_name(*GROUP_COORDINATOR_METRICS, "group-count", protocol=protocol),
                       reader(f"group-count:{protocol}"))
    for _, classic_state in CLASSIC_STATE_GAUGES:
        registry.gauge(metric_name(*GROUP_COORDINATOR_METRICS, "classic-group-count", state=classic_state.value),
                       reader(f"classic-group-count:{classic_state.value}"))
    for state in ConsumerGroupState:
        registry.gauge(metric_name(*GROUP_COORDINATOR_METRICS, "consumer-group-count", state=state.value),
                       reader(f"consumer-group-count:{state.value}"))
    for share_state in ShareGroupState:
        registry.gauge(metric_name(*GROUP_COORDINATOR_METRICS, "share-group-count", state=share_state.value),
                       reader(f"share-group-count:{share_state.value}"))
    for sensor in GroupSensor:
        for stat in (f"{sensor.value}-rate", f"{sensor.value}-count"):
            registry.gauge(metric_name(*GROUP_COORDINATOR_METRICS, stat), reader(stat))

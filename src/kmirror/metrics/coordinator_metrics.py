"""`register_coordinator_metrics`: the metrics of the coordinators a node runs, read at scrape time:
- the group coordinator's (`kmirror.metrics.group_metrics`);
- Kafka's coordinator runtime metrics of the group coordinator,
  `kafka.server:type=group-coordinator-metrics,name=partition-load-time-avg|partition-load-time-max`
  (ms a `__consumer_offsets` partition took to load, from the moment this node came to lead it,
  over Kafka's default metrics window: the loads of the last 30 to 60 s; no value without one)
  and `name=num-partitions,state=loading|active|failed`;
- the transaction coordinator's `kafka.server:type=transaction-coordinator-metrics,
  name=partition-load-time-avg|partition-load-time-max`, the same for `__transaction_state`.
"""

from __future__ import annotations

from typing import Any

from kmirror.coordinator.group.metrics import group_coordinator_metrics
from kmirror.coordinator.group.service import GroupCoordinatorService
from kmirror.coordinator.runtime import CoordinatorRuntime
from kmirror.coordinator.transaction.service import TransactionCoordinatorService
from kmirror.metrics.group_metrics import GROUP_COORDINATOR_METRICS, register_group_coordinator_metrics
from kmirror.metrics.registry import GaugeFn, MetricsRegistry, metric_name
from kmirror.ports import Clock

TRANSACTION_COORDINATOR_METRICS = ("kafka.server", "transaction-coordinator-metrics")
PARTITION_STATES = ("loading", "active", "failed")


def register_coordinator_metrics(registry: MetricsRegistry, clock: Clock, groups: GroupCoordinatorService | None,
                                 transactions: TransactionCoordinatorService | None) -> None:
    if groups is not None:
        core = groups.core
        register_group_coordinator_metrics(registry, lambda: group_coordinator_metrics(core.state, core.sensors))
        _register_load_times(registry, clock, GROUP_COORDINATOR_METRICS, groups)
        for state in PARTITION_STATES:
            registry.gauge(metric_name(*GROUP_COORDINATOR_METRICS, "num-partitions", state=state),
                           _partitions_in(groups, state))
    if transactions is not None:
        _register_load_times(registry, clock, TRANSACTION_COORDINATOR_METRICS, transactions)


def _partitions_in(runtime: CoordinatorRuntime[Any], state: str) -> GaugeFn:
    return lambda: runtime.partition_counts()[state]


def _register_load_times(registry: MetricsRegistry, clock: Clock, group: tuple[str, str],
                         runtime: CoordinatorRuntime[Any]) -> None:
    now = clock.monotonic_ms
    registry.gauge(metric_name(*group, "partition-load-time-avg"), lambda: runtime.partition_load_time.avg(now()))
    registry.gauge(metric_name(*group, "partition-load-time-max"), lambda: runtime.partition_load_time.max(now()))

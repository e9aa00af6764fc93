"""What a node's group coordinator reports about the groups it has loaded (Kafka
`GroupCoordinatorMetrics`), computed from the coordinator's state when metrics are read.

- Kafka's `GroupMetadataManager` gauges: `NumOffsets` (committed offsets of every group),
  `NumGroups` (classic groups) and `NumGroups{PreparingRebalance,CompletingRebalance,Stable,
  Dead,Empty}` (classic groups per state);
- `group-coordinator-metrics`: `group-count` per protocol (classic, consumer) and
  `consumer-group-count` per state (empty, assigning, reconciling, stable, dead).
"""

from __future__ import annotations

from collections import Counter

from kmirror.coordinator.consumer_group.state import ConsumerGroupState
from kmirror.coordinator.group.coordinator import CoreState
from kmirror.coordinator.group.state import GroupState

CLASSIC_STATE_GAUGES: tuple[tuple[str, GroupState], ...] = (
    ("NumGroupsPreparingRebalance", GroupState.PREPARING_REBALANCE),
    ("NumGroupsCompletingRebalance", GroupState.COMPLETING_REBALANCE),
    ("NumGroupsStable", GroupState.STABLE),
    ("NumGroupsDead", GroupState.DEAD),
    ("NumGroupsEmpty", GroupState.EMPTY),
)
PROTOCOLS = ("classic", "consumer")


def group_coordinator_metrics(state: CoreState) -> dict[str, float]:
    """Keys: the `GroupMetadataManager` gauge names, `group-count:<protocol>` and
    `consumer-group-count:<state, lower case>`."""
    classic = Counter(group.state for group in state.groups.values())
    consumer = Counter(group.state for group in state.consumer_groups.values())
    values: dict[str, float] = {
        "NumOffsets": float(sum(len(g.offsets) for g in state.groups.values())
                            + sum(len(g.offsets) for g in state.consumer_groups.values())),
        "NumGroups": float(len(state.groups)),
        "group-count:classic": float(len(state.groups)),
        "group-count:consumer": float(len(state.consumer_groups)),
    }
    for name, group_state in CLASSIC_STATE_GAUGES:
        values[name] = float(classic[group_state])
    for consumer_state in ConsumerGroupState:
        values[f"consumer-group-count:{consumer_state.value.lower()}"] = float(consumer[consumer_state])
    return values

"""What a node's group coordinator reports about the groups it has loaded (Kafka
`GroupCoordinatorMetrics`), computed from the coordinator's state when metrics are read.

- `group-coordinator-metrics` (Kafka 4.4's names): `offset-count` (committed offsets of every
  group), `group-count` per protocol (classic, consumer, share), `classic-group-count`,
  `consumer-group-count` and `share-group-count` per state (Kafka's state names: Stable, Empty, ...);
- Kafka's `GroupMetadataManager` gauges, deprecated since Kafka 4.4 for the above and still
  served by it until 5.0: `NumOffsets`, `NumGroups` (classic groups) and
  `NumGroups{PreparingRebalance,CompletingRebalance,Stable,Dead,Empty}`;
- the sensors' meters (`kmirror.coordinator.group.sensors`): `<sensor>-rate` and `<sensor>-count`.
"""

from __future__ import annotations

from collections import Counter

from kmirror.coordinator.consumer_group.state import ConsumerGroupState
from kmirror.coordinator.group.coordinator import CoreState
from kmirror.coordinator.group.sensors import GroupCoordinatorSensors, GroupSensor
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.share_group.group import ShareGroupState

CLASSIC_STATE_GAUGES: tuple[tuple[str, GroupState], ...] = (
    ("NumGroupsPreparingRebalance", GroupState.PREPARING_REBALANCE),
    ("NumGroupsCompletingRebalance", GroupState.COMPLETING_REBALANCE),
    ("NumGroupsStable", GroupState.STABLE),
    ("NumGroupsDead", GroupState.DEAD),
    ("NumGroupsEmpty", GroupState.EMPTY),
)
PROTOCOLS = ("classic", "consumer", "share")


def group_coordinator_metrics(state: CoreState, sensors: GroupCoordinatorSensors) -> dict[str, float]:
    """Keys: the `GroupMetadataManager` gauge names, `offset-count`, `group-count:<protocol>`,
    `classic-group-count:<state>`, `consumer-group-count:<state>`, `share-group-count:<state>`, and each sensor's
    `<sensor>-rate` and `<sensor>-count`."""
    classic = Counter(group.state for group in state.groups.values())
    consumer = Counter(group.state for group in state.consumer_groups.values())
    values: dict[str, float] = {
        "NumOffsets": float(sum(len(g.offsets) for g in state.groups.values())
                            + sum(len(g.offsets) for g in state.consumer_groups.values())),
        "NumGroups": float(len(state.groups)),
        "group-count:classic": float(len(state.groups)),
        "group-count:consumer": float(len(state.consumer_groups)),
        "group-count:share": float(len(state.share_groups)),
    }
    values["offset-count"] = values["NumOffsets"]
    for name, group_state in CLASSIC_STATE_GAUGES:
        values[name] = values[f"classic-group-count:{group_state.value}"] = float(classic[group_state])
    for consumer_state in ConsumerGroupState:
        values[f"consumer-group-count:{consumer_state.value}"] = float(consumer[consumer_state])
    share = Counter(group.state for group in state.share_groups.values())
    for share_state in ShareGroupState:
        values[f"share-group-count:{share_state.value}"] = float(share[share_state])
    for sensor in GroupSensor:
        values[f"{sensor.value}-rate"] = sensors.rate(sensor)
        values[f"{sensor.value}-count"] = float(sensors.count(sensor))
    return values

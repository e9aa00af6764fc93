"""group_coordinator_metrics: Kafka's group coordinator gauges from the loaded groups."""

from __future__ import annotations

from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.group.coordinator import CoreState
from kmirror.coordinator.group.group import ClassicGroup
from kmirror.coordinator.group.metrics import group_coordinator_metrics
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.offsets.records import OffsetAndMetadata
from kmirror.types import TopicPartition


def _offsets(n: int) -> dict[TopicPartition, OffsetAndMetadata]:
    return {TopicPartition("t", p): OffsetAndMetadata(offset=p, leader_epoch=-1, metadata="", commit_timestamp_ms=0)
            for p in range(n)}


def test_groups_are_counted_per_protocol_and_state_with_their_offsets() -> None:
    state = CoreState()
    state.groups["a"] = ClassicGroup("a", GroupState.STABLE, offsets=_offsets(3))
    state.groups["b"] = ClassicGroup("b", GroupState.STABLE)
    state.groups["c"] = ClassicGroup("c", GroupState.PREPARING_REBALANCE, offsets=_offsets(1))
    state.groups["d"] = ClassicGroup("d", GroupState.EMPTY, offsets=_offsets(2))
    state.consumer_groups["e"] = ConsumerGroup("e", offsets=_offsets(4))
    values = group_coordinator_metrics(state)
    assert values["NumOffsets"] == 10
    assert values["NumGroups"] == 4
    assert (values["NumGroupsStable"], values["NumGroupsPreparingRebalance"], values["NumGroupsCompletingRebalance"],
            values["NumGroupsEmpty"], values["NumGroupsDead"]) == (2, 1, 0, 1, 0)
    assert (values["group-count:classic"], values["group-count:consumer"]) == (4, 1)
    assert values["consumer-group-count:Empty"] == 1
    assert values["consumer-group-count:Stable"] == values["consumer-group-count:Assigning"] == 0
    assert values["offset-count"] == 10  # Kafka 4.4's names beside the deprecated ones
    assert (values["classic-group-count:Stable"], values["classic-group-count:PreparingRebalance"],
            values["classic-group-count:Empty"]) == (2, 1, 1)


def test_a_node_without_groups_reports_zeros() -> None:
    values = group_coordinator_metrics(CoreState())
    assert set(values.values()) == {0.0}
    assert len(values) == 2 + 5 + 1 + 2 + 5 + 5

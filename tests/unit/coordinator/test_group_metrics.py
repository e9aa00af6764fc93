"""group_coordinator_metrics: Kafka's group coordinator gauges from the loaded groups."""

from __future__ import annotations

from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.group.coordinator import CoreState
from kmirror.coordinator.group.group import ClassicGroup
from kmirror.coordinator.group.metrics import group_coordinator_metrics
from kmirror.coordinator.group.sensors import GroupCoordinatorSensors
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.offsets.commits import OffsetToCommit, commit_offsets, delete_offsets
from kmirror.coordinator.offsets.records import OffsetAndMetadata
from kmirror.coordinator.share_group.group import ShareGroup, ShareGroupMember
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode as E
from kmirror.testing.consumer_groups import ConsumerGroups
from kmirror.testing.groups import CoreHarness
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
    state.share_groups["f"] = ShareGroup("f", members={"m": ShareGroupMember("m")})
    state.share_groups["g"] = ShareGroup("g")
    values = group_coordinator_metrics(state, GroupCoordinatorSensors(ManualClock()))
    assert values["NumOffsets"] == 10
    assert values["NumGroups"] == 4
    assert (values["NumGroupsStable"], values["NumGroupsPreparingRebalance"], values["NumGroupsCompletingRebalance"],
            values["NumGroupsEmpty"], values["NumGroupsDead"]) == (2, 1, 0, 1, 0)
    assert (values["group-count:classic"], values["group-count:consumer"]) == (4, 1)
    assert values["consumer-group-count:Empty"] == 1
    assert values["consumer-group-count:Stable"] == values["consumer-group-count:Assigning"] == 0
    assert values["offset-count"] == 10  # Kafka 4.4's names beside the deprecated ones
    assert values["group-count:share"] == 2
    assert (values["share-group-count:Stable"], values["share-group-count:Empty"]) == (1, 1)
    assert (values["classic-group-count:Stable"], values["classic-group-count:PreparingRebalance"],
            values["classic-group-count:Empty"]) == (2, 1, 1)


def test_a_node_without_groups_reports_zeros() -> None:
    values = group_coordinator_metrics(CoreState(), GroupCoordinatorSensors(ManualClock()))
    assert set(values.values()) == {0.0}
    assert len(values) == 2 + 5 + 1 + 3 + 5 + 5 + 3 + 2 * 5


def _meters(core) -> dict[str, float]:
    values = group_coordinator_metrics(core.state, core.sensors)
    return {k: v for k, v in values.items() if k.endswith(("-rate", "-count")) and ":" not in k}


def _commit(h: CoreHarness, group: str, offsets: tuple[tuple[str, int, int], ...], generation=-1, member="") -> None:
    rid = h.next_request_id()
    h.run(commit_offsets(h.core, rid, group_id=group, generation_id=generation, member_id=member,
                         group_instance_id=None, offsets=[OffsetToCommit(t, p, o, -1, None) for t, p, o in offsets]))
    assert {p.error for p in h.responses[rid].partitions} == {E.none}


def test_the_sensors_count_commits_deletions_expirations_and_classic_rebalances_as_kafka_records_them() -> None:
    h = CoreHarness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1)
    member = h.new_member()
    generation = h.core.groups["g"].generation_id
    h.sync(member, generation, {member: b""})  # the leader's SyncGroup completes the rebalance
    _commit(h, "g", (("t", 0, 5), ("t", 1, 7)), generation, member)
    _commit(h, "simple", (("a", 0, 1), ("b", 0, 1), ("b", 1, 1)))
    rid = h.next_request_id()
    h.run(delete_offsets(h.core, rid, group_id="simple", partitions=[("a", 0), ("a", 9)], subscribed_topics=None))
    assert h.responses[rid].error == E.none
    meters = _meters(h.core)
    assert (meters["offset-commit-count"], meters["offset-deletion-count"],
            meters["group-completed-rebalance-count"]) == (5, 1, 1)  # ("a", 9) had no offset to delete
    # Kafka's Meter: a rate over 2 samples of 30 s, never over less than one full window
    assert meters["offset-commit-rate"] == 5 / 30
    assert meters["offset-expiration-count"] == meters["consumer-group-rebalance-count"] == 0
    h.advance(60_000)  # the 2 offsets left to "simple" expire
    meters = _meters(h.core)
    assert meters["offset-expiration-count"] == 2
    assert meters["offset-expiration-rate"] == 2 / 30
    assert meters["offset-commit-count"] == 5 and meters["offset-commit-rate"] == 0  # out of the window


def test_the_sensors_count_a_consumer_groups_epoch_bumps() -> None:
    cg = ConsumerGroups()
    cg.join("a")
    cg.join("b")  # each join bumps the group epoch: a rebalance
    cg.beat("a")
    assert _meters(cg.core)["consumer-group-rebalance-count"] == 2
    assert cg.core.consumer_groups["g"].group_epoch == 2


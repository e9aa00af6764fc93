"""Partition reassignment on the controller: grow, catch up through AlterPartition, complete
(with a leader election when the leader leaves), cancel, and the errors Kafka gives."""

import uuid

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.alter_partition import AlterPartitionItem, alter_partition
from kmirror.metadata.controller.reassignment import (
    ReassignmentTarget,
    alter_partition_reassignments,
    list_partition_reassignments,
)
from kmirror.metadata.image import ConfigResourceType, MetadataImage
from kmirror.metadata.records import ConfigRecord, PartitionRecord, Record, TopicRecord, decode, encode
from kmirror.testing.metadata import image_with_brokers

TID = uuid.UUID(int=7)
ELIGIBLE = (1, 2, 3, 4, 5)


def _apply(image: MetadataImage, records: list[Record]) -> MetadataImage:
    return image.apply(records, image.offset + max(1, len(records)))


def _cluster(replicas=(1, 2), isr=None, leader=None) -> MetadataImage:
    image = image_with_brokers(1, 2, 3, 4, 5)
    return _apply(image, [
        TopicRecord("t", TID),
        PartitionRecord(0, TID, tuple(replicas), tuple(isr if isr is not None else replicas),
                        replicas[0] if leader is None else leader),
    ])


def _p(image: MetadataImage):
    return image.topics["t"].partitions[0]


def _reassign(image, replicas, *, allow_rf_change=True, topic="t", partition=0, unclean=False):
    result = alter_partition_reassignments(
        image, {topic: [ReassignmentTarget(partition, replicas)]}, ELIGIBLE, unclean, allow_rf_change)
    assert result.response is not None and len(result.response) == 1
    for r in result.records:  # every record survives the metadata log's codec
        assert decode(encode(r)) == r
    return _apply(image, result.records), result.response[0].error


def _expand(image, broker, new_isr):
    reg = _p(image)
    item = AlterPartitionItem(TID, 0, reg.leader_epoch, tuple(new_isr), reg.partition_epoch)
    result = alter_partition(image, reg.leader, image.brokers[reg.leader].broker_epoch, [item])
    assert result.response is not None
    return _apply(image, result.records), result.response[1][0]


def test_move_grows_then_completes_when_the_new_replicas_join_the_isr() -> None:
    image = _cluster((1, 2))
    image, error = _reassign(image, (3, 4))
    assert error.code == ErrorCode.none
    reg = _p(image)
    assert reg.replicas == (3, 4, 1, 2) and reg.adding_replicas == (3, 4) and reg.removing_replicas == (1, 2)
    assert reg.isr == (1, 2) and reg.leader == 1 and reg.leader_epoch == 0
    assert [(o.topic, o.partition, o.replicas) for o in list_partition_reassignments(image, None)] == [
        ("t", 0, (3, 4, 1, 2))]
    image, answer = _expand(image, 3, (1, 2, 3))
    assert answer.error.code == ErrorCode.none and _p(image).isr == (1, 2, 3) and _p(image).is_reassigning
    epoch = _p(image).leader_epoch
    image, answer = _expand(image, 4, (1, 2, 3, 4))
    assert answer.error.code == ErrorCode.new_leader_elected
    reg = _p(image)
    assert reg.replicas == (3, 4) and reg.isr == (3, 4) and reg.leader == 3
    assert not reg.is_reassigning and reg.leader_epoch == epoch + 1
    assert list_partition_reassignments(image, None) == []


def test_removing_a_follower_completes_at_once_and_bumps_the_leader_epoch() -> None:
    image = _cluster((1, 2, 3))
    image, error = _reassign(image, (1, 2))
    reg = _p(image)
    assert error.code == ErrorCode.none and reg.replicas == (1, 2) and reg.isr == (1, 2)
    assert reg.leader == 1 and reg.leader_epoch == 1 and not reg.is_reassigning


def test_reorder_only_changes_replicas() -> None:
    image = _cluster((1, 2))
    image, error = _reassign(image, (2, 1))
    reg = _p(image)
    assert error.code == ErrorCode.none and reg.replicas == (2, 1) and reg.leader == 1 and reg.leader_epoch == 0


def test_same_assignment_writes_nothing() -> None:
    image = _cluster((1, 2))
    result = alter_partition_reassignments(image, {"t": [ReassignmentTarget(0, (1, 2))]}, ELIGIBLE, False)
    assert result.records == [] and result.response[0].error.code == ErrorCode.none


def test_cancel_reverts_to_the_original_replicas() -> None:
    image = _cluster((1, 2))
    image, _ = _reassign(image, (3, 4))
    image, _ = _expand(image, 3, (1, 2, 3))
    image, error = _reassign(image, None)
    reg = _p(image)
    assert error.code == ErrorCode.none
    assert reg.replicas == (1, 2) and reg.isr == (1, 2) and not reg.is_reassigning and reg.leader == 1
    image, error = _reassign(image, None)
    assert error.code == ErrorCode.no_reassignment_in_progress


def test_cancel_needing_an_unclean_election_is_refused_unless_allowed() -> None:
    image = _cluster((1, 2))
    image, _ = _reassign(image, (3, 4))
    image, _ = _expand(image, 3, (1, 2, 3))
    # the original replicas leave the ISR (e.g. fenced), the added one alone is in sync
    reg = _p(image)
    image = _apply(image, [PartitionRecord(0, TID, reg.replicas, (3,), 3, reg.leader_epoch + 1, reg.partition_epoch + 1,
                                           reg.removing_replicas, reg.adding_replicas)])
    _, error = _reassign(image, None)
    assert error.code == ErrorCode.invalid_replica_assignment and "unclean" in (error.message or "")
    image = _apply(image, [ConfigRecord(ConfigResourceType.TOPIC, "t", "unclean.leader.election.enable", "true")])
    image, error = _reassign(image, None)
    reg = _p(image)
    assert error.code == ErrorCode.none and reg.replicas == (1, 2) and reg.isr == (1,) and reg.leader == 1


def test_errors_as_kafka() -> None:
    image = _cluster((1, 2))
    assert _reassign(image, (3,), topic="nope")[1].code == ErrorCode.unknown_topic_or_partition
    assert _reassign(image, (3,), partition=5)[1].code == ErrorCode.unknown_topic_or_partition
    assert _reassign(image, ())[1].code == ErrorCode.invalid_replica_assignment
    assert _reassign(image, (3, 3))[1].code == ErrorCode.invalid_replica_assignment
    assert _reassign(image, (3, 9))[1].code == ErrorCode.invalid_replica_assignment
    assert _reassign(image, (3,), allow_rf_change=False)[1].code == ErrorCode.invalid_replication_factor
    assert _reassign(image, (3, 4), allow_rf_change=False)[1].code == ErrorCode.none


def test_rf_change_check_counts_the_ongoing_target() -> None:
    image = _cluster((1, 2))
    image, _ = _reassign(image, (3, 4, 5))
    assert _p(image).replicas == (3, 4, 5, 1, 2)
    assert _reassign(image, (3, 4), allow_rf_change=False)[1].code == ErrorCode.invalid_replication_factor
    assert _reassign(image, (1, 2, 3), allow_rf_change=False)[1].code == ErrorCode.none


def test_list_filters_by_topic_and_partition() -> None:
    image = _cluster((1, 2))
    image, _ = _reassign(image, (1, 3))
    assert [o.partition for o in list_partition_reassignments(image, {"t": [0, 1]})] == [0]
    assert list_partition_reassignments(image, {"t": [1]}) == []
    assert list_partition_reassignments(image, {"other": [0]}) == []
    o = list_partition_reassignments(image, {"t": [0]})[0]
    assert (o.replicas, o.adding_replicas, o.removing_replicas) == ((1, 3, 2), (3,), (2,))

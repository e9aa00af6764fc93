"""Controller rules for cluster membership: registration, heartbeats, fencing, controlled
shutdown, ISR removal, clean/unclean/preferred elections, AlterPartition validation, placement."""

import uuid

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.alter_partition import AlterPartitionItem, alter_partition
from kmirror.metadata.controller.brokers import (
    BrokerHeartbeatManager,
    broker_heartbeat,
    fence_broker,
    register_broker,
    unregister_broker,
)
from kmirror.metadata.controller.elections import PREFERRED, UNCLEAN, elect_leaders
from kmirror.metadata.controller.partition_change import eligible_brokers, imbalanced_partitions
from kmirror.metadata.controller.placement import place_replicas, rack_alternated
from kmirror.metadata.image import ConfigResourceType, MetadataImage
from kmirror.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    PartitionRecord,
    Record,
    TopicRecord,
)
from kmirror.testing.metadata import image_with_brokers, seeded_rng

TID = uuid.UUID(int=7)


def _apply(image: MetadataImage, records: list[Record]) -> MetadataImage:
    return image.apply(records, image.offset + max(1, len(records)))


def _cluster(replicas=(1, 2, 3), isr=None, leader=None, fenced=(), unclean=None) -> MetadataImage:
    image = image_with_brokers(1, 2, 3, fenced=fenced)
    records: list[Record] = [
        TopicRecord("t", TID),
        PartitionRecord(0, TID, tuple(replicas), tuple(isr if isr is not None else replicas),
                        replicas[0] if leader is None else leader),
    ]
    if unclean is not None:
        records.append(ConfigRecord(ConfigResourceType.TOPIC, "t", "unclean.leader.election.enable", unclean))
    return _apply(image, records)


def _p(image: MetadataImage):
    return image.topics["t"].partitions[0]


def test_registration_is_fenced_until_a_caught_up_heartbeat() -> None:
    image = image_with_brokers(1)
    hb = BrokerHeartbeatManager()
    result = register_broker(image, 5, uuid.UUID(int=99), (BrokerEndpoint("PLAINTEXT", "h", 1),), "r1", hb)
    image = _apply(image, result.records)
    epoch = result.response
    assert image.brokers[5].fenced and image.brokers[5].broker_epoch == epoch
    behind = broker_heartbeat(image, 5, epoch, epoch - 1, False, False, hb, 0, False)
    assert behind.records == [] and behind.response.is_fenced
    caught_up = broker_heartbeat(image, 5, epoch, epoch, False, False, hb, 0, False)
    image = _apply(image, caught_up.records)
    assert not image.brokers[5].fenced and not caught_up.response.is_fenced


def test_heartbeat_errors() -> None:
    image = image_with_brokers(1)
    hb = BrokerHeartbeatManager()
    assert broker_heartbeat(image, 9, 0, 0, False, False, hb, 0, False).response.error.code == ErrorCode.broker_id_not_registered
    assert broker_heartbeat(image, 1, 12345, 0, False, False, hb, 0, False).response.error.code == ErrorCode.stale_broker_epoch


def test_session_expiry_lists_silent_unfenced_brokers() -> None:
    image = image_with_brokers(1, 2, fenced=(2,))
    hb = BrokerHeartbeatManager(session_timeout_ms=9000)
    assert hb.expired(image, 1000) == []
    hb.touch(1, 1000)
    assert hb.expired(image, 10_000) == []
    assert hb.expired(image, 10_001) == [1]


def test_fencing_the_leader_elects_from_the_isr_and_bumps_epochs() -> None:
    image = _cluster()
    before = _p(image)
    image = _apply(image, fence_broker(image, 1, BrokerHeartbeatManager(), False).records)
    after = _p(image)
    assert image.brokers[1].fenced
    assert after.leader == 2 and after.isr == (2, 3)
    assert after.leader_epoch == before.leader_epoch + 1
    assert after.partition_epoch == before.partition_epoch + 1


def test_fencing_a_follower_shrinks_the_isr_without_leader_change() -> None:
    image = _cluster()
    image = _apply(image, fence_broker(image, 3, BrokerHeartbeatManager(), False).records)
    assert _p(image).leader == 1 and _p(image).isr == (1, 2) and _p(image).leader_epoch == 0


def test_fencing_the_last_isr_member_keeps_it_and_goes_offline() -> None:
    image = _cluster(isr=(1,))
    image = _apply(image, fence_broker(image, 1, BrokerHeartbeatManager(), False).records)
    assert _p(image).leader == -1 and _p(image).isr == (1,)


def test_unclean_election_only_with_the_flag_topic_over_broker() -> None:
    hb = BrokerHeartbeatManager()
    clean_only = _cluster(isr=(1,), unclean="false")
    image = _apply(clean_only, fence_broker(clean_only, 1, hb, True).records)
    assert _p(image).leader == -1
    unclean = _cluster(isr=(1,), unclean="true")
    image = _apply(unclean, fence_broker(unclean, 1, hb, False).records)
    assert _p(image).leader == 2 and _p(image).isr == (2,)
    assert hb.unclean_warnings == [("t", 0, 2)]
    broker_level = _cluster(isr=(1,))
    image = _apply(broker_level, fence_broker(broker_level, 1, BrokerHeartbeatManager(), True).records)
    assert _p(image).leader == 2


def test_unfencing_the_last_isr_member_brings_the_partition_back() -> None:
    hb = BrokerHeartbeatManager()
    image = _cluster(isr=(1,))
    image = _apply(image, fence_broker(image, 1, hb, False).records)
    epoch = image.brokers[1].broker_epoch
    result = broker_heartbeat(image, 1, epoch, epoch, False, False, hb, 0, False)
    image = _apply(image, result.records)
    assert not image.brokers[1].fenced and _p(image).leader == 1 and _p(image).leader_epoch == 2


def test_controlled_shutdown_moves_leadership_then_allows_shutdown() -> None:
    hb = BrokerHeartbeatManager()
    image = _cluster()
    epoch = image.brokers[1].broker_epoch
    first = broker_heartbeat(image, 1, epoch, image.offset, False, True, hb, 0, False)
    assert not first.response.should_shut_down
    image = _apply(image, first.records)
    assert _p(image).leader == 2 and 1 not in _p(image).isr
    second = broker_heartbeat(image, 1, epoch, image.offset, False, True, hb, 0, False)
    assert second.response.should_shut_down
    image = _apply(image, second.records)
    assert image.brokers[1].fenced
    # a broker in controlled shutdown cannot be elected or re-enter an ISR
    assert 1 not in eligible_brokers(image, hb.shutting_down)


def test_a_controlled_shutdown_is_pending_from_its_first_request_until_it_is_granted() -> None:
    """What a stopping voter waits for: asked of the active controller (not committed yet), then
    in the image, until the grant fences the broker."""
    hb = BrokerHeartbeatManager()
    image = _cluster()
    epoch = image.brokers[1].broker_epoch
    first = broker_heartbeat(image, 1, epoch, image.offset, False, True, hb, 0, False)
    assert hb.controlled_shutdowns_pending(image, asked=True) == [1]
    assert hb.controlled_shutdowns_pending(image, asked=False) == []  # a follower sees only the image
    image = _apply(image, first.records)
    assert hb.controlled_shutdowns_pending(image, asked=False) == [1]
    image = _apply(image, broker_heartbeat(image, 1, epoch, image.offset, False, True, hb, 0, False).records)
    assert hb.controlled_shutdowns_pending(image, asked=True) == []


def test_controlled_shutdown_is_in_the_metadata_log_so_every_image_and_a_new_controller_know_it() -> None:
    hb = BrokerHeartbeatManager()
    image = _cluster()
    epoch = image.brokers[1].broker_epoch
    first = broker_heartbeat(image, 1, epoch, image.offset, False, True, hb, 0, False)
    changes = [r for r in first.records if isinstance(r, BrokerRegistrationChangeRecord)]
    assert changes == [BrokerRegistrationChangeRecord(1, epoch, in_controlled_shutdown=1)]
    image = _apply(image, first.records)
    assert image.brokers[1].in_controlled_shutdown and not image.is_isr_eligible(1)
    assert image.is_isr_eligible(2) and not image.is_isr_eligible(2, broker_epoch=epoch + 1000)
    # a controller that never saw the heartbeats (empty shutting_down set) keeps it ineligible
    assert 1 not in eligible_brokers(image)
    # the record is written once; the next heartbeat may shut the broker down
    second = broker_heartbeat(image, 1, epoch, image.offset, False, True, hb, 0, False)
    assert not any(isinstance(r, BrokerRegistrationChangeRecord) for r in second.records)
    assert second.response.should_shut_down
    # a new registration (the restarted broker) ends it
    result = register_broker(image, 1, uuid.UUID(int=12345), image.brokers[1].endpoints, None, hb)
    image = _apply(image, result.records)
    assert not image.brokers[1].in_controlled_shutdown


def _alter(image, broker=1, epoch=None, leader_epoch=0, isr=(1, 2), partition_epoch=0, topic=TID, shutting=()):
    b_epoch = image.brokers[broker].broker_epoch if epoch is None else epoch
    item = AlterPartitionItem(topic, 0, leader_epoch, tuple(isr), partition_epoch)
    return alter_partition(image, broker, b_epoch, [item], shutting)


def test_alter_partition_accepts_an_isr_shrink() -> None:
    image = _cluster()
    result = _alter(image)
    top, (item,) = result.response
    assert top.code == ErrorCode.none and item.error.code == ErrorCode.none
    assert item.isr == (1, 2) and item.partition_epoch == 1 and item.leader_epoch == 0
    assert _p(_apply(image, result.records)).isr == (1, 2)


def test_alter_partition_validation() -> None:
    image = _cluster(fenced=(3,))

    def code(**kw):
        top, items = _alter(image, **kw).response
        return top.code if top.code != ErrorCode.none else items[0].error.code

    assert code(epoch=999) == ErrorCode.stale_broker_epoch
    assert code(topic=uuid.UUID(int=12345)) == ErrorCode.unknown_topic_id
    assert code(broker=2) == ErrorCode.not_leader_or_follower
    assert code(leader_epoch=5) == ErrorCode.fenced_leader_epoch
    assert code(partition_epoch=3) == ErrorCode.invalid_update_version
    assert code(isr=(2,)) == ErrorCode.invalid_request
    assert code(isr=(1, 3)) == ErrorCode.ineligible_replica
    assert code(isr=(1, 2), shutting=(2,)) == ErrorCode.ineligible_replica
    assert _alter(image, isr=(1, 3)).records == []


def test_preferred_election() -> None:
    image = _cluster(leader=2)
    eligible = eligible_brokers(image)
    result = elect_leaders(image, PREFERRED, {"t": [0, 9]}, eligible)
    assert [r.error.code for r in result.response] == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    image = _apply(image, result.records)
    assert _p(image).leader == 1 and _p(image).leader_epoch == 1
    again = elect_leaders(image, PREFERRED, {"t": [0]}, eligible)
    assert again.response[0].error.code == ErrorCode.election_not_needed
    not_in_isr = _cluster(leader=2, isr=(2, 3))
    res = elect_leaders(not_in_isr, PREFERRED, {"t": [0]}, eligible_brokers(not_in_isr))
    assert res.response[0].error.code == ErrorCode.preferred_leader_not_available
    assert len(imbalanced_partitions(_cluster(leader=2), eligible)) == 1


def test_unclean_election_api() -> None:
    image = _cluster(isr=(1,), leader=-1, fenced=(1,))
    result = elect_leaders(image, UNCLEAN, {"t": [0]}, eligible_brokers(image))
    assert result.response[0].error.code == ErrorCode.none and result.response[0].unclean_leader == 2
    image = _apply(image, result.records)
    assert _p(image).leader == 2 and _p(image).isr == (2,)
    again = elect_leaders(image, UNCLEAN, {"t": [0]}, eligible_brokers(image))
    assert again.response[0].error.code == ErrorCode.election_not_needed
    nobody = _cluster(isr=(1,), leader=-1, fenced=(1, 2, 3))
    res = elect_leaders(nobody, UNCLEAN, {"t": [0]}, eligible_brokers(nobody))
    assert res.response[0].error.code == ErrorCode.eligible_leaders_not_available


def test_election_of_all_partitions_reports_errors_but_not_elections_not_needed() -> None:
    # Kafka's electLeaders with null partitions: ELECTION_NOT_NEEDED results are left out,
    # failures and performed elections are reported.
    balanced = _cluster()
    assert elect_leaders(balanced, PREFERRED, None, eligible_brokers(balanced)).response == []
    not_in_isr = _cluster(leader=2, isr=(2, 3))
    res = elect_leaders(not_in_isr, PREFERRED, None, eligible_brokers(not_in_isr))
    assert [(r.topic, r.partition, r.error.code) for r in res.response] == [
        ("t", 0, ErrorCode.preferred_leader_not_available)]
    nobody = _cluster(isr=(1,), leader=-1, fenced=(1, 2, 3))
    res = elect_leaders(nobody, UNCLEAN, None, eligible_brokers(nobody))
    assert [r.error.code for r in res.response] == [ErrorCode.eligible_leaders_not_available]


def test_rack_alternated_order() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c"}
    assert rack_alternated([1, 2, 3, 4, 5], racks) == [1, 3, 5, 2, 4]


def test_rack_aware_placement_spreads_replicas_over_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    placed = place_replicas(list(racks), 0, 12, 3, seeded_rng(3), racks)
    assert isinstance(placed, list)
    for replicas in placed:
        assert len(set(replicas)) == 3
        assert len({racks[b] for b in replicas}) == 3
    leaders = [r[0] for r in placed]
    assert {leaders.count(b) for b in racks} == {2}


def test_rack_aware_placement_with_fewer_racks_than_replicas() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    placed = place_replicas(list(racks), 0, 8, 3, seeded_rng(1), racks)
    assert isinstance(placed, list)
    for replicas in placed:
        assert len(set(replicas)) == 3 and {racks[b] for b in replicas} == {"a", "b"}


def test_unregistering_a_fenced_broker_removes_its_registration_and_a_running_one_is_refused() -> None:
    image = _cluster()
    hb = BrokerHeartbeatManager()
    hb.touch(1, 0)
    running = unregister_broker(image, 1, hb, False)
    assert running.records == [] and running.response.code == ErrorCode.invalid_request
    assert "Broker 1 is unfenced" in running.response.message
    image = _apply(image, fence_broker(image, 1, hb, False).records)
    result = unregister_broker(image, 1, hb, False)
    assert result.response.code == ErrorCode.none
    image = _apply(image, result.records)
    assert 1 not in image.brokers and 1 not in hb.last_contact_ms
    assert _p(image).leader in (2, 3) and 1 not in _p(image).isr and 1 in _p(image).replicas
    again = unregister_broker(image, 1, hb, False)
    assert again.records == [] and again.response.code == ErrorCode.broker_id_not_registered
    assert again.response.message == "Broker ID 1 is not currently registered"

"""Vote and BeginQuorumEpoch on a controller's listener: the checks before the quorum, and its
answers carried to the wire."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.testing.metadata import call, metadata_services, request_entity, server_config

VOTERS = "3000@127.0.0.1:9093,3001@127.0.0.1:9094,3002@127.0.0.1:9095"


def voter_services() -> Any:
    return metadata_services(server_config(3000, process_roles="controller", listeners="CONTROLLER://127.0.0.1:9093",
                                           controller_listener_names="CONTROLLER", controller_quorum_voters=VOTERS))


def vote(services: Any, candidate: int, epoch: int, topic: str = "__cluster_metadata") -> Any:
    partition = request_entity(52, 0, "PartitionData", partition_index=0, replica_epoch=epoch, replica_id=candidate,
                               last_offset_epoch=0, last_offset=0)
    return call(services, 52, 0, {"cluster_id": None, "topics": (
        request_entity(52, 0, "TopicData", topic_name=topic, partitions=(partition,)),)}, plane="controller")


def begin(services: Any, leader: int, epoch: int) -> Any:
    partition = request_entity(53, 0, "PartitionData", partition_index=0, leader_id=leader, leader_epoch=epoch)
    return call(services, 53, 0, {"cluster_id": None, "topics": (
        request_entity(53, 0, "TopicData", topic_name="__cluster_metadata", partitions=(partition,)),)},
                plane="controller")


def test_a_single_voter_takes_no_votes() -> None:
    assert vote(metadata_services(), 2, 1).error_code == ErrorCode.inconsistent_voter_set


def test_a_vote_once_per_epoch_to_voters_only_and_the_leader_that_begins_its_epoch() -> None:
    services = voter_services()
    assert vote(services, 3001, 1, topic="orders").error_code == ErrorCode.unknown_topic_or_partition
    outsider = vote(services, 9, 1).topics[0].partitions[0]
    assert outsider.error_code == ErrorCode.inconsistent_voter_set and not outsider.vote_granted
    granted = vote(services, 3001, 1).topics[0].partitions[0]
    assert (granted.error_code, granted.leader_epoch, granted.vote_granted) == (ErrorCode.none, 1, True)
    assert not vote(services, 3002, 1).topics[0].partitions[0].vote_granted  # it voted in epoch 1
    assert vote(services, 3002, 2).topics[0].partitions[0].vote_granted  # a newer epoch
    stale = vote(services, 3001, 1).topics[0].partitions[0]
    assert (stale.error_code, stale.leader_epoch) == (ErrorCode.fenced_leader_epoch, 2)

    started = begin(services, 3002, 2).topics[0].partitions[0]
    assert (started.error_code, started.leader_id, started.leader_epoch) == (ErrorCode.none, 3002, 2)
    assert services.metadata.controller_id == 3002 and not services.metadata.active
    assert begin(services, 3001, 1).topics[0].partitions[0].error_code == ErrorCode.fenced_leader_epoch

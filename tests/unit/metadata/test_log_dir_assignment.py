"""KIP-858 on the controller: replicas' log directories (placed by default, named by
AssignReplicasToDirs), a heartbeat's failed directories taking those replicas out of their ISRs
and leaderships, and elections that never pick a replica whose directory is offline."""

import uuid

from kio.schema.errors import ErrorCode

from kmirror.metadata import directories as dir_ids
from kmirror.metadata.controller.brokers import BrokerHeartbeatManager, broker_heartbeat, register_broker
from kmirror.metadata.controller.log_dirs import DirAssignment, assign_replicas_to_dirs, default_directories
from kmirror.metadata.controller.partition_change import elect_offline_partitions, eligible_brokers
from kmirror.metadata.image import EMPTY_IMAGE, MetadataImage
from kmirror.metadata.records import (
    BrokerEndpoint,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    TopicRecord,
    decode,
    encode,
)
from kmirror.metadata.snapshot import snapshot_records
from kmirror.replication.log_dirs import dir_assignments
from kmirror.testing.metadata import image_with_brokers
from kmirror.types import TopicPartition

A, B, C = uuid.UUID(int=0xA000), uuid.UUID(int=0xB000), uuid.UUID(int=0xC000)  # broker 5's two log dirs, 6's one
TOPIC_ID = uuid.UUID(int=0x70)
ENDPOINTS = (BrokerEndpoint("PLAINTEXT", "h", 1),)


def _apply(image: MetadataImage, records: list[Record]) -> MetadataImage:
    return image.apply(records, image.offset + max(1, len(records)))


def _cluster() -> tuple[MetadataImage, int, BrokerHeartbeatManager]:
    """Brokers 1, 2, 3 and 5 (with dirs A and B), unfenced; topic t: partitions 0-3 on (5, 1, 2), led by 5."""
    hb = BrokerHeartbeatManager()
    image = image_with_brokers(1, 2, 3)
    registered = register_broker(image, 5, uuid.UUID(int=99), ENDPOINTS, None, hb, (A, B))
    image = _apply(image, registered.records)
    epoch = registered.response
    assert epoch is not None
    image = _apply(image, broker_heartbeat(image, 5, epoch, epoch, False, False, hb, 0, False).records)
    records: list[Record] = [TopicRecord("t", TOPIC_ID)]
    records += [PartitionRecord(p, TOPIC_ID, (5, 1, 2), (5, 1, 2), 5, directories=default_directories(image, (5, 1, 2)))
                for p in range(4)]
    return _apply(image, records), epoch, hb


def test_a_new_replica_is_in_its_brokers_only_dir_else_unassigned_until_the_broker_names_one() -> None:
    image, epoch, _ = _cluster()
    reg = image.topics["t"].partitions[0]
    assert reg.directory(5) == dir_ids.UNASSIGNED  # two dirs: the broker will say which
    single = register_broker(image, 6, uuid.UUID(int=98), ENDPOINTS, None, BrokerHeartbeatManager(), (C,))
    assert default_directories(_apply(image, single.records), (6, 5)) == (C, dir_ids.UNASSIGNED)
    asked = [DirAssignment(A, TOPIC_ID, 0), DirAssignment(A, TOPIC_ID, 1), DirAssignment(B, TOPIC_ID, 2),
             DirAssignment(B, TOPIC_ID, 3), DirAssignment(A, uuid.UUID(int=0x71), 0), DirAssignment(A, TOPIC_ID, 9)]
    result = assign_replicas_to_dirs(image, 5, epoch, asked, eligible_brokers(image), False)
    assert result.response is not None
    error, errors, _ = result.response
    assert error.code == ErrorCode.none
    assert [errors[a].code for a in asked] == [ErrorCode.none] * 4 + [ErrorCode.unknown_topic_id,
                                                                       ErrorCode.unknown_topic_or_partition]
    assert all(isinstance(r, PartitionChangeRecord) and r.isr is None for r in result.records)  # only directories
    image = _apply(image, result.records)
    assert [image.topics["t"].partitions[p].directory(5) for p in range(4)] == [A, A, B, B]
    again = assign_replicas_to_dirs(image, 5, epoch, asked[:4], eligible_brokers(image), False)
    assert again.records == []  # nothing changes: nothing written
    stale = assign_replicas_to_dirs(image, 5, epoch - 1, asked[:1], eligible_brokers(image), False)
    assert stale.response is not None and stale.response[0].code == ErrorCode.stale_broker_epoch
    not_replica = assign_replicas_to_dirs(image, 3, image.brokers[3].broker_epoch, asked[:1], eligible_brokers(image), False)
    assert not_replica.response is not None and not_replica.response[1][asked[0]].code == ErrorCode.not_leader_or_follower


def test_a_failed_dir_moves_only_its_replicas_out_of_isrs_and_leaderships_and_nobody_elects_them() -> None:
    image, epoch, hb = _cluster()
    assigned = [DirAssignment(A, TOPIC_ID, 0), DirAssignment(A, TOPIC_ID, 1), DirAssignment(B, TOPIC_ID, 2),
                DirAssignment(B, TOPIC_ID, 3)]
    image = _apply(image, assign_replicas_to_dirs(image, 5, epoch, assigned, eligible_brokers(image), False).records)

    beat = broker_heartbeat(image, 5, epoch, image.offset, False, False, hb, 0, False, offline_log_dirs=(B,))
    image = _apply(image, beat.records)
    assert image.brokers[5].log_dirs == (A,)
    parts = image.topics["t"].partitions
    for p in (0, 1):  # dir A is online: untouched
        assert (parts[p].leader, parts[p].isr, image.offline_replicas(parts[p])) == (5, (5, 1, 2), ())
    for p in (2, 3):  # dir B failed: 5 leaves, the next in-sync replica leads
        assert (parts[p].leader, parts[p].isr, image.offline_replicas(parts[p])) == (1, (1, 2), (5,))
    again = broker_heartbeat(image, 5, epoch, image.offset, False, False, hb, 0, False, offline_log_dirs=(B,))
    assert again.records == []  # reported again: nothing new

    # brokers 1 and 2 fenced: partition 2 goes offline; broker 5 must not lead it from its failed dir
    for b in (1, 2):
        image = _apply(image, [PartitionChangeRecord(2, TOPIC_ID, isr=(5,) if b == 2 else (2,), leader=-1)])
    records, _ = elect_offline_partitions(image, {5}, broker_unclean_default=True)
    assert records == []

    restored = EMPTY_IMAGE.apply([decode(encode(r)) for r in snapshot_records(image)], image.offset)
    assert restored.brokers[5].log_dirs == (A,) and restored.topics["t"].partitions[3].directories == parts[3].directories


def test_a_replica_assigned_to_a_failed_dir_leaves_its_isr_and_new_replicas_are_unassigned() -> None:
    image, epoch, hb = _cluster()
    image = _apply(image, broker_heartbeat(image, 5, epoch, image.offset, False, False, hb, 0, False,
                                           offline_log_dirs=(B,)).records)
    result = assign_replicas_to_dirs(image, 5, epoch, [DirAssignment(B, TOPIC_ID, 0)], eligible_brokers(image), False)
    image = _apply(image, result.records)
    reg = image.topics["t"].partitions[0]
    assert (reg.directory(5), reg.leader, reg.isr) == (B, 1, (1, 2))

    moved = image.topics["t"].partitions[1].merge(PartitionChangeRecord(1, TOPIC_ID, replicas=(5, 1, 3)))
    assert moved.directory(3) == dir_ids.UNASSIGNED and moved.directory(5) == dir_ids.UNASSIGNED
    assert image.is_new_replica(moved, 3) and not image.is_new_replica(reg, 5)


def test_a_broker_registering_without_a_dir_leaves_the_isrs_and_leaderships_of_the_replicas_there() -> None:
    """Restarted before its session expired, with the disk of B replaced (a new dir C), broker 5
    must not lead again the partitions whose logs were in B: it no longer has them."""
    image, epoch, hb = _cluster()
    assigned = [DirAssignment(A, TOPIC_ID, 0), DirAssignment(A, TOPIC_ID, 1), DirAssignment(B, TOPIC_ID, 2),
                DirAssignment(B, TOPIC_ID, 3)]
    image = _apply(image, assign_replicas_to_dirs(image, 5, epoch, assigned, eligible_brokers(image), False).records)
    again = register_broker(image, 5, uuid.UUID(int=100), ENDPOINTS, None, hb, (A, C))
    image = _apply(image, again.records)
    parts = image.topics["t"].partitions
    assert [(parts[p].leader, 5 in parts[p].isr) for p in range(4)] == [(5, True), (5, True), (1, False), (1, False)]
    same = register_broker(image, 5, uuid.UUID(int=101), ENDPOINTS, None, hb, (A, C))  # nothing lost this time
    assert len(same.records) == 1


def test_a_broker_asks_to_assign_only_its_replicas_placed_elsewhere_than_their_log() -> None:
    """The broker's side (`replication.log_dirs.dir_assignments`): replicas whose log is in
    another dir than the image says; not those already right, nor another broker's, nor a
    partition gone from the image; a replica without a log here yet is named apart, to be
    asked about again."""
    image, epoch, _ = _cluster()
    image = _apply(image, assign_replicas_to_dirs(image, 5, epoch, [DirAssignment(A, TOPIC_ID, 0)],
                                                  eligible_brokers(image), False).records)
    logs = {TopicPartition("t", 0): A, TopicPartition("t", 1): B, TopicPartition("t", 2): A,
            TopicPartition("gone", 0): A}
    asked = [*logs, TopicPartition("t", 3)]  # t-3 has no log here
    assert dir_assignments(image, 5, asked, logs.get) == (
        [DirAssignment(B, TOPIC_ID, 1), DirAssignment(A, TOPIC_ID, 2)], [TopicPartition("t", 3)])
    assert dir_assignments(image, 4, asked, logs.get) == ([], [])  # broker 4 holds no replica of t

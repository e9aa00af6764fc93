from uuid import uuid4

import pytest

from kmirror.broker.handlers.offsets_for_leader_epoch import handle
from kmirror.metadata.image import PartitionRegistration
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.testing.replication import call_handler, data_services, image_with, request_type
from kmirror.types import TopicPartition

T_ID = uuid4()
T0 = TopicPartition("t", 0)


def image(epoch: int):
    return image_with({"t": (T_ID, {0: PartitionRegistration((1,), (1,), 1, epoch, 0)})})


def request(version: int, parts: dict[str, list[tuple[int, int, int]]]):
    rt = request_type(23, version)
    Topic = nested(rt, "OffsetForLeaderTopic")
    Partition = nested(rt, "OffsetForLeaderPartition")
    return build(
        rt,
        replica_id=-1,
        topics=tuple(
            Topic(topic=n, partitions=tuple(Partition(partition=i, current_leader_epoch=c, leader_epoch=e) for i, c, e in ps))
            for n, ps in parts.items()
        ),
    )


def answers(response) -> list[tuple[int, int, int]]:
    return [(p.error_code, p.leader_epoch, p.end_offset) for t in response.topics for p in t.partitions]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offsets_for_leader_epoch(version: int) -> None:
    services = data_services(image(1))
    rm = services.replica_manager
    rm.append_records({T0: build_batch([(b"k", b"v", (), 1)])}, 1)
    rm.append_records({T0: build_batch([(b"k", b"v", (), 1)])}, 1)
    rm.apply_image(None, image(4))
    rm.append_records({T0: build_batch([(b"k", b"v", (), 1)])}, 1)
    parts = {"t": [(0, 4, 1), (0, -1, 2), (0, 4, 4), (0, 4, 0)], "nope": [(0, -1, 1)]}
    response = call_handler(handle, services, 23, version, request(version, parts))
    assert answers(response) == [
        (ErrorCode.none, 1, 2),
        (ErrorCode.none, 1, 2),
        (ErrorCode.none, 4, 3),
        (ErrorCode.none, 0, 0),  # below the first epoch: Kafka answers the first epoch's start
        (ErrorCode.unknown_topic_or_partition, -1, -1),
    ]


def test_offsets_for_leader_epoch_fencing() -> None:
    services = data_services(image(4))
    response = call_handler(handle, services, 23, 4, request(4, {"t": [(0, 3, 1), (0, 5, 1)]}))
    assert [a[0] for a in answers(response)] == [ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch]

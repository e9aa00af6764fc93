import datetime
from uuid import uuid4

import pytest

from kmirror.broker.handlers.list_offsets import handle
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.testing.replication import call_handler, data_services, request_type, single_node_image
from kmirror.types import TopicPartition

T0 = TopicPartition("t", 0)


def list_offsets(version: int, parts: dict[str, list[tuple[int, int]]], isolation_level: int = 0, epoch: int = -1):
    rt = request_type(2, version)
    Topic = nested(rt, "ListOffsetsTopic")
    Partition = nested(rt, "ListOffsetsPartition")
    return build(
        rt,
        replica_id=-1,
        timeout=datetime.timedelta(seconds=30),
        isolation_level=isolation_level,
        topics=tuple(
            Topic(name=n, partitions=tuple(build(Partition, partition_index=i, timestamp=ts, current_leader_epoch=epoch) for i, ts in ps))
            for n, ps in parts.items()
        ),
    )


def services_with_three_records():
    services = data_services(single_node_image(1, {"t": (uuid4(), 1)}, leader_epoch=2))
    rm = services.replica_manager
    for ts in (1_000, 3_000, 2_000):
        rm.append_records({T0: build_batch([(b"k", b"v", (), ts)])}, 1)
    return services


def answers(response) -> list[tuple[int, int, int, int | None]]:
    return [
        (p.error_code, p.timestamp, p.offset, getattr(p, "leader_epoch", None)) for t in response.topics for p in t.partitions
    ]


@pytest.mark.parametrize("version", [1, 4, 7, 9, 11])
def test_list_offsets_latest_and_earliest(version: int) -> None:
    services = services_with_three_records()
    response = call_handler(handle, services, 2, version, list_offsets(version, {"t": [(0, -1)]}))
    ((code, ts, offset, epoch),) = answers(response)
    assert (code, ts, offset) == (ErrorCode.none, -1, 3)
    if version >= 4:
        assert epoch == 2
    response = call_handler(handle, services, 2, version, list_offsets(version, {"t": [(0, -2)]}))
    assert answers(response)[0][:3] == (ErrorCode.none, -1, 0)


def test_list_offsets_by_timestamp_and_errors() -> None:
    services = services_with_three_records()
    response = call_handler(handle, services, 2, 7, list_offsets(7, {"t": [(0, 1_500)], "nope": [(0, -1)]}))
    result = answers(response)
    assert result[0][0] == ErrorCode.none and result[0][2] == 1
    assert result[1][0] == ErrorCode.unknown_topic_or_partition
    none = call_handler(handle, services, 2, 7, list_offsets(7, {"t": [(0, 10_000)]}))
    assert answers(none)[0][:3] == (ErrorCode.none, -1, -1)
    fenced = call_handler(handle, services, 2, 7, list_offsets(7, {"t": [(0, -1)]}, epoch=1))
    assert answers(fenced)[0][0] == ErrorCode.fenced_leader_epoch
    duplicate = call_handler(handle, services, 2, 7, list_offsets(7, {"t": [(0, -1), (0, -2)]}))
    assert [a[0] for a in answers(duplicate)] == [ErrorCode.invalid_request] * 2


def test_list_offsets_max_timestamp_and_tiered_specials() -> None:
    services = services_with_three_records()
    response = call_handler(handle, services, 2, 9, list_offsets(9, {"t": [(0, -3), (0, -4)]}))
    assert [a[0] for a in answers(response)] == [ErrorCode.invalid_request] * 2
    max_ts = call_handler(handle, services, 2, 9, list_offsets(9, {"t": [(0, -3)]}))
    assert answers(max_ts)[0][:3] == (ErrorCode.none, 3_000, 1)
    local = call_handler(handle, services, 2, 9, list_offsets(9, {"t": [(0, -4)]}))
    assert answers(local)[0][:3] == (ErrorCode.none, -1, 0)
    tiered = call_handler(handle, services, 2, 9, list_offsets(9, {"t": [(0, -5)]}))
    assert answers(tiered)[0][:3] == (ErrorCode.none, -1, -1)

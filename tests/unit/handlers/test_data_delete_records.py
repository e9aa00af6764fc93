import datetime
from uuid import uuid4

import pytest

from kmirror.broker.handlers.delete_records import handle
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.testing.replication import call_handler, data_services, request_type, single_node_image
from kmirror.types import TopicPartition

T0 = TopicPartition("t", 0)


def request(version: int, parts: dict[str, list[tuple[int, int]]]):
    rt = request_type(21, version)
    Topic = nested(rt, "DeleteRecordsTopic")
    Partition = nested(rt, "DeleteRecordsPartition")
    return build(
        rt,
        topics=tuple(Topic(name=n, partitions=tuple(Partition(partition_index=i, offset=o) for i, o in ps)) for n, ps in parts.items()),
        timeout=datetime.timedelta(seconds=30),
    )


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records(version: int) -> None:
    services = data_services(single_node_image(1, {"t": (uuid4(), 2)}))
    records = build_batch([(b"k", b"v", (), 1)] * 5)
    services.replica_manager.append_records({T0: records}, 1)
    response = call_handler(handle, services, 21, version, request(version, {"t": [(0, 3), (1, 4)], "nope": [(0, 1)]}))
    answers = [(t.name, p.partition_index, p.error_code, p.low_watermark) for t in response.topics for p in t.partitions]
    assert answers == [
        ("t", 0, ErrorCode.none, 3),
        ("t", 1, ErrorCode.offset_out_of_range, -1),
        ("nope", 0, ErrorCode.unknown_topic_or_partition, -1),
    ]
    to_hw = call_handler(handle, services, 21, version, request(version, {"t": [(0, -1)]}))
    assert to_hw.topics[0].partitions[0].low_watermark == 5

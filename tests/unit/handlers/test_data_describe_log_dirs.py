from uuid import uuid4

import pytest

from kmirror.broker.handlers.describe_log_dirs import handle
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.testing.replication import call_handler, data_services, request_type, single_node_image
from kmirror.types import TopicPartition


class Usage:
    def usage(self, path: str) -> tuple[int, int]:
        return 10_000, 4_000


def request(version: int, topics: dict[str, list[int]] | None):
    rt = request_type(35, version)
    Topic = nested(rt, "DescribableLogDirTopic")
    return build(rt, topics=None if topics is None else tuple(Topic(topic=t, partitions=tuple(ps)) for t, ps in topics.items()))


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_log_dirs(version: int) -> None:
    services = data_services(single_node_image(1, {"t": (uuid4(), 2)}))
    services.replica_manager.disk_usage = Usage()
    records = build_batch([(b"k", b"v", (), 1)])
    services.replica_manager.append_records({TopicPartition("t", 1): records}, 1)
    response = call_handler(handle, services, 35, version, request(version, None))
    (result,) = response.results
    assert result.error_code == ErrorCode.none and result.log_dir == "/data/kafka-logs"
    sizes = {(t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key) for t in result.topics for p in t.partitions}
    assert sizes == {("t", 0): (0, 0, False), ("t", 1): (len(records), 0, False)}
    if version >= 4:
        assert (result.total_bytes, result.usable_bytes) == (10_000, 4_000)
    only = call_handler(handle, services, 35, version, request(version, {"t": [1], "nope": [0]}))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in only.results[0].topics] == [("t", [1])]


def test_a_replica_moving_to_another_log_dir_is_a_future_replica_there() -> None:
    class Moves:
        def alter(self, tp, path):
            raise AssertionError("not asked")

        def futures(self):
            return [(TopicPartition("t", 1), "/data/kafka-logs", 123, 7)]

    services = data_services(single_node_image(1, {"t": (uuid4(), 2)}))
    services.replica_manager.disk_usage = Usage()
    services.log_dir_moves = Moves()
    (result,) = call_handler(handle, services, 35, 4, request(4, None)).results
    described = sorted((p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                       for t in result.topics for p in t.partitions)
    assert described == [(0, 0, 0, False), (1, 0, 0, False), (1, 123, 7, True)]
    (only,) = call_handler(handle, services, 35, 4, request(4, {"t": [0]})).results
    assert [(p.partition_index, p.is_future_key) for t in only.topics for p in t.partitions] == [(0, False)]

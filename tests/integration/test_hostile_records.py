"""A decompression bomb produced to a real node: one record of 1 GiB of zeros in a ~32 KB zstd
batch is refused with RECORD_LIST_TOO_LARGE (the decompressed size is bounded at 64 times max.message.bytes),
the node's peak RSS stays bounded, and a well-behaved client is served meanwhile."""

from __future__ import annotations

import datetime
import time

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import request as pr
from kio.static.primitive import i16, i32

from kmirror.testing.hostile import WellBehavedClient, call, peak_rss_mb, zstd_bomb_batch
from kmirror.testing.kafka_clients import consume_partition, create_topic

pytestmark = pytest.mark.integration


def _produce(port: int, topic: str, batch: bytes) -> tuple[int, str | None]:
    body = pr.ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=datetime.timedelta(seconds=30),
        topic_data=(pr.TopicProduceData(name=topic, partition_data=(pr.PartitionProduceData(index=i32(0),
                                                                                              records=batch),)),))
    response = call(port, 0, 9, body, timeout_s=120)
    partition = response.responses[0].partition_responses[0]
    return int(partition.error_code), partition.error_message


def test_zstd_decompression_bomb_is_refused_in_bounded_memory(cluster) -> None:
    create_topic(cluster.bootstrap, "served")
    create_topic(cluster.bootstrap, "target")
    bomb = zstd_bomb_batch(1 << 30, int(time.time() * 1000))
    assert len(bomb) < 64 * 1024
    with WellBehavedClient(cluster.bootstrap, cluster.port, "served") as client:
        client.wait_acks(5)
        started = time.monotonic()
        for _ in range(3):
            code, message = _produce(cluster.port, "target", bomb)
            assert code == ErrorCode.record_list_too_large, (code, message)
        took = time.monotonic() - started
        # a sane compressed batch is still accepted
        ok = zstd_bomb_batch(100_000, int(time.time() * 1000))
        assert _produce(cluster.port, "target", ok) == (ErrorCode.none, None)
        client.wait_acks(5)
    assert not client.errors, client.errors
    assert [len(m.value()) for m in consume_partition(cluster.bootstrap, "target", 0, 1)] == [100_000]
    peak = peak_rss_mb(cluster.pid())
    print(f"3 bombs refused in {took:.2f} s; peak RSS {peak:.0f} MB; {client.summary()}")
    assert peak < 300

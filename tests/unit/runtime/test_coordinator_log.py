"""`ReplicatedCoordinatorLog`: a coordinator's write is acknowledged only once the ISR has it
(Kafka's coordinators append with acks=all), and refused below `min.insync.replicas`."""

import asyncio
from collections.abc import Awaitable, Callable
from uuid import uuid4

import pytest

from kmirror.coordinator.offsets.log_adapter import CoordinatorAppendError
from kmirror.metadata.image import PartitionRegistration
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.replica_manager import FetchPartitionRequest, ReplicaManager
from kmirror.runtime.coordinator_log import ReplicatedCoordinatorLog
from kmirror.testing.replication import image_with, memory_log_manager, server_config
from kmirror.types import TopicPartition

OFFSETS = "__consumer_offsets"
TP = TopicPartition(OFFSETS, 0)


def leader_of_two(configs: dict[str, str] | None = None) -> ReplicaManager:
    """Broker 1 leads `__consumer_offsets-0`, broker 2 follows, both in the ISR."""
    clock = ManualClock()
    rm = ReplicaManager(1, memory_log_manager(clock), clock, server_config(1))
    registration = PartitionRegistration((1, 2), (1, 2), 1, 0, 0)
    rm.apply_image(None, image_with({OFFSETS: (uuid4(), {0: registration})},
                                    configs={OFFSETS: configs} if configs else None))
    return rm


def test_an_append_below_min_insync_replicas_is_refused_before_it_is_written() -> None:
    rm = leader_of_two({"min.insync.replicas": "3"})
    with pytest.raises(CoordinatorAppendError) as refused:
        asyncio.run(ReplicatedCoordinatorLog(rm, OFFSETS).append(0, [(b"k", b"v")]))
    assert refused.value.code == ErrorCode.not_enough_replicas
    assert rm.get_partition(TP).log.log_end_offset == 0


def _records(log: ReplicatedCoordinatorLog) -> Awaitable[int]:
    return log.append(0, [(b"k", b"v")])


def _marker(log: ReplicatedCoordinatorLog) -> Awaitable[int]:
    return log.append_end_transaction_marker(0, producer_id=7, producer_epoch=0, coordinator_epoch=0, committed=True)


@pytest.mark.parametrize("write", [_records, _marker], ids=["records", "transaction marker"])
def test_a_write_is_acknowledged_only_once_the_follower_has_it(
        write: Callable[[ReplicatedCoordinatorLog], Awaitable[int]]) -> None:
    rm = leader_of_two()
    log = ReplicatedCoordinatorLog(rm, OFFSETS)

    async def main() -> None:
        written = asyncio.ensure_future(write(log))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not written.done()  # only the leader has it: a kill -9 now must not lose an answer
        rm.fetch([FetchPartitionRequest(TP, 1, 1 << 20)], 1 << 20, 0, replica_id=2)  # the follower is at 1
        assert await asyncio.wait_for(written, 5) == 0

    asyncio.run(main())
    assert rm.get_partition(TP).log.high_watermark == 1


def test_a_transaction_marker_below_min_insync_replicas_is_refused_before_it_is_written() -> None:
    rm = leader_of_two({"min.insync.replicas": "3"})
    with pytest.raises(CoordinatorAppendError) as refused:
        asyncio.run(ReplicatedCoordinatorLog(rm, OFFSETS).append_end_transaction_marker(
            0, producer_id=7, producer_epoch=0, coordinator_epoch=0, committed=False))
    assert refused.value.code == ErrorCode.not_enough_replicas
    assert rm.get_partition(TP).log.log_end_offset == 0

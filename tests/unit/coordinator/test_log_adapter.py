import asyncio
from uuid import uuid4

import pytest

from kmirror.coordinator.offsets.log_adapter import CoordinatorAppendError, ReplicaManagerCoordinatorLog
from kmirror.ports import ManualClock
from kmirror.records.control import ControlType, build_control_batch
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.testing.replication import memory_log_manager, server_config, single_node_image
from kmirror.types import TopicPartition


def replica_manager() -> ReplicaManager:
    clock = ManualClock()
    rm = ReplicaManager(1, memory_log_manager(clock), clock, server_config(1))
    rm.apply_image(None, single_node_image(1, {"__consumer_offsets": (uuid4(), 2)}))
    return rm


def test_append_then_read_all_in_offset_order_with_tombstones():
    log = ReplicaManagerCoordinatorLog(replica_manager())

    async def main():
        assert await log.append(1, [(b"k1", b"v1"), (b"k2", b"v2")]) == 1
        assert await log.append(1, [(b"k1", None)]) == 2

    asyncio.run(main())
    assert list(log.read_all(1)) == [(b"k1", b"v1"), (b"k2", b"v2"), (b"k1", None)]
    assert list(log.read_all(0)) == []


def test_append_to_a_partition_not_hosted_raises_with_kafka_error():
    log = ReplicaManagerCoordinatorLog(replica_manager())
    with pytest.raises(CoordinatorAppendError) as err:
        asyncio.run(log.append(7, [(b"k", b"v")]))
    assert err.value.code != 0


def write_marker(rm: ReplicaManager, kind: ControlType, producer_id: int) -> None:
    batch = build_control_batch(kind, producer_id, 0, 1_700_000_000_000)
    assert not hasattr(rm.append_coordinator_batches(TopicPartition("__consumer_offsets", 0), batch), "code")


def test_transactional_records_count_at_their_commit_marker_only():
    rm = replica_manager()
    log = ReplicaManagerCoordinatorLog(rm)

    def marker(kind: ControlType, producer_id: int) -> None:
        write_marker(rm, kind, producer_id)

    async def main():
        await log.append(0, [(b"a", b"1")])
        await log.append(0, [(b"c", b"committed")], producer_id=7, producer_epoch=0)
        await log.append(0, [(b"x", b"aborted")], producer_id=8, producer_epoch=0)
        await log.append(0, [(b"o", b"open")], producer_id=9, producer_epoch=0)
        await log.append(0, [(b"b", b"2")])
        marker(ControlType.ABORT, 8)
        marker(ControlType.COMMIT, 7)

    asyncio.run(main())
    assert list(log.read_all(0)) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"committed")]
    assert log.open_transactions(0) == {9: [(b"o", b"open")]}


def test_a_tombstone_outside_a_transaction_removes_its_key_from_the_open_ones():
    """Kafka's replay of an offset tombstone: the transaction's COMMIT marker, later in the
    log, does not bring the deleted key back; its other keys commit."""
    rm = replica_manager()
    log = ReplicaManagerCoordinatorLog(rm)

    async def main():
        await log.append(0, [(b"gone", b"5"), (b"kept", b"6")], producer_id=7, producer_epoch=0)
        await log.append(0, [(b"open", b"1"), (b"gone", b"9")], producer_id=9, producer_epoch=0)
        await log.append(0, [(b"gone", None)])
        write_marker(rm, ControlType.COMMIT, 7)

    asyncio.run(main())
    assert list(log.read_all(0)) == [(b"gone", None), (b"kept", b"6")]
    assert log.open_transactions(0) == {9: [(b"open", b"1")]}

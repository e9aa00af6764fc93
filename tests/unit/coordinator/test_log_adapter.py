import asyncio
from uuid import uuid4

import pytest

from kmirror.coordinator.offsets.log_adapter import CoordinatorAppendError, ReplicaManagerCoordinatorLog
from kmirror.ports import ManualClock
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.testing.replication import memory_log_manager, server_config, single_node_image


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

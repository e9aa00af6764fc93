"""The fetcher shell: a follower ReplicaManager replicating from a leader, in-process and over
the real Kafka protocol on loopback (RemoteLeaderEndPoint against the broker's handlers)."""

import asyncio
from uuid import uuid4

from kmirror.broker.api import build_registry
from kmirror.broker.services import BrokerServices
from kmirror.metadata.image import PartitionRegistration
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.replication.fetcher.endpoint import ReplicaManagerLeaderEndPoint
from kmirror.replication.fetcher.local_replica import ReplicaManagerLocalReplica
from kmirror.replication.fetcher.manager import ReplicaFetcherManager
from kmirror.replication.fetcher.policy import FetchPolicy
from kmirror.replication.fetcher.remote_endpoint import RemoteLeaderEndPoint
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.runtime.server import KafkaServer
from kmirror.testing.replication import image_with, memory_log_manager, server_config
from kmirror.types import TopicPartition

T_ID = uuid4()
TP = TopicPartition("t", 0)


def broker(node: int, clock: ManualClock, leader: int = 1, epoch: int = 1) -> ReplicaManager:
    rm = ReplicaManager(node, memory_log_manager(clock), clock, server_config(node))
    rm.apply_image(None, image_with({"t": (T_ID, {0: PartitionRegistration((1, 2), (1, 2), leader, epoch, 0)})}))
    return rm


def batch(n: int) -> bytes:
    return build_batch([(b"k", b"v%d" % i, (), 1_700_000_000_000) for i in range(n)])


async def until(predicate, rounds: int = 200) -> None:
    for _ in range(rounds):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached")


def manager_for(follower: ReplicaManager, endpoint, clock: ManualClock) -> ReplicaFetcherManager:
    policy = FetchPolicy(replica_id=follower.node_id, max_wait_ms=10, backoff_ms=10)
    manager = ReplicaFetcherManager(ReplicaManagerLocalReplica(follower), policy, lambda leader: endpoint, clock)
    follower.add_role_listener(manager.on_role_change)
    manager.on_role_change(follower.followed_partitions(), [])
    return manager


def test_follower_replicates_in_process_and_hw_reaches_both() -> None:
    clock = ManualClock()
    leader, follower = broker(1, clock), broker(2, clock)

    async def run() -> None:
        manager = manager_for(follower, ReplicaManagerLeaderEndPoint(leader), clock)
        manager.start()
        leader.append_records({TP: batch(3)}, -1)
        leader.append_records({TP: batch(2)}, -1)
        await until(lambda: follower.get_partition(TP).high_watermark == 5)
        assert leader.get_partition(TP).high_watermark == 5
        await manager.stop()

    asyncio.run(run())
    lp, fp = leader.get_partition(TP), follower.get_partition(TP)
    assert [(e.epoch, e.start_offset) for e in fp.log.epoch_cache.entries] == [(1, 0)]
    a = lp.log.read(0, 1 << 20, 5, True).records
    b = fp.log.read(0, 1 << 20, 5, True).records
    assert bytes(a) == bytes(b)  # same bytes, offsets and epochs


def test_follower_replicates_over_the_kafka_protocol() -> None:
    clock = ManualClock()
    leader, follower = broker(1, clock), broker(2, clock)
    services = BrokerServices(
        node_id=1, config=server_config(1), registry=build_registry(), clock=clock, metadata=None, replica_manager=leader
    )

    async def run() -> None:
        server = KafkaServer(services.registry, services, 100 * 1024 * 1024)
        port = await server.start("127.0.0.1", 0)
        endpoint = RemoteLeaderEndPoint("127.0.0.1", port, 2, client_id="test-fetcher")
        manager = manager_for(follower, endpoint, clock)
        manager.start()
        leader.append_records({TP: batch(4)}, -1)
        await until(lambda: follower.get_partition(TP).high_watermark == 4, rounds=400)
        assert leader.get_partition(TP).replica_log_end_offsets == {2: 4}
        await manager.stop()
        await server.stop()

    asyncio.run(run())


def test_diverged_follower_truncates_to_the_new_leader() -> None:
    """Follower 2 was leader at epoch 1 and wrote offsets 3..4 nobody else has; broker 1
    became leader at epoch 2 with [0, 3) and wrote more. Broker 2 truncates to 3 and fetches."""
    clock = ManualClock()
    old = broker(2, clock, leader=2, epoch=1)
    new = broker(1, clock, leader=2, epoch=1)
    old.append_records({TP: batch(3)}, 1)
    # broker 1 got [0, 3) as follower of 2
    new.get_partition(TP).append_records_as_follower(bytes(old.get_partition(TP).log.read(0, 1 << 20, 3, True).records))
    old.append_records({TP: batch(2)}, 1)  # offsets 3..4, only on broker 2
    image = image_with({"t": (T_ID, {0: PartitionRegistration((1, 2), (1, 2), 1, 2, 1)})})
    new.apply_image(None, image)
    new.append_records({TP: batch(1)}, 1)  # offset 3 at epoch 2
    old.apply_image(None, image)

    async def run() -> None:
        manager = manager_for(old, ReplicaManagerLeaderEndPoint(new), clock)
        manager.start()
        await until(lambda: old.get_partition(TP).log.log_end_offset == 4 and old.get_partition(TP).high_watermark == 4)
        await manager.stop()

    asyncio.run(run())
    entries = [(e.epoch, e.start_offset) for e in old.get_partition(TP).log.epoch_cache.entries]
    assert entries == [(1, 0), (2, 3)]
    assert bytes(old.get_partition(TP).log.read(0, 1 << 20, 4, True).records) == bytes(
        new.get_partition(TP).log.read(0, 1 << 20, 4, True).records
    )

"""Destination followers of mirror partitions (KIP-1279 "Mirror Leader Epoch"): the leader
answers Fetch v19 with MirrorLeaderEpoch, the latest epoch of its log, and the follower
appends batches carrying source epochs above its local leader epoch only up to it
(KAFKA-18723 bound); without it the follower refuses them."""

import asyncio
import dataclasses
from types import SimpleNamespace
from uuid import uuid4

from kmirror.broker.api import build_registry
from kmirror.broker.services import BrokerServices
from kmirror.metadata.image import PartitionRegistration
from kmirror.ports import ManualClock
from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.replication.fetcher.endpoint import ReplicaManagerLeaderEndPoint
from kmirror.replication.fetcher.local_replica import ReplicaManagerLocalReplica
from kmirror.replication.fetcher.manager import ReplicaFetcherManager
from kmirror.replication.fetcher.policy import FetchPolicy
from kmirror.replication.fetcher.remote_endpoint import RENEGOTIATE_INTERVAL_MS, RemoteLeaderEndPoint
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.runtime.server import KafkaServer
from kmirror.testing.replication import image_with, memory_log_manager, server_config
from kmirror.types import TopicPartition

T_ID = uuid4()
TP = TopicPartition("t", 0)
SOURCE_EPOCHS = (4, 7)  # source epochs, above the destination's leader epoch 1


def image(mirror_name: str | None, mirroring_enabled: bool = True):
    regs = {0: PartitionRegistration((1, 2), (1, 2), 1, 1, 0)}
    img = image_with({"t": (T_ID, regs)}, configs={"t": {"mirror.name": mirror_name}} if mirror_name else {})
    return dataclasses.replace(img, features={"mirror.version": 1} if mirroring_enabled else {})


def brokers(mirror_name: str | None, mirroring_enabled: bool = True):
    clock = ManualClock()
    out = []
    for node in (1, 2):
        rm = ReplicaManager(node, memory_log_manager(clock), clock, server_config(node))
        rm.apply_image(None, image(mirror_name, mirroring_enabled))
        out.append(rm)
    leader = out[0]
    for i, epoch in enumerate(SOURCE_EPOCHS):  # what the mirror fetcher appended: source epochs kept
        leader.get_partition(TP).append_records_as_follower(
            build_batch([(b"k", b"v", (), 1_700_000_000_000)] * 2, base_offset=2 * i, partition_leader_epoch=epoch))
    return clock, leader, out[1]


class Metadata:
    forwarding = False

    def __init__(self, img) -> None:
        self.image = img


async def replicate(follower, endpoint, clock, rounds: int = 300) -> None:
    policy = FetchPolicy(replica_id=follower.node_id, max_wait_ms=10, backoff_ms=10)
    manager = ReplicaFetcherManager(ReplicaManagerLocalReplica(follower), policy, lambda leader: endpoint, clock)
    follower.add_role_listener(manager.on_role_change)
    manager.on_role_change(follower.followed_partitions(), [])
    manager.start()
    for _ in range(rounds):
        if follower.get_partition(TP).log.log_end_offset == 4:
            break
        await asyncio.sleep(0.005)
    await manager.stop()


def epochs(rm) -> list[tuple[int, int]]:
    raw = bytes(rm.get_partition(TP).log.read(0, 1 << 20, rm.get_partition(TP).log.log_end_offset, True).records)
    return [(h.base_offset, h.partition_leader_epoch) for _, h in iter_batches(raw)]


def over_the_wire(mirror_name: str | None, mirroring_enabled: bool = True):
    clock, leader, follower = brokers(mirror_name, mirroring_enabled)
    services = BrokerServices(node_id=1, config=server_config(1), registry=build_registry(), clock=clock,
                              metadata=Metadata(leader.image), replica_manager=leader)

    async def run() -> None:
        server = KafkaServer(services.registry, services, 100 * 1024 * 1024)
        port = await server.start("127.0.0.1", 0)
        await replicate(follower, RemoteLeaderEndPoint("127.0.0.1", port, 2, client_id="test-fetcher"), clock)
        await server.stop()

    asyncio.run(run())
    return leader, follower


def test_a_mirror_partition_follower_appends_source_epochs_bounded_by_fetch_v19_mirror_leader_epoch() -> None:
    leader, follower = over_the_wire("m")
    assert epochs(follower) == epochs(leader) == [(0, 4), (2, 7)]
    assert bytes(follower.get_partition(TP).log.read(0, 1 << 20, 4, True).records) == bytes(
        leader.get_partition(TP).log.read(0, 1 << 20, 4, True).records)


def test_without_mirror_leader_epoch_batches_above_the_current_leader_epoch_are_refused() -> None:
    # Not a mirror topic: the bound is the request's CurrentLeaderEpoch (1), as KAFKA-18723.
    _, follower = over_the_wire(None)
    assert follower.get_partition(TP).log.log_end_offset == 0
    # Mirroring disabled: Fetch v19 is not advertised, so the leader cannot send the epoch.
    _, follower = over_the_wire("m", mirroring_enabled=False)
    assert follower.get_partition(TP).log.log_end_offset == 0


def test_an_in_process_leader_answers_mirror_leader_epoch_too() -> None:
    clock, leader, follower = brokers("m.removed")  # detached, its log still holds source epochs
    asyncio.run(replicate(follower, ReplicaManagerLeaderEndPoint(leader), clock))
    assert epochs(follower) == [(0, 4), (2, 7)]


def test_api_versions_advertises_fetch_v19_only_while_mirroring_is_enabled() -> None:
    from kmirror.broker.handlers.api_versions import advertised_max_version

    assert advertised_max_version(1, 19, image(None, mirroring_enabled=False)) == 18
    assert advertised_max_version(1, 19, None) == 18
    assert advertised_max_version(1, 19, image(None)) == 19
    assert advertised_max_version(3, 13, image(None, mirroring_enabled=False)) == 13
    registry = build_registry()
    assert registry.get(1).max_version == 19  # served, so a follower's v19 request decodes


def test_a_follower_reconnects_when_the_cluster_finalizes_a_newer_fetch_version() -> None:
    """A connection negotiated Fetch v18 before `mirror.version` was enabled: the follower
    reconnects for v19, and while the leader still answers v18, at most every 5 s."""
    clock, wanted = ManualClock(), {"version": 0}
    endpoint = RemoteLeaderEndPoint("127.0.0.1", 1, 2, client_id="t",
                                    wanted_fetch_version=(lambda: wanted["version"], clock))
    v18 = SimpleNamespace(api_versions={1: (0, 18)})
    v19 = SimpleNamespace(api_versions={1: (0, 19)})
    assert not endpoint._older_than_wanted(v18)  # type: ignore[arg-type]
    wanted["version"] = 19
    assert endpoint._older_than_wanted(v18)  # type: ignore[arg-type]
    assert not endpoint._older_than_wanted(v18)  # type: ignore[arg-type]  # the leader lags: not at once again
    clock.advance(RENEGOTIATE_INTERVAL_MS)
    assert endpoint._older_than_wanted(v18)  # type: ignore[arg-type]
    clock.advance(RENEGOTIATE_INTERVAL_MS)
    assert not endpoint._older_than_wanted(v19)  # type: ignore[arg-type]

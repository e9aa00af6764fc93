"""Incremental fetch sessions (KIP-227) end to end over the Kafka protocol on loopback: the
fetching side (`RemoteLeaderEndPoint` with sessions, as the mirror's source endpoint) against
the broker's Fetch handler and its session cache."""

import asyncio
from functools import cache
from uuid import uuid4

from kmirror.broker.api import build_registry
from kmirror.broker.handlers.fetch import fetch_session_cache
from kmirror.broker.services import BrokerServices
from kmirror.metadata.image import PartitionRegistration
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.replication.fetcher.engine import FetchPartitionPlan, FetchPlan
from kmirror.replication.fetcher.policy import FetchPolicy
from kmirror.replication.fetcher.remote_endpoint import RemoteLeaderEndPoint
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.runtime.server import KafkaServer
from kmirror.testing.replication import image_with, memory_log_manager, server_config
from kmirror.types import TopicPartition

T_ID = uuid4()
PARTITIONS = 6
POLICY = FetchPolicy(replica_id=-1, max_wait_ms=5, isolation_level=1)


def leader(clock: ManualClock) -> ReplicaManager:
    rm = ReplicaManager(1, memory_log_manager(clock), clock, server_config(1))
    parts = {p: PartitionRegistration((1,), (1,), 1, 1, 0) for p in range(PARTITIONS)}
    rm.apply_image(None, image_with({"t": (T_ID, parts)}))
    return rm


def batch(n: int) -> bytes:
    return build_batch([(b"k", b"v%d" % i, (), 1_700_000_000_000) for i in range(n)])


@cache
def entry(p: int, offset: int) -> FetchPartitionPlan:
    """One plan entry per parameters, as the engine keeps an idle partition's entry."""
    return FetchPartitionPlan(TopicPartition("t", p), T_ID, offset, -1, -1, -1, 1 << 20)


def plan(offsets: dict[int, int]) -> FetchPlan:
    return FetchPlan(tuple(entry(p, o) for p, o in offsets.items()), POLICY)


def serve(rm: ReplicaManager, clock: ManualClock, **config: str) -> tuple[BrokerServices, KafkaServer]:
    services = BrokerServices(node_id=1, config=server_config(1, **config), registry=build_registry(), clock=clock,
                              metadata=None, replica_manager=rm)  # type: ignore[arg-type]
    return services, KafkaServer(services.registry, services, 100 * 1024 * 1024)


def test_an_idle_session_lists_nothing_and_answers_only_partitions_with_news() -> None:
    clock = ManualClock()
    rm = leader(clock)
    services, server = serve(rm, clock, max_incremental_fetch_session_cache_slots="1")

    async def run() -> None:
        port = await server.start("127.0.0.1", 0)
        endpoint = RemoteLeaderEndPoint("127.0.0.1", port, -1, client_id="mirror", fetch_sessions=True)
        other = RemoteLeaderEndPoint("127.0.0.1", port, -1, client_id="other", fetch_sessions=True)
        offsets = dict.fromkeys(range(PARTITIONS), 0)
        full = await endpoint.fetch(plan(offsets))
        assert len(full) == PARTITIONS and endpoint.session.next_epoch == 1  # the full answer lists all
        session = fetch_session_cache(services).get(endpoint.session.session_id)
        assert session is not None and len(session.partitions) == PARTITIONS
        assert await endpoint.fetch(plan(offsets)) == {}  # idle: nothing listed, nothing answered
        assert endpoint.session.next_epoch == 2

        rm.append_records({TopicPartition("t", 4): batch(3)}, -1)
        answered = await endpoint.fetch(plan(offsets))
        assert list(answered) == [TopicPartition("t", 4)] and answered[TopicPartition("t", 4)].high_watermark == 3
        offsets[4] = 3
        assert await endpoint.fetch(plan(offsets)) == {}  # the moved offset is sent; nothing new

        del offsets[0]  # leaves the plan: forgotten by the session
        assert await endpoint.fetch(plan(offsets)) == {}
        assert TopicPartition("t", 0) not in session.partitions and session.partitions[TopicPartition("t", 4)].fetch_offset == 3

        # Another fetcher takes the only slot once ours is idle past the eviction age (Kafka's
        # 120 s): ours is answered FETCH_SESSION_ID_NOT_FOUND, then fetches in full.
        clock.advance(120_001)
        await other.fetch(plan({1: 0}))
        assert other.session.session_id not in (0, endpoint.session.session_id)
        assert await endpoint.fetch(plan(offsets)) == {}
        assert endpoint.session.next_epoch == 0
        again = await endpoint.fetch(plan(offsets))
        # the cache is full of a session used just now: no session this time, answered in full
        assert len(again) == PARTITIONS - 1 and endpoint.session.session_id == 0
        await endpoint.close()
        await other.close()
        await server.stop()

    asyncio.run(run())


def test_a_broker_without_session_slots_is_fetched_in_full_every_time() -> None:
    clock = ManualClock()
    rm = leader(clock)
    services, server = serve(rm, clock, max_incremental_fetch_session_cache_slots="0")

    async def run() -> None:
        port = await server.start("127.0.0.1", 0)
        endpoint = RemoteLeaderEndPoint("127.0.0.1", port, -1, client_id="mirror", fetch_sessions=True)
        offsets = dict.fromkeys(range(PARTITIONS), 0)
        for _ in range(3):
            assert len(await endpoint.fetch(plan(offsets))) == PARTITIONS
            assert endpoint.session.session_id == 0
        assert len(fetch_session_cache(services)) == 0
        await endpoint.close()
        await server.stop()

    asyncio.run(run())

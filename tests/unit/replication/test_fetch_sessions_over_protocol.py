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


async def settled_session(server: KafkaServer, policy: FetchPolicy) -> tuple[RemoteLeaderEndPoint, dict[int, int]]:
    """A mirror's session endpoint on `server`, every partition at offset 0, fetched twice:
    the full answer tells every partition's offsets, the next request settles them."""
    port = await server.start("127.0.0.1", 0)
    endpoint = RemoteLeaderEndPoint("127.0.0.1", port, -1, client_id="mirror", fetch_sessions=True)
    offsets = dict.fromkeys(range(PARTITIONS), 0)
    assert len(await endpoint.fetch(FetchPlan(plan(offsets).partitions, policy))) == PARTITIONS
    await endpoint.fetch(FetchPlan(plan(offsets).partitions, policy))
    return endpoint, offsets


class CountingReads:
    """Counts the partitions the broker checks for a consumer (`idle_consumer_read`)."""

    def __init__(self, rm: ReplicaManager) -> None:
        self.count = 0
        check = rm.idle_consumer_read

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            self.count += 1
            return check(*args, **kwargs)

        rm.idle_consumer_read = counted  # type: ignore[method-assign]

    def take(self) -> int:
        count, self.count = self.count, 0
        return count


def test_a_session_checks_only_what_moved_and_misses_no_kind_of_move() -> None:
    clock = ManualClock()
    rm = leader(clock)
    _, server = serve(rm, clock)
    checks = CountingReads(rm)

    async def run() -> None:
        endpoint, offsets = await settled_session(server, POLICY)
        checks.take()
        assert await endpoint.fetch(plan(offsets)) == {}
        assert checks.take() == 0  # idle: nothing moved, nothing checked

        # an append: its partition only
        rm.append_records({TopicPartition("t", 2): batch(2)}, -1)
        answered = await endpoint.fetch(plan(offsets))
        assert list(answered) == [TopicPartition("t", 2)] and answered[TopicPartition("t", 2)].high_watermark == 2
        assert checks.take() == 1
        offsets[2] = 2
        assert await endpoint.fetch(plan(offsets)) == {}

        # the log start moved (DeleteRecords), with no append
        rm.append_records({TopicPartition("t", 3): batch(4)}, -1)
        offsets[3] = 4
        await endpoint.fetch(plan(offsets))
        assert await endpoint.fetch(plan(offsets)) == {}
        rm.delete_records({TopicPartition("t", 3): 3})
        answered = await endpoint.fetch(plan(offsets))
        assert list(answered) == [TopicPartition("t", 3)] and answered[TopicPartition("t", 3)].log_start_offset == 3

        # a new metadata image (here: partition 5 moved to another broker) is not seen by the
        # logs: every partition is checked again, once
        parts = {p: PartitionRegistration((1,), (1,), 1, 1, 0) for p in range(PARTITIONS)}
        parts[5] = PartitionRegistration((2,), (2,), 2, 2, 1)
        rm.apply_image(None, image_with({"t": (T_ID, parts)}))
        checks.take()
        answered = await endpoint.fetch(plan(offsets))
        assert list(answered) == [TopicPartition("t", 5)] and answered[TopicPartition("t", 5)].error != 0
        assert checks.take() == PARTITIONS
        await endpoint.close()
        await server.stop()

    asyncio.run(run())


def test_records_left_out_of_a_full_answer_come_in_the_next_one_with_nothing_new_appended() -> None:
    clock = ManualClock()
    rm = leader(clock)
    _, server = serve(rm, clock)
    small = FetchPolicy(replica_id=-1, max_wait_ms=5, isolation_level=1, max_bytes=1)

    async def run() -> None:
        endpoint, offsets = await settled_session(server, small)
        rm.append_records({TopicPartition("t", 1): batch(1), TopicPartition("t", 4): batch(1)}, -1)
        got: dict[int, int] = {}
        for _ in range(4):  # one batch per answer (max_bytes 1: KIP-74's first batch only)
            answered = await endpoint.fetch(FetchPlan(plan(offsets).partitions, small))
            for tp, fetched in answered.items():
                if len(fetched.records) > 0:
                    got[tp.partition] = offsets[tp.partition] = 1
        assert got == {1: 1, 4: 1}
        await endpoint.close()
        await server.stop()

    asyncio.run(run())


def test_a_parked_fetch_completed_by_a_produce_answers_every_partition_of_it() -> None:
    """Kafka's `DelayedFetch.onComplete` reads at completion: the first append of a Produce
    request completes the parked Fetch, and its answer carries the whole request."""
    clock = ManualClock()
    rm = leader(clock)
    _, server = serve(rm, clock)
    waiting = FetchPolicy(replica_id=-1, max_wait_ms=10_000, isolation_level=1)

    async def run() -> None:
        endpoint, offsets = await settled_session(server, POLICY)
        parked = asyncio.ensure_future(endpoint.fetch(FetchPlan(plan(offsets).partitions, waiting)))
        while not any(rm.get_partition(TopicPartition("t", p)) and _watched(rm, p) for p in range(PARTITIONS)):
            await asyncio.sleep(0.001)
        rm.append_records({TopicPartition("t", p): batch(1) for p in (0, 2, 5)}, -1)
        answered = await asyncio.wait_for(parked, 5)
        assert sorted(tp.partition for tp, f in answered.items() if len(f.records) > 0) == [0, 2, 5]
        await endpoint.close()
        await server.stop()

    asyncio.run(run())


def _watched(rm: ReplicaManager, p: int) -> bool:
    from kmirror.broker.purgatory import purgatory_for

    return purgatory_for(rm).watched(TopicPartition("t", p)) > 0

"""The controller as one voter of three (`QuorumControl`), in process: the voters' messages are
calls on its quorum, the followers' fetches calls of `quorum_fetch`. An elected leader is
active only once its no-op record has committed; an operation answers only once a majority
holds its records, and only then is it in the image; losing the leadership fails it."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest

from kmirror.metadata.controller.features import bootstrap_records
from kmirror.metadata.controller.result import NotControllerError
from kmirror.metadata.controller_service import MetadataService
from kmirror.metadata.records import BrokerEndpoint, NoOpRecord, decode, encode
from kmirror.ports import ManualClock
from kmirror.quorum.election_state import ElectionState
from kmirror.quorum.state import BeginQuorumEpoch, VoteAnswer, VoteRequest
from kmirror.testing.metadata import InMemoryMetadataLogStore, seeded_rng, server_config

VOTERS = "3000@127.0.0.1:9093,3001@127.0.0.1:9094,3002@127.0.0.1:9095"


def voter(store: InMemoryMetadataLogStore, clock: ManualClock) -> MetadataService:
    config = server_config(3000, process_roles="controller", listeners="CONTROLLER://127.0.0.1:9093",
                           controller_listener_names="CONTROLLER", controller_quorum_voters=VOTERS)
    return MetadataService(config, store, clock, seeded_rng())


async def elected(service: MetadataService, clock: ManualClock) -> int:
    """Stand and win with 3001's vote; returns the epoch."""
    quorum = service.quorum
    assert quorum is not None
    clock.advance(2_001)
    stand(service, clock)
    service.execute(quorum.handle_vote_answer(3001, VoteAnswer(quorum.epoch, -1, True), clock.monotonic_ms()))
    assert quorum.role == "leader"
    return quorum.epoch


def stand(service: MetadataService, clock: ManualClock) -> None:
    """Its timer has run out: it asks for pre-votes, gets 3001's and stands."""
    quorum = service.quorum
    assert quorum is not None
    asking = service.execute(quorum.poll(clock.monotonic_ms()))
    assert quorum.role == "prospective" and sorted(v for v, _ in asking) == [3001, 3002]
    assert all(isinstance(m, VoteRequest) and m.pre_vote for _, m in asking)
    standing = service.execute(quorum.handle_vote_answer(3001, VoteAnswer(quorum.epoch, -1, True, pre_vote=True),
                                                         clock.monotonic_ms()))
    assert quorum.role == "candidate" and sorted(v for v, _ in standing) == [3001, 3002]


async def follower_of_3001(store: InMemoryMetadataLogStore, clock: ManualClock) -> MetadataService:
    """A started voter that follows 3001 in epoch 1."""
    service = voter(store, clock)
    await service.start()
    assert service.quorum is not None
    service.execute(service.quorum.handle_begin_epoch(BeginQuorumEpoch(1, 3001), clock.monotonic_ms())[1])
    return service


async def follower_fetches(service: MetadataService, replica_id: int) -> None:
    """A follower that always has everything the leader has: it fetches at the leader's end."""
    store = service.metadata_log
    while True:
        service.quorum_fetch(replica_id, service.quorum.epoch if service.quorum else -1, store.log_end_offset,
                             store.last_epoch)
        await asyncio.sleep(0.001)


async def register(service: MetadataService, broker_id: int) -> int | object:
    return await service.register_broker(broker_id, uuid.UUID(int=broker_id),
                                         [BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092 + broker_id, 0)], None)


async def active_leader(store: InMemoryMetadataLogStore, clock: ManualClock) -> tuple[MetadataService, asyncio.Task[None]]:
    """An elected voter, active once 3001 (the returned task) fetched its first record."""
    service = voter(store, clock)
    await service.start()
    await elected(service, clock)
    fetcher = asyncio.get_running_loop().create_task(follower_fetches(service, 3001))
    await until(lambda: service.active, "active")
    return service, fetcher


async def until(condition: object, what: str) -> None:
    async with asyncio.timeout(5):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.001)


def test_a_leader_is_active_once_its_epoch_commits_and_answers_once_a_majority_has_the_records() -> None:
    async def scenario() -> None:
        store, clock = InMemoryMetadataLogStore(), ManualClock()
        service = voter(store, clock)
        await service.start()
        assert service.quorum is not None and not service.active and service.image.cluster_id is None
        epoch = await elected(service, clock)
        assert store.read_election_state() == ElectionState(epoch, 3000, 3000)
        await until(lambda: store.log_end_offset == 1, "the no-op appended")
        assert isinstance(decode(store.entries[0][1]), NoOpRecord) and store.epoch_of(0) == epoch
        await asyncio.sleep(0.01)
        assert not service.active and service.high_watermark == 0  # nobody else has it yet
        with pytest.raises(NotControllerError):
            await register(service, 1)

        fetcher = asyncio.get_running_loop().create_task(follower_fetches(service, 3001))
        await until(lambda: service.active, "active")
        assert service.image.cluster_id is not None  # the first active controller formats the log
        assert await register(service, 1) == store.log_end_offset - 1  # the broker epoch: the record's offset
        assert 1 in service.image.brokers and service.high_watermark == store.log_end_offset

        # the follower stops fetching: an operation waits for its commit; a new leader fails it
        fetcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await fetcher
        pending = asyncio.get_running_loop().create_task(register(service, 2))
        await until(lambda: store.log_end_offset > service.high_watermark, "the records appended")
        await asyncio.sleep(0.01)
        assert not pending.done() and 2 not in service.image.brokers
        accepted, actions = service.quorum.handle_begin_epoch(BeginQuorumEpoch(epoch + 1, 3002),
                                                              clock.monotonic_ms())
        service.execute(actions)
        assert accepted and not service.active and service.controller_id == 3002
        with pytest.raises(NotControllerError):
            await pending
        assert 2 not in service.image.brokers

    asyncio.run(scenario())


def test_a_follower_replays_only_what_the_leader_committed_and_truncates_where_it_diverged() -> None:
    async def scenario() -> None:
        store, clock = InMemoryMetadataLogStore(), ManualClock()
        service = await follower_of_3001(store, clock)
        quorum = service.quorum
        assert quorum is not None
        assert quorum.role == "follower" and quorum.leader_id == 3001
        encoded = [encode(NoOpRecord()), *(encode(r) for r in bootstrap_records("c1"))]
        await service.follower_append(0, encoded, 1)
        service.follower_fetched(1, 1)  # only the no-op is committed
        assert service.image.offset == 0 and service.image.cluster_id is None
        service.follower_fetched(1, len(encoded))
        assert service.image.cluster_id == "c1" and service.high_watermark == len(encoded)
        await service.follower_append(len(encoded), [encode(NoOpRecord())], 1)  # not committed
        await service.truncate(len(encoded))
        assert store.log_end_offset == len(encoded) and service.high_watermark == len(encoded)

    asyncio.run(scenario())


def test_a_new_leader_commits_the_records_of_the_earlier_epoch_with_its_first_record() -> None:
    async def scenario() -> None:
        store, clock = InMemoryMetadataLogStore(), ManualClock()
        service = await follower_of_3001(store, clock)
        quorum = service.quorum
        assert quorum is not None
        encoded = [encode(r) for r in bootstrap_records("c1")]
        await service.follower_append(0, encoded, 1)
        service.follower_fetched(1, 0)  # the leader of epoch 1 dies before they commit
        assert service.image.cluster_id is None
        clock.advance(10_000)
        stand(service, clock)
        assert quorum.epoch == 2
        service.execute(quorum.handle_vote_answer(3002, VoteAnswer(2, -1, True), clock.monotonic_ms()))
        fetcher = asyncio.get_running_loop().create_task(follower_fetches(service, 3002))
        await until(lambda: service.active, "active")
        fetcher.cancel()
        # epoch 1's records committed with the no-op of epoch 2 and replayed first: not formatted again
        assert service.image.cluster_id == "c1"
        assert [store.epoch_of(o) for o in range(store.log_end_offset)] == [1] * len(encoded) + [2]
        assert service.image.offset == store.log_end_offset - 1

    asyncio.run(scenario())


def test_the_session_check_of_a_controller_that_loses_its_leadership_fences_nobody_and_does_not_fail() -> None:
    async def scenario() -> None:
        store, clock = InMemoryMetadataLogStore(), ManualClock()
        service = voter(store, clock)
        await service.start()
        epoch = await elected(service, clock)
        fetcher = asyncio.get_running_loop().create_task(follower_fetches(service, 3001))
        await until(lambda: service.active, "active")
        broker_epoch = await register(service, 1)
        assert isinstance(broker_epoch, int)
        await service.broker_heartbeat(1, broker_epoch, service.image.offset)  # caught up: unfenced
        assert not service.image.brokers[1].fenced
        fetcher.cancel()
        clock.advance(60_000)  # broker 1's session has expired
        check = asyncio.get_running_loop().create_task(service.check_broker_sessions())
        await until(lambda: store.log_end_offset > service.high_watermark, "the fencing appended")
        assert service.quorum is not None
        service.execute(service.quorum.handle_begin_epoch(BeginQuorumEpoch(epoch + 1, 3002),
                                                          clock.monotonic_ms())[1])
        assert await check == [] and not service.image.brokers[1].fenced  # nothing committed, no error
        assert await service.check_broker_sessions() == []  # a follower keeps no sessions
        assert await service.rebalance_leaders() == 0

    asyncio.run(scenario())


def test_records_whose_image_was_computed_on_an_older_image_are_replayed_from_the_log(caplog) -> None:
    """The image an operation computed with its records replaces the controller's only when it
    was computed on the image right below them; otherwise publishing it would drop what was
    committed in between (the controller's image would then lack records its log and every
    broker have). Such records are replayed from the log instead, with a warning."""
    async def scenario() -> None:
        store, clock = InMemoryMetadataLogStore(), ManualClock()
        service, fetcher = await active_leader(store, clock)
        before = service.image
        assert await register(service, 1) == store.log_end_offset - 1
        stale = service._write(before, [NoOpRecord()])  # computed without broker 1's registration
        with caplog.at_level("WARNING"):
            await service._replicate(stale)
        fetcher.cancel()
        assert 1 in service.image.brokers and service.image.offset == store.log_end_offset - 1
        assert any("computed on offset" in r.getMessage() for r in caplog.records)

    asyncio.run(scenario())


def test_an_operation_whose_client_left_holds_the_lock_until_its_records_commit() -> None:
    """The server cancels a request's handler when its connection closes (a broker killed
    while its AlterPartition waits for a majority). The records are in the log: the lock is
    held until they commit, so that the next operation computes on an image that holds them
    (before, it computed on the image without them, and its own commit published an image
    that dropped them: the controller then refused the partition leader's ISR changes forever)."""
    async def scenario() -> None:
        store, clock = InMemoryMetadataLogStore(), ManualClock()
        service, fetcher = await active_leader(store, clock)
        fetcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await fetcher
        first = asyncio.get_running_loop().create_task(register(service, 1))
        await until(lambda: store.log_end_offset > service.high_watermark, "broker 1's records appended")
        end = store.log_end_offset
        first.cancel()  # its client left
        second = asyncio.get_running_loop().create_task(register(service, 2))
        await asyncio.sleep(0.01)
        assert store.log_end_offset == end and not first.done()  # the second waits for the first's commit
        fetcher = asyncio.get_running_loop().create_task(follower_fetches(service, 3001))
        with pytest.raises(asyncio.CancelledError):
            await first
        assert await second == end  # broker 2's registration, after broker 1's
        fetcher.cancel()
        assert {1, 2} <= set(service.image.brokers) and service.image.offset == store.log_end_offset - 1

    asyncio.run(scenario())

"""MirrorCoordinatorService: __mirror_state persistence (load on leadership, append before
answering, drop on resignation) and routing to the coordinator broker."""

import asyncio
import uuid
from types import SimpleNamespace

from kmirror.config.mirror import MirrorConfig
from kmirror.coordinator.offsets.log_adapter import CoordinatorAppendError
from kmirror.coordinator.runtime import CoordinatorRuntime
from kmirror.kip1279.state import MirrorPartitionState as S
from kmirror.metadata.image import PartitionRegistration, TopicImage
from kmirror.mirror.coordinator.coordinator import MirrorCoordinator, StateWrite
from kmirror.mirror.coordinator.records import MirrorPartitionKey
from kmirror.mirror.service import MirrorCoordinatorService
from kmirror.protocol.errors import ErrorCode as E

TOPIC_ID = uuid.UUID("00000000-0000-4000-8000-000000000001")


class MemoryLog:
    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.fail_with: E | None = None

    async def append(self, partition, records):
        if self.fail_with is not None:
            raise CoordinatorAppendError(self.fail_with)
        self.partitions.setdefault(partition, []).extend(records)
        return len(self.partitions[partition]) - 1

    def read_all(self, partition):
        return list(self.partitions.get(partition, []))


def key(p: int, mirror: str = "m1") -> MirrorPartitionKey:
    return MirrorPartitionKey(mirror, TOPIC_ID, p)


def loaded_service(log: MemoryLog, num_partitions: int = 1) -> MirrorCoordinatorService:
    service = MirrorCoordinatorService(MirrorCoordinator(num_partitions), log=log)
    service.on_partitions_led(range(num_partitions))
    return service


def test_a_write_is_appended_before_it_is_answered_and_replayed_by_the_next_leader() -> None:
    async def run():
        log = MemoryLog()
        service = loaded_service(log)
        await service.wait_loaded()
        result = await service.write_states([StateWrite(key(0), "orders", S.PREPARING, 3)])
        assert [r.error for r in result.partitions] == [E.none]
        assert len(log.partitions[0]) == 1
        await service.write_states([StateWrite(key(0), "orders", S.MIRRORING)])
        # a new leader (e.g. after a restart) replays the partition: state and LME survive
        other = loaded_service(log)
        await other.wait_loaded()
        read = await other.read_state_results([key(0), key(1)])
        assert [(r.error, r.state, r.last_mirrored_epoch) for r in read.partitions] == [
            (E.none, S.MIRRORING, 3), (E.none, S.UNKNOWN, -1)]
        assert await other.read_states([key(0)]) == {key(0): S.MIRRORING}

    asyncio.run(run())


def test_a_failed_append_answers_its_error_and_is_not_visible() -> None:
    async def run():
        log = MemoryLog()
        service = loaded_service(log)
        await service.wait_loaded()
        log.fail_with = E.not_leader_or_follower
        result = await service.write_states([StateWrite(key(0), "orders", S.PREPARING)])
        assert [r.error for r in result.partitions] == [E.not_leader_or_follower]
        assert (await service.read_state_results([key(0)])).partitions[0].state is S.UNKNOWN

    asyncio.run(run())


def test_illegal_transitions_are_refused_and_not_persisted() -> None:
    async def run():
        log = MemoryLog()
        service = loaded_service(log)
        await service.wait_loaded()
        result = await service.write_states([StateWrite(key(0), "orders", S.STOPPED)])
        assert [r.error for r in result.partitions] == [E.invalid_request]
        assert log.partitions == {}

    asyncio.run(run())


def test_resignation_drops_states_and_keys_answer_not_coordinator() -> None:
    async def run():
        log = MemoryLog()
        service = loaded_service(log)
        await service.wait_loaded()
        await service.write_states([StateWrite(key(0), "orders", S.PREPARING)])
        service.on_partitions_led([])
        read = await service.read_state_results([key(0)])
        assert read.partitions[0].error is E.not_coordinator
        assert service.cached_state("m1", TOPIC_ID, 0) is None
        service.on_partitions_led([0])  # led again: loading, then the persisted state is back
        assert (await service.local_read([key(0)])).partitions[0].error is E.coordinator_load_in_progress
        await service.wait_loaded()
        assert service.cached_state("m1", TOPIC_ID, 0) is S.PREPARING

    asyncio.run(run())


def test_a_partition_that_cannot_be_replayed_is_not_coordinated_and_keeps_no_half_loaded_state() -> None:
    async def run():
        log = MemoryLog()
        service = loaded_service(log)
        await service.wait_loaded()
        await service.write_states([StateWrite(key(0), "orders", S.PREPARING)])
        log.partitions[0].append((b"\x00\x07garbage", b"\x00"))  # a record of no known type
        other = loaded_service(log)
        await other.wait_loaded()
        assert not other.is_loading(0)
        assert other.coordinator.states_of_mirror("m1") == {}
        assert (await other.local_read([key(0)])).partitions[0].error is E.not_coordinator
        other.on_partitions_led([0])  # led again: loading is tried again
        await other.wait_loaded()
        assert (await other.local_read([key(0)])).partitions[0].error is E.not_coordinator

    asyncio.run(run())


def test_the_mirror_coordinator_runs_on_the_shared_coordinator_runtime() -> None:
    assert isinstance(MirrorCoordinatorService(MirrorCoordinator(1)), CoordinatorRuntime)


def test_remove_topics_and_delete_mirror_persist_tombstones() -> None:
    async def run():
        log = MemoryLog()
        service = loaded_service(log)
        await service.wait_loaded()
        await service.write_states([StateWrite(key(0), "orders", S.PREPARING),
                                    StateWrite(key(0, "m2"), "orders", S.PREPARING)])
        await service.remove_topics("m1", [TOPIC_ID])
        await service.delete_mirror("m2")
        assert [v for _, v in log.partitions[0][-2:]] == [None, None]
        other = loaded_service(log)
        await other.wait_loaded()
        assert other.coordinator.states_of_mirror("m1") == {} and other.coordinator.states_of_mirror("m2") == {}

    asyncio.run(run())


class TwoBrokers:
    """`__mirror_state` with 2 partitions: partition 0 led by broker 1, partition 1 by broker 2.
    Requests between them go through the ReadMirrorStates / WriteMirrorStates handlers."""

    def __init__(self, leaders=(1, 2)) -> None:
        from kmirror.metadata.mirrors import MIRROR_VERSION_FEATURE

        partitions = {p: PartitionRegistration((n,), (n,), n, 0, 0) for p, n in enumerate(leaders)}
        topics = {"__mirror_state": TopicImage("__mirror_state", uuid.uuid4(), partitions),
                  "orders": TopicImage("orders", TOPIC_ID, {})}
        image = SimpleNamespace(topics=topics, topics_by_id={t.topic_id: t for t in topics.values()},
                                features={MIRROR_VERSION_FEATURE: 1}, live_brokers=lambda: [1, 2])
        self.metadata = SimpleNamespace(image=image)
        self.sent: list[tuple[int, str]] = []
        self.services = {n: MirrorCoordinatorService(MirrorCoordinator(2), log=MemoryLog(), node_id=n,
                                                     metadata=self.metadata, send=self._send) for n in (1, 2)}

    async def start(self) -> None:
        for n, service in self.services.items():
            service.on_partitions_led([p for p, reg in self.metadata.image.topics["__mirror_state"].partitions.items()
                                       if reg.leader == n])
            await service.wait_loaded()

    async def _send(self, node_id, request):
        from kmirror.broker.api import RequestContext, load_handlers
        from kmirror.broker.authorization import ALLOW_ALL
        from kmirror.protocol.codec import RequestHeaderView
        from kmirror.protocol.mirror.registry import entity_types

        if node_id not in self.services:
            raise ConnectionError(f"broker {node_id} unreachable")
        api_key = int(request.__api_key__)
        self.sent.append((node_id, type(request).__name__))
        handler = {d.api_key: d for d in load_handlers()}[api_key].handler
        ctx = RequestContext(RequestHeaderView(api_key, 0, 1, "test"), entity_types(api_key)[1], "127.0.0.1", 1)
        services = SimpleNamespace(metadata=self.metadata, mirror_coordinator=self.services[node_id], node_id=node_id,
                                   authorization=ALLOW_ALL)
        return await handler(services, ctx, request)


def keys_led_by_each() -> tuple[MirrorPartitionKey, MirrorPartitionKey]:
    coordinator = MirrorCoordinator(2)
    by_partition = {}
    for p in range(64):
        by_partition.setdefault(coordinator.partition_for(key(p)), key(p))
    return by_partition[0], by_partition[1]


def test_reads_and_writes_are_routed_to_the_broker_leading_the_key_partition() -> None:
    async def run():
        brokers = TwoBrokers()
        await brokers.start()
        local_key, remote_key = keys_led_by_each()
        one = brokers.services[1]
        result = await one.write_states([StateWrite(local_key, "orders", S.PREPARING, 4),
                                         StateWrite(remote_key, "orders", S.PREPARING, 5)])
        assert [r.error for r in result.partitions] == [E.none, E.none]
        assert brokers.sent == [(2, "WriteMirrorStatesRequest")]
        # each state lives only with its coordinator
        assert brokers.services[2].cached_state("m1", TOPIC_ID, remote_key.partition) is S.PREPARING
        assert one.cached_state("m1", TOPIC_ID, remote_key.partition) is None
        read = await one.read_state_results([remote_key, local_key])
        assert [(r.error, r.state, r.last_mirrored_epoch) for r in read.partitions] == [
            (E.none, S.PREPARING, 5), (E.none, S.PREPARING, 4)]
        assert brokers.sent[-1] == (2, "ReadMirrorStatesRequest")
        # an illegal move at the remote coordinator comes back as its error
        bad = await one.write_states([StateWrite(remote_key, "orders", S.STOPPED)])
        assert bad.partitions[0].error is E.invalid_request

    asyncio.run(run())


def test_an_unreachable_or_leaderless_coordinator_is_not_available() -> None:
    async def run():
        brokers = TwoBrokers(leaders=(1, 3))
        await brokers.start()
        local_key, remote_key = keys_led_by_each()
        read = await brokers.services[1].read_state_results([remote_key])
        assert read.partitions[0].error is E.coordinator_not_available
        brokers.metadata.image.topics["__mirror_state"].partitions[1] = PartitionRegistration((3,), (3,), -1, 1, 1)
        write = await brokers.services[1].write_states([StateWrite(remote_key, "orders", S.PREPARING)])
        assert write.partitions[0].error is E.coordinator_not_available

    asyncio.run(run())


def test_without_a_log_states_are_held_in_memory() -> None:
    async def run():
        service = MirrorCoordinatorService(MirrorCoordinator(1))
        service.on_partitions_led([0])
        await service.wait_loaded()
        result = await service.write_states([StateWrite(key(0), "orders", S.PREPARING)])
        assert result.partitions[0].error is E.none
        assert await service.read_states([key(0)]) == {key(0): S.PREPARING}

    asyncio.run(run())


def test_the_source_lookups_wait_the_brokers_request_timeout():
    # AddTopicsToMirror describes the topics at the source through the coordinator service's
    # Admins: they wait `request.timeout.ms` (the node passes it), 30000 by default.
    config = MirrorConfig(bootstrap_servers=("127.0.0.1:1",))
    for kwargs, expected in (({}, 30_000), ({"source_request_timeout_ms": 2500}, 2500)):
        service = MirrorCoordinatorService(MirrorCoordinator(1), **kwargs)
        admin = service._source_lookups.admins.source("m", config)
        assert admin.cluster.request_timeout_ms == expected

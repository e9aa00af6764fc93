"""Brokers replicate the metadata log from the controller (controller-plane Fetch), keep a local
copy that replays on restart, forward admin writes, and follow the lifecycle states."""

import asyncio
import uuid

import pytest
from kio.schema.errors import ErrorCode

from kmirror.metadata import broker_service
from kmirror.metadata.broker_lifecycle import VALID_FROM, BrokerLifecycle, BrokerState
from kmirror.metadata.broker_service import BrokerMetadataService
from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.metadata.controller_service import MetadataService
from kmirror.ports import ManualClock
from kmirror.runtime.broker_lifecycle import BrokerLifecycleManager, RemoteController
from kmirror.runtime.node import SystemClock
from kmirror.testing.controller_plane import InProcessControllerChannel
from kmirror.testing.metadata import InMemoryMetadataLogStore, seeded_rng, server_config


def _controller() -> MetadataService:
    cfg = server_config(
        3000, process_roles="controller", listeners="CONTROLLER://127.0.0.1:9093",
        controller_listener_names="CONTROLLER", controller_quorum_voters="3000@127.0.0.1:9093",
    )
    return MetadataService(cfg, InMemoryMetadataLogStore(), ManualClock(), seeded_rng())


def _broker_config(node_id: int):
    return server_config(
        node_id, process_roles="broker", listeners=f"PLAINTEXT://127.0.0.1:{9091 + node_id}",
        controller_listener_names="CONTROLLER", controller_quorum_voters="3000@127.0.0.1:9093",
    )


def _broker(controller: MetadataService, node_id: int, store: InMemoryMetadataLogStore | None = None):
    channel = InProcessControllerChannel(controller)
    svc = BrokerMetadataService(_broker_config(node_id), store or InMemoryMetadataLogStore(), channel, channel, SystemClock())
    return svc, channel


def test_broker_catches_up_registers_and_is_unfenced_by_heartbeat() -> None:
    async def scenario() -> None:
        controller = _controller()
        await controller.start()
        broker, channel = _broker(controller, 1)
        seen = []
        broker.subscribe(lambda old, new: seen.append(new.offset))
        await broker.start()
        assert broker.image.cluster_id == controller.image.cluster_id
        assert broker.image.offset == controller.image.offset
        manager = BrokerLifecycleManager(
            broker.config, RemoteController(broker.config, channel), lambda: broker.image.cluster_id or "",
            lambda: broker.image.offset, uuid.UUID(int=5),
        )
        epoch = await manager.register()
        assert controller.image.brokers[1].fenced
        assert manager.lifecycle.state is BrokerState.RECOVERY
        reply = await manager.heartbeat_once()  # behind the registration record: still fenced
        assert reply.is_fenced
        await broker.fetch_once(0)
        await manager.heartbeat_once()
        assert manager.lifecycle.state is BrokerState.RUNNING
        assert not controller.image.brokers[1].fenced and epoch == controller.image.brokers[1].broker_epoch
        await broker.fetch_once(0)
        assert not broker.image.brokers[1].fenced and seen[-1] == controller.image.offset

    asyncio.run(scenario())


def test_local_copy_replays_on_restart_then_catches_up() -> None:
    async def scenario() -> None:
        controller = _controller()
        await controller.start()
        store = InMemoryMetadataLogStore()
        broker, _ = _broker(controller, 1, store)
        await broker.start()
        await broker.stop()
        stored = len(store.entries)
        controller_image_offset = controller.image.offset
        restarted, channel = _broker(controller, 1, store)
        await restarted.start()
        assert restarted.image.offset == controller_image_offset
        fetch = channel.sent[0]
        assert fetch.topics[0].partitions[0].fetch_offset == stored  # resumes after the local copy
        await restarted.stop()

    asyncio.run(scenario())


def test_admin_writes_are_forwarded_and_visible_when_answered() -> None:
    async def scenario() -> None:
        controller = _controller()
        await controller.start()
        broker, channel = _broker(controller, 1)
        await broker.start()
        manager = BrokerLifecycleManager(
            broker.config, RemoteController(broker.config, channel), lambda: broker.image.cluster_id or "",
            lambda: broker.image.offset, uuid.UUID(int=5),
        )
        await manager.register()
        await broker.fetch_once(0)
        await manager.heartbeat_once()
        broker._catch_up_timeout_ms = 0  # the fetch loop is not running here: no waiting
        results = await broker.create_topics([CreatableTopic("t", 2, 1)])
        assert results[0].error.code == ErrorCode.none and results[0].num_partitions == 2
        assert "t" in controller.image.topics
        await broker.fetch_once(0)
        assert broker.image.topics["t"].topic_id == controller.image.topics["t"].topic_id
        first, size = await broker.allocate_producer_ids(1)
        assert size > 0 and first >= 0

    asyncio.run(scenario())


def test_metadata_fetch_long_poll_returns_when_the_controller_appends() -> None:
    async def scenario() -> None:
        controller = _controller()
        await controller.start()
        end = controller.log_end_offset
        waiter = asyncio.ensure_future(controller.wait_for_records(end, 60_000))
        await asyncio.sleep(0)
        assert not waiter.done()
        await controller.create_topics([CreatableTopic("t", 1, 1)])  # fails (no brokers) and writes nothing
        await asyncio.sleep(0)
        assert not waiter.done()
        await controller.register_broker(7, uuid.UUID(int=1), (), None)
        await asyncio.wait_for(waiter, 5)
        assert [o for o, _ in controller.read_entries(end)] == list(range(end, controller.log_end_offset))

    asyncio.run(scenario())


def test_metadata_fetch_beyond_the_end_is_out_of_range() -> None:
    async def scenario() -> None:
        controller = _controller()
        await controller.start()
        channel = InProcessControllerChannel(controller)
        broker = BrokerMetadataService(_broker_config(1), InMemoryMetadataLogStore(), channel, channel, SystemClock())
        broker._image = type(broker.image)(offset=controller.log_end_offset + 5)
        with pytest.raises(Exception, match="metadata fetch"):
            await broker.fetch_once(0)

    asyncio.run(scenario())


def test_lifecycle_transitions() -> None:
    assert VALID_FROM[BrokerState.SHUTTING_DOWN] == {BrokerState.PENDING_CONTROLLED_SHUTDOWN, BrokerState.SHUTTING_DOWN}
    lc = BrokerLifecycle()
    lc.on_registered(10)
    assert lc.state is BrokerState.RECOVERY and lc.broker_epoch == 10
    lc.on_heartbeat(is_fenced=False, should_shut_down=False)
    assert lc.state is BrokerState.RUNNING
    lc.on_heartbeat(is_fenced=True, should_shut_down=False)
    assert lc.state is BrokerState.RECOVERY
    lc.on_stale_epoch()
    assert lc.state is BrokerState.STARTING
    lc.on_registered(20)
    lc.begin_controlled_shutdown()
    assert lc.want_shut_down
    lc.on_heartbeat(is_fenced=False, should_shut_down=False)
    assert lc.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN
    lc.on_stale_epoch()
    assert lc.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN
    lc.on_heartbeat(is_fenced=True, should_shut_down=True)
    assert lc.state is BrokerState.SHUTTING_DOWN and not lc.want_shut_down


def test_a_broker_behind_the_controllers_log_start_loads_its_snapshot_and_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_service, "SNAPSHOT_CHUNK_BYTES", 100)  # several FetchSnapshot rounds

    async def scenario() -> None:
        store = InMemoryMetadataLogStore()
        cfg = server_config(3000, metadata_log_max_record_bytes_between_snapshots="1",
                            metadata_max_retention_bytes="0")  # combined: its broker takes the replicas
        controller = MetadataService(cfg, store, ManualClock(), seeded_rng())
        await controller.start()
        await controller.create_topics([CreatableTopic("gone", 1, 1), CreatableTopic("kept", 2, 1)])
        broker_store = InMemoryMetadataLogStore()
        broker, _ = _broker(controller, 1, broker_store)
        await broker.start()
        await broker.stop()
        await controller.create_topics([CreatableTopic(f"t{i}", 3, 1) for i in range(5)])
        await controller.delete_topics(["gone"])
        await controller.snapshot_if_due()
        assert controller.log_start_offset == controller.image.offset + 1 == controller.latest_snapshot.end_offset
        await controller.create_topics([CreatableTopic("after", 1, 1)])

        restarted, channel = _broker(controller, 1, broker_store)
        changes = []
        restarted.subscribe(lambda old, new: changes.append((set(old.topics), set(new.topics))))
        await restarted.start()
        assert restarted.image == controller.image
        assert sum(1 for request in channel.sent if int(request.__api_key__) == 59) > 1
        assert "gone" in changes[0][0] and "gone" not in changes[0][1]  # a deletion the broker only sees as absence
        assert broker_store.log_start_offset == controller.latest_snapshot.end_offset
        again, _ = _broker(controller, 1, broker_store)
        await again.start()  # its own copy now: the installed snapshot and the log after it
        assert again.image == controller.image

        later = MetadataService(cfg, store, ManualClock(), seeded_rng())
        await later.start()  # a controller restarts from its snapshot and the log after it
        assert set(later.image.topics) == set(controller.image.topics)

    asyncio.run(scenario())


def test_a_snapshot_deleted_while_a_broker_fetches_it_is_fetched_anew() -> None:
    async def scenario() -> None:
        cfg = server_config(3000, metadata_log_max_record_bytes_between_snapshots="1",
                            metadata_max_retention_bytes="0")
        controller = MetadataService(cfg, InMemoryMetadataLogStore(), ManualClock(), seeded_rng())
        await controller.start()
        await controller.create_topics([CreatableTopic("a", 1, 1)])
        await controller.snapshot_if_due()
        broker, channel = _broker(controller, 1)
        real_send = channel.send

        async def send(api_key, timeout_ms=None, **fields):
            if api_key == 59 and not getattr(send, "raced", False):
                send.raced = True  # retention replaces the snapshot under the first FetchSnapshot
                await controller.create_topics([CreatableTopic("b", 1, 1)])
                await controller.snapshot_if_due()
            return await real_send(api_key, timeout_ms, **fields)

        channel.send = send
        await broker.start()
        assert broker.image == controller.image and "b" in broker.image.topics

    asyncio.run(scenario())

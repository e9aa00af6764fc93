"""The mirror data plane's adapters: the state store over the mirror coordinator (with the
in-memory fallback), the BumpLeaderEpochs request, source clusters from the image, and a
whole MirrorDataPlane pass over in-process brokers."""

import asyncio
import dataclasses
import itertools
from uuid import UUID

import pytest

from kmirror.config.mirror import MirrorConfig
from kmirror.kip1279.state import MirrorPartitionState as S
from kmirror.metadata.controller import mirrors
from kmirror.metadata.image import ConfigResource, PartitionRegistration
from kmirror.metadata.mirror_records import MIRROR_CONFIG_RESOURCE_TYPE
from kmirror.mirror.coordinator.coordinator import MirrorCoordinator, StatesResult
from kmirror.mirror.coordinator.records import MirrorPartitionKey
from kmirror.mirror.lifecycle_ports import PartitionKey, StepPending
from kmirror.mirror.source_clusters import ImageSourceClusters, mirror_source_configs
from kmirror.mirror.source_lookup import admin_source_lookup
from kmirror.mirror.source_waits import BoundedSourceCluster
from kmirror.mirror.wiring import (
    ControllerEpochBumper,
    CoordinatorStateStore,
    MirrorDataPlane,
    bump_leader_epochs_request,
)
from kmirror.ports import ManualClock
from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, read_control_type
from kmirror.security.client_config import PLAINTEXT
from kmirror.testing.metadata import server_config
from kmirror.testing.mirror_fetcher import InProcessSourceCluster
from kmirror.testing.replication import image_with
from kmirror.testing.replication_harness import Broker
from kmirror.types import TopicPartition

TOPIC_ID = UUID(int=0xBEEF)
TP = TopicPartition("t", 0)
KEY = PartitionKey("m", TOPIC_ID, 0)


class Service:
    """The MirrorCoordinatorService contract the store and the data plane use, over a real
    MirrorCoordinator whose appends are acknowledged at once."""

    def __init__(self, loaded: bool = True) -> None:
        self.coordinator = MirrorCoordinator(4)
        if loaded:
            for p in range(4):
                self.coordinator.begin_load(p)
                self.coordinator.complete_load(p, [])
        self._ids = itertools.count()

    async def _run(self, make):
        rid = next(self._ids)
        out = make(rid)
        for append in list(out.appends):
            out.extend(self.coordinator.on_append_completed(append.ticket))
        result = out.response_for(rid)
        assert isinstance(result, StatesResult)
        return result

    async def read_state_results(self, keys):
        return await self._run(lambda rid: self.coordinator.read_states(rid, keys))

    async def write_states(self, writes):
        return await self._run(lambda rid: self.coordinator.write_states(rid, writes))

    async def remove_topics(self, mirror_name, topic_ids):
        return await self._run(lambda rid: self.coordinator.remove_topics(rid, mirror_name, topic_ids))

    async def describe_source_topics(self, mirror_name, config, names):
        return await admin_source_lookup(mirror_name, config, names)


def _store(service, exists=True):
    return CoordinatorStateStore(service, lambda tid: "t" if tid == TOPIC_ID else None, lambda: exists)


def test_state_store_writes_through_the_coordinator_with_its_transition_table():
    service = Service()
    store = _store(service)

    async def go():
        assert await store.load(KEY) is None
        await store.save(KEY, S.PREPARING, -1)
        await store.save(KEY, S.MIRRORING, -1)
        await store.save(KEY, S.STOPPING, 3)
        assert await store.load(KEY) == (S.STOPPING, 3)
        value = service.coordinator.state_of(MirrorPartitionKey("m", TOPIC_ID, 0))
        assert (value.topic_name, value.state, value.last_mirrored_epoch) == ("t", S.STOPPING, 3)
        with pytest.raises(StepPending):  # STOPPING -> PREPARING is not in the table
            await store.save(KEY, S.PREPARING, -1)
        with pytest.raises(StepPending):  # only a FAILED partition is cleared
            await store.save(KEY, None, 3)
        await store.save(KEY, S.FAILED, 3)
        await store.save(KEY, None, 3)
        assert await store.load(KEY) is None

    asyncio.run(go())
    assert store.local.states == {}


def test_state_store_waits_on_coordinator_errors_and_reads_unknown_before_the_state_topic_exists():
    unloaded = Service(loaded=False)

    async def go():
        with pytest.raises(StepPending):
            await _store(unloaded).save(KEY, S.PREPARING, -1)
        with pytest.raises(StepPending):
            await _store(unloaded).load(KEY)
        assert await _store(unloaded, exists=False).load(KEY) is None
        absent = _store(None)
        await absent.save(KEY, S.PREPARING, -1)
        assert await absent.load(KEY) == (S.PREPARING, -1)

    asyncio.run(go())


def test_bump_leader_epochs_request_names_the_partition_by_topic_id():
    request = bump_leader_epochs_request([mirrors.EpochBump(TOPIC_ID, 2, 8)])
    assert request.topics[0].topic_id == TOPIC_ID
    assert (request.topics[0].partitions[0].partition_index, request.topics[0].partitions[0].min_leader_epoch) == (2, 8)


def test_bump_leader_epochs_request_groups_many_partitions_by_topic():
    other = UUID(int=99)
    request = bump_leader_epochs_request([mirrors.EpochBump(TOPIC_ID, 0, 3), mirrors.EpochBump(other, 5, 1),
                                          mirrors.EpochBump(TOPIC_ID, 1, 4)], 7)
    assert [(t.topic_id, [(p.partition_index, p.min_leader_epoch) for p in t.partitions]) for t in request.topics] \
        == [(TOPIC_ID, [(0, 3), (1, 4)]), (other, [(5, 1)])]
    assert request.min_producer_id == 7


def test_epoch_bumper_sends_concurrent_bumps_as_one_request_with_the_highest_producer_id_floor():
    class Local:
        forwarding = False

        def __init__(self):
            self.bumps = []

        async def bump_leader_epochs(self, bumps, min_producer_id=-1):
            self.bumps.append((tuple(bumps), min_producer_id))
            return [mirrors.EpochBumpResult(b.topic_id, "t", b.partition, _ok(mirrors), b.min_leader_epoch)
                    for b in bumps]

    md = Local()
    bumper = ControllerEpochBumper(md)

    async def go():
        await asyncio.gather(*(bumper.bump(TopicPartition("t", p), TOPIC_ID, p + 1, 10 * p) for p in range(50)))
        await bumper.bump(TP, TOPIC_ID, 9)  # after the batch: a request of its own

    asyncio.run(go())
    assert md.bumps == [(tuple(mirrors.EpochBump(TOPIC_ID, p, p + 1) for p in range(50)), 490),
                        ((mirrors.EpochBump(TOPIC_ID, 0, 9),), -1)]
    assert bumper.bumps.requests == 2


def test_state_store_batches_concurrent_writes_and_keeps_each_partitions_answer():
    service = Service()
    store = _store(service)
    calls = []
    write_states = service.write_states

    async def counting(writes):
        calls.append(len(writes))
        return await write_states(writes)

    service.write_states = counting
    keys = [PartitionKey("m", TOPIC_ID, p) for p in range(20)]

    async def go():
        await asyncio.gather(*(store.save(k, S.PREPARING, -1) for k in keys))
        # One illegal move in a batch fails that partition only.
        outcomes = await asyncio.gather(store.save(keys[0], S.STOPPED, -1),
                                        *(store.save(k, S.MIRRORING, -1) for k in keys[1:]), return_exceptions=True)
        assert isinstance(outcomes[0], StepPending) and "PREPARING -> STOPPED" in str(outcomes[0])
        assert outcomes[1:] == [None] * 19
        loaded = await asyncio.gather(*(store.load(k) for k in keys))
        assert loaded == [(S.PREPARING, -1)] + [(S.MIRRORING, -1)] * 19

    asyncio.run(go())
    assert calls == [20, 20]
    assert store.reads.requests == 1


def test_epoch_bumper_forwards_from_a_broker_and_survives_failures():
    class Forwarding:
        forwarding = True

        def __init__(self):
            self.sent = []

        async def forward(self, request):
            self.sent.append(request)
            if len(self.sent) > 1:
                raise ConnectionError("controller down")

    md = Forwarding()
    bumper = ControllerEpochBumper(md)
    asyncio.run(bumper.bump(TP, TOPIC_ID, 4))
    asyncio.run(bumper.bump(TP, TOPIC_ID, 4))  # logged, the manager's step stays pending
    assert [r.topics[0].partitions[0].min_leader_epoch for r in md.sent] == [4, 4]


def test_epoch_bumper_calls_the_local_controller_on_a_combined_node():
    class Local:
        forwarding = False

        def __init__(self):
            self.bumps = []

        async def bump_leader_epochs(self, bumps, min_producer_id=-1):
            self.bumps.append((tuple(bumps), min_producer_id))
            return [mirrors.EpochBumpResult(b.topic_id, "t", b.partition, _ok(mirrors), b.min_leader_epoch)
                    for b in bumps]

    md = Local()
    asyncio.run(ControllerEpochBumper(md).bump(TP, TOPIC_ID, 6, 42))
    assert md.bumps == [((mirrors.EpochBump(TOPIC_ID, 0, 6),), 42)]


def test_epoch_bump_request_carries_the_producer_id_fence_as_a_tagged_field():
    from kmirror.mirror.wiring import bump_leader_epochs_request
    assert bump_leader_epochs_request([mirrors.EpochBump(TOPIC_ID, 0, 6)]).min_producer_id == -1
    request = bump_leader_epochs_request([mirrors.EpochBump(TOPIC_ID, 0, 6)], 42)
    assert (request.min_producer_id, request.topics[0].partitions[0].min_leader_epoch) == (42, 6)


def _ok(mirrors):
    return mirrors.NONE


def _image(broker_id, epoch, mirror_name, bootstrap="src:9092"):
    regs = {0: PartitionRegistration((broker_id,), (broker_id,), broker_id, epoch, epoch)}
    image = image_with({"t": (TOPIC_ID, regs)}, configs={"t": {"mirror.name": mirror_name}} if mirror_name else {})
    configs = dict(image.configs)
    if bootstrap is not None:
        configs[ConfigResource(MIRROR_CONFIG_RESOURCE_TYPE, "m")] = {"bootstrap.servers": bootstrap,
                                                                     "internal.source.cluster.id": "x"}
    return dataclasses.replace(image, configs=configs)


def test_source_clusters_come_from_the_mirror_configs_and_follow_bootstrap_changes():
    current = {"image": _image(7, 0, "m")}
    made = []

    def factory(bootstrap, client_id, security):
        made.append((bootstrap, client_id))
        return InProcessSourceCluster({}, 1)

    sources = ImageSourceClusters(7, lambda: current["image"], factory)
    assert mirror_source_configs(current["image"], "m") == {"bootstrap.servers": "src:9092"}
    first = sources("m")
    assert sources("m") is first and sources("other") is None
    current["image"] = _image(7, 0, "m", bootstrap="elsewhere:9092")
    assert sources("m") is not first and sources.retired == [first]
    assert made == [("src:9092", "broker-7-mirror-m-metadata"), ("elsewhere:9092", "broker-7-mirror-m-metadata")]
    current["image"] = _image(7, 0, "m", bootstrap=None)
    assert sources("m") is None
    asyncio.run(sources.close())
    assert sources.sources == {}


def test_source_clusters_follow_security_config_changes_and_skip_unusable_ones():
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{}";'
    current = {"image": _image(7, 0, "m")}
    made = []

    def factory(bootstrap, client_id, security):
        made.append(security)
        return InProcessSourceCluster({}, 1)

    def with_configs(extra):
        image = current["image"]
        configs = dict(image.configs)
        key = ConfigResource(MIRROR_CONFIG_RESOURCE_TYPE, "m")
        configs[key] = {"bootstrap.servers": "src:9092", **extra}
        return dataclasses.replace(image, configs=configs)

    sources = ImageSourceClusters(7, lambda: current["image"], factory)
    first = sources("m")
    assert made[-1].is_plaintext
    secure = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas.format("p1")}
    current["image"] = with_configs(secure)
    second = sources("m")
    assert second is not first and made[-1].sasl.password == "p1"
    assert sources("m") is second  # unchanged configs keep the connection
    current["image"] = with_configs({**secure, "sasl.jaas.config": jaas.format("p2")})
    assert sources("m") is not second and made[-1].sasl.password == "p2"
    current["image"] = with_configs({"security.protocol": "SASL_PLAINTEXT"})  # no usable credentials
    assert sources("m") is None and len(made) == 3


def _segments(b):
    log = b.rm.get_partition(TP).log
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:  # one segment per read
        buf = bytes(log.read(offset, 1 << 30, log.log_end_offset, True).records)
        for pos, h in iter_batches(buf):
            out.append((h.base_offset, buf[pos:pos + h.size]))
            offset = h.next_offset
    return out


class Metadata:
    forwarding = False

    def __init__(self, dst, image):
        self.dst, self.image, self.bumps = dst, image, []

    async def bump_leader_epochs(self, bumps, min_producer_id=-1):
        self.bumps.extend(bumps)
        b = bumps[0]
        epoch = max(self.dst.rm.get_partition(TP).leader_epoch + 1, b.min_leader_epoch)
        old, self.image = self.image, _image(7, epoch, "m.removed")
        self.dst.rm.apply_image(old, self.image)
        return []


def test_data_plane_pass_mirrors_byte_identical_then_fails_over_with_pid_reset():
    src = Broker(1, ManualClock(), 30_000)
    src.rm.apply_image(None, _image(1, 3, None, bootstrap=None))
    for codec in (0, 1, 2, 3, 4):
        src.rm.append_records({TP: build_batch([(b"k", b"v" * 50, (("h", b"x"),), 1)] * 3, compression=codec)}, 1)
    dst = Broker(7, ManualClock(), 30_000)
    md = Metadata(dst, _image(7, 0, "m"))
    dst.rm.apply_image(None, md.image)
    source = InProcessSourceCluster({1: src.rm}, 1, cluster_id="src-id")
    checks: list[bool] = []  # the cluster id guard's questions (refresh=True)
    answer_cluster_id = source.cluster_id

    async def cluster_id(refresh: bool = False) -> str:
        checks.append(refresh)
        return await answer_cluster_id(refresh)

    source.cluster_id = cluster_id  # type: ignore[method-assign]
    service = Service()
    plane = MirrorDataPlane(7, None, dst.clock, dst.rm, md, service, source_factory=lambda b, c, s: source)

    async def go():
        plane.on_metadata_change(md.image)
        await plane.run_once()
        assert plane.manager.partitions[TP].state is S.MIRRORING
        assert True in checks  # checked before fetching
        for _ in range(10):
            for fetcher in list(plane.manager.fetchers.fetchers.values()):
                await fetcher.run_once()
        assert _segments(dst) == _segments(src)
        checks.clear()
        plane.on_metadata_change(_image(7, 0, "m.removed"))
        await plane.run_once()  # bump requested; the new epoch arrives with the next image
        plane.on_metadata_change(md.image)
        await plane.run_once()
        assert True not in checks  # a failover asks the source nothing (a black hole would hold it)
        await plane.stop()

    asyncio.run(go())
    assert plane.manager.partitions[TP].state is S.STOPPED
    assert service.coordinator.state_of(MirrorPartitionKey("m", TOPIC_ID, 0)).state is S.STOPPED
    assert [b.min_leader_epoch for b in md.bumps] == [4]
    got = _segments(dst)
    assert got[:-1] == _segments(src)
    base, raw = got[-1]
    assert base == src.rm.get_partition(TP).log.log_end_offset
    assert read_control_type(raw, 0) is ControlType.MIRROR_PID_RESET
    assert dst.rm.get_partition(TP).log.producer_state.producers == {}


def test_a_high_watermark_move_of_a_waiting_partition_resumes_only_it_and_an_image_still_runs_a_full_pass():
    # The plane's task: a partition waiting on its followers is resumed by the replica
    # manager's append listener (its high watermark moved) at once, without a full pass
    # and without the refresh tick; a partition that is not waiting wakes nothing.
    dst = Broker(7, ManualClock(), 30_000)
    md = Metadata(dst, _image(7, 0, "m"))
    dst.rm.apply_image(None, md.image)
    plane = MirrorDataPlane(7, None, dst.clock, dst.rm, md, Service(),
                            source_factory=lambda b, c, s: InProcessSourceCluster({}, 1))
    plane.refresh_interval_ms = 3_600_000
    resumed: list[set[TopicPartition]] = []
    full_passes: list[object] = []
    moved = asyncio.Event()

    class Recorder:
        async def on_replica_progress(self, tps):
            resumed.append(set(tps))
            moved.set()

        async def run_once(self):
            full_passes.append(True)
            moved.set()

    recorder = Recorder()
    plane.manager.on_replica_progress = recorder.on_replica_progress
    plane.run_once = recorder.run_once

    async def go():
        plane.start()
        dst.rm.notify_follower_progress(TopicPartition("t", 1))  # not waiting: no pass
        plane.manager.awaiting_replicas.add(TP)
        dst.rm.notify_follower_progress(TP)
        await asyncio.wait_for(moved.wait(), 10)
        assert resumed == [{TP}] and full_passes == []
        moved.clear()
        plane.on_metadata_change(md.image)
        await asyncio.wait_for(moved.wait(), 10)
        assert full_passes == [True] and resumed == [{TP}]
        await plane.stop()

    asyncio.run(go())


def test_a_bootstrap_change_moves_the_partitions_to_a_new_source_and_closes_the_replaced_one():
    src = Broker(1, ManualClock(), 30_000)
    src.rm.apply_image(None, _image(1, 3, None, bootstrap=None))
    src.rm.append_records({TP: build_batch([(b"k", b"v" * 50, (("h", b"x"),), 1)] * 3, compression=3)}, 1)
    dst = Broker(7, ManualClock(), 30_000)
    md = Metadata(dst, _image(7, 0, "m"))
    dst.rm.apply_image(None, md.image)
    made = {}

    def factory(bootstrap, client_id, security):
        made[bootstrap] = InProcessSourceCluster({1: src.rm}, 1, cluster_id="src-id")
        return made[bootstrap]

    plane = MirrorDataPlane(7, None, dst.clock, dst.rm, md, Service(), source_factory=factory)

    async def copy():
        for _ in range(10):
            for fetcher in list(plane.manager.fetchers.fetchers.values()):
                await fetcher.run_once()

    async def go():
        plane.on_metadata_change(md.image)
        await plane.run_once()
        await copy()
        assert _segments(dst) == _segments(src)
        src.rm.append_records({TP: build_batch([(b"k2", b"w" * 70, (), 1)] * 2, compression=4)}, 1)
        moved = _image(7, 0, "m", bootstrap="elsewhere:9092")
        plane.on_metadata_change(moved)
        await plane.run_once()
        assert made["src:9092"].closed and not made["elsewhere:9092"].closed
        moved = [mp.source for mp in plane.manager.fetchers.partitions.values()]
        assert moved and all(isinstance(s, BoundedSourceCluster) and s.inner is made["elsewhere:9092"] for s in moved)
        assert plane.sources.retired == []
        await copy()
        assert made["elsewhere:9092"].endpoints  # the copy continues through the new source
        await plane.stop()

    asyncio.run(go())
    assert plane.manager.partitions[TP].state is S.MIRRORING
    assert _segments(dst) == _segments(src)
    assert made["elsewhere:9092"].closed  # shutdown closes the current one


def test_the_brokers_request_timeout_bounds_the_mirrors_requests_to_its_source():
    # KIP-1279's broker config request.timeout.ms (default 30000): the source clusters the
    # plane connects to, and the metadata sync's source Admins, wait that long for an answer.
    dst = Broker(7, ManualClock(), 30_000)
    md = Metadata(dst, _image(7, 0, "m"))
    for overrides, expected in (({}, 30_000), ({"request_timeout_ms": "2500"}, 2500)):
        plane = MirrorDataPlane(7, server_config(7, **overrides), dst.clock, dst.rm, md, Service())
        source = plane.sources.factory("127.0.0.1:1", "broker-7-mirror-m", PLAINTEXT)
        assert source.inner.request_timeout_ms == expected  # type: ignore[attr-defined]
        admin = plane.sync_admins.source("m", MirrorConfig(bootstrap_servers=("127.0.0.1:1",)))
        assert admin.cluster.request_timeout_ms == expected

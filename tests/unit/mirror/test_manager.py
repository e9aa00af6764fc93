"""MirrorManager: the partition lifecycle executed on a destination leader against an
in-process source: PREPARING (LME truncation) -> MIRRORING (byte-identical copy) ->
STOPPING -> STOPPED (truncate to LSO, LME, epoch bump, MIRROR_PID_RESET)."""

import asyncio

from kmirror.kip1279.state import MirrorPartitionState as S
from kmirror.metadata.image import PartitionRegistration
from kmirror.mirror.fetcher.local_replica import MirrorLocalReplica
from kmirror.mirror.fetcher.manager import MirrorFetcherManager
from kmirror.mirror.fetcher.policy import mirror_fetch_policy
from kmirror.mirror.lifecycle_ports import InMemoryMirrorStateStore, StepPending
from kmirror.mirror.manager import MirrorManager
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, read_control_type
from kmirror.testing.mirror_fetcher import InProcessSourceCluster
from kmirror.testing.mirror_manager import TOPIC_ID, TP, Bumper, batches, drain, image, setup
from kmirror.testing.replication import image_with
from kmirror.testing.replication_harness import Broker
from kmirror.types import TopicPartition


def test_add_prepares_then_mirrors_byte_identical_then_fails_over_writable_with_pid_reset():
    src, dst, source, fetchers, store, bumper, mgr = setup()

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        assert mgr.partitions[TP].state is S.MIRRORING
        await drain(fetchers)
        assert batches(dst) == batches(src)
        d = mgr.describe()[TP]
        assert (d.source_offset, d.destination_offset, d.lag, d.state) == (9, 9, 0, S.MIRRORING)
        # Failover: mirror.name becomes m.removed.
        await mgr.on_metadata_change(image(7, 0, "m.removed"))
        assert mgr.partitions[TP].state is S.STOPPED

    asyncio.run(go())
    assert [s for _, s in store.history] == [S.PREPARING, S.MIRRORING, S.STOPPING, S.STOPPING, S.STOPPED]
    assert mgr.partitions[TP].last_mirrored_epoch == 3
    assert bumper.calls == [4]
    assert bumper.producer_calls == [-1]  # no idempotent producer mirrored: no fence
    p = dst.rm.get_partition(TP)
    assert p.leader_epoch >= 4
    got = batches(dst)
    assert got[:-1] == batches(src)  # mirrored offsets and bytes unchanged
    base, epoch, raw = got[-1]
    assert base == 9 and epoch == p.leader_epoch
    assert read_control_type(raw, 0) is ControlType.MIRROR_PID_RESET
    assert not fetchers.is_fetching(TP)


def test_failover_fences_producer_ids_up_to_the_greatest_mirrored_one():
    src, dst, source, fetchers, store, bumper, mgr = setup(producer_ids=(41, 7, -1))

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        await drain(fetchers)
        assert set(dst.rm.get_partition(TP).log.producer_state.producers) == {7, 41}
        await mgr.on_metadata_change(image(7, 0, "m.removed"))

    asyncio.run(go())
    assert mgr.partitions[TP].state is S.STOPPED
    assert bumper.producer_calls == [42]
    assert dst.rm.get_partition(TP).log.producer_state.producers == {}  # MIRROR_PID_RESET


def test_failover_waits_for_the_producer_id_fence_in_the_image():
    src, dst, source, fetchers, store, bumper, mgr = setup(producer_ids=(41, 7, -1))
    bumper.fence_arrives = False  # the bump is answered, the fence has not reached this broker yet

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        await drain(fetchers)
        await mgr.on_metadata_change(image(7, 0, "m.removed"))
        assert mgr.partitions[TP].state is S.STOPPING
        assert batches(dst) == batches(src)  # no MIRROR_PID_RESET yet
        bumper.floor = 42
        await mgr.on_metadata_change(image(7, dst.rm.get_partition(TP).leader_epoch, "m.removed"))

    asyncio.run(go())
    assert mgr.partitions[TP].state is S.STOPPED
    # Resumed after the bump: the same LME (the bumped epoch holds no record), no second bump.
    assert mgr.partitions[TP].last_mirrored_epoch == 3
    assert bumper.calls == [4]


def test_first_mirroring_with_lme_minus_one_truncates_local_data_and_copies_from_scratch():
    src, dst, source, fetchers, store, bumper, mgr = setup()
    dst.rm.get_partition(TP).log.append_as_leader(build_batch([(None, b"local", (), 1)]), 0)

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        await drain(fetchers)

    asyncio.run(go())
    assert batches(dst) == batches(src)


def test_failback_with_lme_keeps_the_common_prefix_and_copies_only_the_delta():
    src, dst, source, fetchers, store, bumper, mgr = setup(src_epoch=3)
    # Destination already holds the first two source batches (epoch 3), then its own epoch 5.
    for _, _, raw in batches(src)[:2]:
        dst.rm.get_partition(TP).log.append_as_follower(raw)
    dst.rm.get_partition(TP).log.append_as_leader(build_batch([(None, b"diverged", (), 1)]), 5)
    source.last_mirrored_epochs[TP] = 3

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        await drain(fetchers)

    asyncio.run(go())
    assert batches(dst) == batches(src)
    assert sum(len(p.partitions) for ep in source.endpoints for p in ep.fetches if p.partitions[0].fetch_offset == 0) == 0


def test_pause_stops_fetching_and_resume_continues_from_the_log_end():
    src, dst, source, fetchers, store, bumper, mgr = setup()

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        await drain(fetchers)
        await mgr.on_metadata_change(image(7, 0, "m.paused"))
        assert mgr.partitions[TP].state is S.PAUSED and not fetchers.is_fetching(TP)
        src.rm.append_records({TP: build_batch([(None, b"later", (), 1)])}, 1)
        await drain(fetchers)
        assert dst.rm.get_partition(TP).log.log_end_offset == 9
        await mgr.on_metadata_change(image(7, 0, "m"))
        assert mgr.partitions[TP].state is S.MIRRORING
        await drain(fetchers)

    asyncio.run(go())
    assert batches(dst) == batches(src)


def test_a_corrupt_batch_moves_the_partition_to_failed():
    src, dst, source, fetchers, store, bumper, mgr = setup()

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        fetchers.local.on_failed(TP, "CORRUPT_MESSAGE")
        await mgr.reconcile(TP)

    asyncio.run(go())
    assert mgr.partitions[TP].state is S.FAILED
    assert not fetchers.is_fetching(TP)


class FailedWriteRefusedOnce(InMemoryMirrorStateStore):
    """The first write of FAILED is not persisted, as a coordinator that moved."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = False

    async def save(self, key, state, last_mirrored_epoch):
        if state is S.FAILED and not self.refused:
            self.refused = True
            raise StepPending("WriteMirrorStates: NOT_COORDINATOR")
        await super().save(key, state, last_mirrored_epoch)


def test_a_corrupt_batch_whose_failed_write_is_refused_fails_the_partition_on_the_next_pass():
    src, dst, source, fetchers, _, bumper, _ = setup()
    store = FailedWriteRefusedOnce()
    mgr = MirrorManager(7, dst.rm, fetchers, store, bumper, lambda name: source, dst.clock)

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        fetchers.local.on_failed(TP, "CORRUPT_MESSAGE")  # reported once by the fetcher
        await mgr.reconcile(TP)
        assert store.refused and mgr.partitions[TP].state is S.MIRRORING
        await mgr.reconcile(TP)

    asyncio.run(go())
    assert mgr.partitions[TP].state is S.FAILED and store.states[mgr.partitions[TP].key][0] is S.FAILED
    assert not fetchers.is_fetching(TP)


class FlakyStore(InMemoryMirrorStateStore):
    """Fails the first `load` of the given partitions, as a coordinator that moved."""

    def __init__(self, failing: set[int]) -> None:
        super().__init__()
        self.failing = set(failing)

    async def load(self, key):
        if key.partition in self.failing:
            self.failing.discard(key.partition)
            raise ConnectionError("coordinator not available")
        return await super().load(key)


def test_a_state_read_error_leaves_only_that_partition_pending_and_it_resumes_on_the_next_pass():
    tp1 = TopicPartition("t", 1)

    def two_partitions(broker_id, mirror_name):
        regs = {p: PartitionRegistration((broker_id,), (broker_id,), broker_id, 0, 0) for p in (0, 1)}
        configs = {"t": {"mirror.name": mirror_name}} if mirror_name else {}
        return image_with({"t": (TOPIC_ID, regs)}, configs=configs)

    src = Broker(1, ManualClock(), 30_000)
    src.rm.apply_image(None, two_partitions(1, None))
    for tp in (TP, tp1):
        src.rm.append_records({tp: build_batch([(b"k", b"v", (), 1)] * 2)}, 1)
    dst = Broker(7, ManualClock(), 30_000)
    dst.rm.apply_image(None, two_partitions(7, "m"))
    source = InProcessSourceCluster({1: src.rm}, 1, cluster_id="src-id")
    fetchers = MirrorFetcherManager(7, MirrorLocalReplica(dst.rm), mirror_fetch_policy(), dst.clock)
    store = FlakyStore({0})
    mgr = MirrorManager(7, dst.rm, fetchers, store, Bumper(dst, "m"), lambda name: source, dst.clock)

    async def go():
        await mgr.on_metadata_change(two_partitions(7, "m"))  # must not raise
        assert TP not in mgr.partitions and not fetchers.is_fetching(TP)
        assert mgr.partitions[tp1].state is S.MIRRORING  # the rest of the pass went on
        assert {k.partition for k, _ in store.history} == {1}
        await mgr.on_metadata_change(two_partitions(7, "m"))
        assert mgr.partitions[TP].state is S.MIRRORING

    asyncio.run(go())


def test_lme_truncation_waits_for_every_replica_with_the_topics_unclean_election_config():
    # Replicas 7 (leader), 8 and 9; 9 is out of the ISR. PREPARING completes once the ISR has
    # truncated, or, with the topic config mirror.support.unclean.leader.election=true (KIP-1279,
    # dynamic), once every replica has joined the ISR and truncated.
    def image_of(unclean):
        regs = {0: PartitionRegistration((7, 8, 9), (7, 8), 7, 1, 1)}
        configs = {"mirror.name": "m"} | ({"mirror.support.unclean.leader.election": unclean} if unclean else {})
        return image_with({"t": (TOPIC_ID, regs)}, configs={"t": configs})

    dst = Broker(7, ManualClock(), 30_000)
    dst.rm.apply_image(None, image_of(None))
    fetchers = MirrorFetcherManager(7, MirrorLocalReplica(dst.rm), mirror_fetch_policy(), dst.clock)
    mgr = MirrorManager(7, dst.rm, fetchers, InMemoryMirrorStateStore(), Bumper(dst, "m"), lambda name: None, dst.clock)
    for unclean, pending in ((None, "[8]"), ("false", "[8]"), ("true", "[8, 9]"), ("TRUE", "[8, 9]")):
        mgr.image = image_of(unclean)
        try:
            mgr.steps.await_replicas_truncated(TP)
        except StepPending as e:
            assert f"replicas {pending} still truncating" in str(e), (unclean, e)
        else:
            raise AssertionError("PREPARING completed before its replicas truncated")

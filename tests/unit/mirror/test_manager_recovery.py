"""MirrorManager when something fails or changes under it: a failover while the source is
unreachable, a destination leader change, a partition removed while PREPARING, divergence
inside the LME's epoch, a source without DescribeMirrors, and a detach (STOPPING ->
STOPPED) that waits for its MIRROR_PID_RESET or is resumed by another leader."""

import asyncio

import pytest

from kmirror.kip1279.state import MirrorPartitionState as S
from kmirror.metadata.image import PartitionRegistration
from kmirror.mirror.fetcher.local_replica import MirrorLocalReplica
from kmirror.mirror.fetcher.manager import MirrorFetcherManager
from kmirror.mirror.fetcher.policy import mirror_fetch_policy
from kmirror.mirror.lifecycle_ports import InMemoryMirrorStateStore, StepPending
from kmirror.mirror.manager import MirrorManager
from kmirror.ports import ManualClock
from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, read_control_type
from kmirror.replication.fetcher.endpoint import (
    epoch_end_offsets_from_replica_manager,
    fetch_from_replica_manager,
)
from kmirror.testing.mirror_fetcher import InProcessSourceCluster
from kmirror.testing.mirror_manager import TOPIC_ID, TP, Bumper, batches, drain, image, setup
from kmirror.testing.replication import image_with
from kmirror.testing.replication_harness import Broker
from kmirror.types import TopicPartition


class UnreachableSource(InProcessSourceCluster):
    """The source cluster after a disaster: every request fails."""

    down = False
    asked = 0

    async def cluster_id(self, refresh=False):
        self.asked += 1
        if self.down:
            raise ConnectionError("source unreachable")
        return await super().cluster_id(refresh)

    async def topic_id(self, topic):
        self.asked += 1
        if self.down:
            raise ConnectionError("source unreachable")
        return await super().topic_id(topic)


def test_failover_completes_while_the_source_cluster_is_unreachable_and_asks_it_nothing():
    """A source that does not answer (a network partition) would hold each question for its
    request timeout: a removed partition plans without asking."""
    src, dst, _, fetchers, store, bumper, _ = setup()
    source = UnreachableSource({1: src.rm}, 1, cluster_id="src-id")
    mgr = MirrorManager(7, dst.rm, fetchers, store, bumper, lambda name: source, dst.clock)

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        await drain(fetchers)
        source.down = True  # disaster: the failover must not need the source
        assert mgr.failing_over(image(7, 0, "m.removed")) and not mgr.failing_over(image(7, 0, "m"))
        asked = source.asked
        await mgr.on_metadata_change(image(7, 0, "m.removed"))
        assert source.asked == asked
        assert not mgr.failing_over(image(7, 0, "m.removed"))  # STOPPED: nothing left to fail over

    asyncio.run(go())
    assert mgr.partitions[TP].state is S.STOPPED
    assert batches(dst)[:-1] == batches(src)
    assert read_control_type(batches(dst)[-1][2], 0) is ControlType.MIRROR_PID_RESET


def test_a_destination_leader_change_keeps_the_mirrored_epochs_in_the_epoch_cache():
    src, dst, source, fetchers, store, bumper, mgr = setup(src_epoch=3)

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        await drain(fetchers)

    asyncio.run(go())
    log = dst.rm.get_partition(TP).log
    before = list(log.epoch_cache.entries)
    assert [e.epoch for e in before] == [3]
    dst.rm.apply_image(None, image(7, 1, "m"))  # a new destination leader epoch, below the source's
    assert list(log.epoch_cache.entries) == before
    src.rm.append_records({TP: build_batch([(None, b"later", (), 1)])}, 1)
    asyncio.run(drain(fetchers))
    assert batches(dst) == batches(src)


def test_a_removed_partition_still_preparing_fails_and_detaches_without_the_source():
    # The start never completed (the source went away during PREPARING); the operator fails
    # over: the partition must not keep waiting on the source's LME (KIP: PREPARING ->
    # FAILED on removal), and ends detached and writable.
    src, dst, _, fetchers, store, bumper, _ = setup()
    source = UnreachableSource({1: src.rm}, 1, cluster_id="src-id")

    async def last_mirrored_epoch(mirror_name, tp):
        source.down = True
        raise ConnectionError("source unreachable")

    source.last_mirrored_epoch = last_mirrored_epoch
    mgr = MirrorManager(7, dst.rm, fetchers, store, bumper, lambda name: source, dst.clock)

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        assert mgr.partitions[TP].state is S.PREPARING
        await mgr.on_metadata_change(image(7, 0, "m.removed"))

    asyncio.run(go())
    assert [s for _, s in store.history] == [S.PREPARING, S.FAILED, S.FAILED, None]  # FAILED twice: the LME write
    assert mgr.partitions[TP].state is S.UNKNOWN
    assert read_control_type(batches(dst)[-1][2], 0) is ControlType.MIRROR_PID_RESET


def test_preparing_resolves_divergence_inside_the_lme_epoch_before_mirroring():
    # Failback: the destination holds two source batches of epoch 3 and then its own tail,
    # also in epoch 3 (written before the previous failover), where the source has a
    # different third batch. LME truncation keeps epoch 3; PREPARING itself must cut the
    # tail (source end of epoch 3 vs local end), so a pause right after the start, before
    # any fetch, does not keep it.
    src, dst, source, fetchers, store, bumper, mgr = setup(src_epoch=3)
    log = dst.rm.get_partition(TP).log
    for _, _, raw in batches(src)[:2]:
        log.append_as_follower(raw)
    log.append_as_follower(build_batch([(None, b"stale", (), 1)], base_offset=6, partition_leader_epoch=3))
    src.rm.get_partition(TP).log.truncate_to(6)  # the source's epoch 3 ends at 6 ...
    src.rm.apply_image(None, image(1, 4, None))
    src.rm.append_records({TP: build_batch([(None, b"new", (), 1)])}, 1)  # ... then epoch 4
    source.last_mirrored_epochs[TP] = 3

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        assert mgr.partitions[TP].state is S.MIRRORING
        await mgr.on_metadata_change(image(7, 0, "m.paused"))

    asyncio.run(go())
    assert mgr.partitions[TP].state is S.PAUSED
    assert batches(dst) == batches(src)[:2]


class LmeRecordingStore(InMemoryMirrorStateStore):
    def __init__(self):
        super().__init__()
        self.saved_lmes = []

    async def save(self, key, state, last_mirrored_epoch):
        self.saved_lmes.append(last_mirrored_epoch)
        await super().save(key, state, last_mirrored_epoch)


def test_a_source_without_describe_mirrors_copies_from_scratch_and_never_exposes_a_marker_lme():
    src, dst, source, fetchers, _, bumper, _ = setup()
    store = LmeRecordingStore()
    mgr = MirrorManager(7, dst.rm, fetchers, store, bumper, lambda name: source if name == "m" else None, dst.clock)
    source.describe_supported = False
    dst.rm.get_partition(TP).log.append_as_leader(build_batch([(None, b"local", (), 1)]), 0)

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        await drain(fetchers)

    asyncio.run(go())
    assert batches(dst) == batches(src)  # the local record is gone: copied from scratch
    assert mgr.partitions[TP].state is S.MIRRORING
    assert not mgr.partitions[TP].source_supports_last_mirrored_epoch
    assert mgr.describe()[TP].last_mirror_epoch == -1  # DescribeMirrors answers -1
    assert store.saved_lmes and set(store.saved_lmes) == {-1}  # persisted states too


@pytest.mark.parametrize("resume", ["metadata pass", "replica progress"])
def test_stopped_waits_until_the_mirror_pid_reset_is_committed_on_the_replicas(resume):
    # Destination partition on brokers 7 (leader) and 8 (follower, in the ISR). STOPPED makes
    # the topic writable: it is persisted only once MIRROR_PID_RESET is below the high
    # watermark, so a leader crash cannot lose the record after the topic became writable.
    # The high watermark move that commits it resumes the partition by itself (the leader's
    # append listener), without a full pass or a source round trip.
    def image2(epoch, mirror_name):
        regs = {0: PartitionRegistration((7, 8), (7, 8), 7, epoch, epoch)}
        return image_with({"t": (TOPIC_ID, regs)}, configs={"t": {"mirror.name": mirror_name}})

    src = Broker(1, ManualClock(), 30_000)
    src.rm.apply_image(None, image(1, 3, None))
    src.rm.append_records({TP: build_batch([(b"k", b"v", (), 1)] * 3)}, 1)
    dst, follower = Broker(7, ManualClock(), 30_000), Broker(8, ManualClock(), 30_000)
    current = {"image": image2(0, "m")}
    for b in (dst, follower):
        b.rm.apply_image(None, current["image"])

    class TwoReplicaBumper:
        def __init__(self):
            self.calls = []

        async def bump(self, tp, topic_id, min_leader_epoch, min_producer_id):
            self.calls.append(min_leader_epoch)
            epoch = max(dst.rm.get_partition(tp).leader_epoch + 1, min_leader_epoch)
            current["image"] = image2(epoch, "m.removed")
            for b in (dst, follower):
                b.rm.apply_image(None, current["image"])

        def producer_id_floor(self):
            return 1 << 62  # the producer id fence is not what this test is about

    def follower_fetch():
        now = follower.clock.monotonic_ms()
        queries = follower.engine.epoch_queries(now)
        if queries:
            follower.engine.handle_epoch_end_offsets(epoch_end_offsets_from_replica_manager(dst.rm, queries), now)
        plan = follower.engine.fetch_plan(now)
        if plan is not None:
            follower.engine.handle_fetch_response(plan, fetch_from_replica_manager(dst.rm, plan), now)

    source = UnreachableSource({1: src.rm}, 1, cluster_id="src-id")
    fetchers = MirrorFetcherManager(7, MirrorLocalReplica(dst.rm), mirror_fetch_policy(), dst.clock)
    store = InMemoryMirrorStateStore()
    bumper = TwoReplicaBumper()
    progressed: list[TopicPartition] = []
    dst.rm.add_append_listener(progressed.append)
    mgr = MirrorManager(7, dst.rm, fetchers, store, bumper, lambda name: source, dst.clock)

    async def go():
        for _ in range(5):
            await mgr.on_metadata_change(current["image"])
            follower_fetch()
            await drain(fetchers)
        assert mgr.partitions[TP].state is S.MIRRORING
        for _ in range(3):
            follower_fetch()
        current["image"] = image2(dst.rm.get_partition(TP).leader_epoch, "m.removed")
        for b in (dst, follower):
            b.rm.apply_image(None, current["image"])
        await mgr.on_metadata_change(current["image"])
        leader_log = dst.rm.get_partition(TP).log
        assert read_control_type(batches(dst)[-1][2], 0) is ControlType.MIRROR_PID_RESET
        assert leader_log.high_watermark == 3  # the reset at 3 is not replicated yet
        assert mgr.partitions[TP].state is S.STOPPING  # still read-only
        await mgr.on_metadata_change(current["image"])  # a later pass does not reset twice
        assert mgr.partitions[TP].state is S.STOPPING and leader_log.log_end_offset == 4
        assert mgr.awaiting_replicas == {TP}
        progressed.clear()
        for _ in range(2):
            follower_fetch()
        assert leader_log.high_watermark == 4
        if resume == "metadata pass":
            await mgr.on_metadata_change(current["image"])
        else:
            assert TP in progressed  # the HW move is announced
            asked, source.down = source.asked, True
            await mgr.on_replica_progress(progressed)
            assert source.asked == asked
        assert mgr.partitions[TP].state is S.STOPPED
        assert mgr.awaiting_replicas == set()
        await mgr.on_replica_progress([TP])  # no longer waiting: nothing to do
        assert mgr.partitions[TP].state is S.STOPPED

    asyncio.run(go())
    assert bumper.calls == [4]
    assert [s for _, s in store.history][-1] is S.STOPPED
    assert batches(follower) == batches(dst)


def test_a_detach_resumed_after_losing_the_mirrored_records_still_bumps_above_the_stored_lme():
    # STOPPING persisted LME 3, then the broker restarted having lost the unflushed mirrored
    # records. The resumed step finds no mirrored record; the LME stays 3 (what DescribeMirrors
    # reports), and the new leader epoch must exceed it, or this cluster's records would
    # reuse epoch numbers of the source's log.
    src, dst, source, fetchers, store, bumper, mgr = setup(src_epoch=3)

    class LateBumper(Bumper):
        arrived = False

        async def bump(self, tp, topic_id, min_leader_epoch, min_producer_id):
            if self.arrived:
                await super().bump(tp, topic_id, min_leader_epoch, min_producer_id)
            else:
                self.calls.append(min_leader_epoch)  # the new epoch has not arrived yet

    late = LateBumper(dst, "m")
    mgr = MirrorManager(7, dst.rm, fetchers, store, late, lambda name: source, dst.clock)

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        await drain(fetchers)
        await mgr.on_metadata_change(image(7, 0, "m.removed"))
        assert mgr.partitions[TP].state is S.STOPPING and late.calls == [4]
        dst.rm.get_partition(TP).truncate_fully_and_start_at(0)  # the mirrored records are lost
        late.arrived = True
        restarted = MirrorManager(7, dst.rm, MirrorFetcherManager(7, MirrorLocalReplica(dst.rm), mirror_fetch_policy(),
                                                                  dst.clock), store, late, lambda name: source, dst.clock)
        await restarted.on_metadata_change(image(7, 0, "m.removed"))
        assert restarted.partitions[TP].state is S.STOPPED
        assert restarted.partitions[TP].last_mirrored_epoch == 3

    asyncio.run(go())
    assert late.calls[-1] == 4
    (base, epoch, raw), = batches(dst)
    assert read_control_type(raw, 0) is ControlType.MIRROR_PID_RESET and epoch >= 4


class StoppedWriteRefused(InMemoryMirrorStateStore):
    """Refuses every write of STOPPED, as a coordinator that died with the leader."""

    async def save(self, key, state, last_mirrored_epoch):
        if state is S.STOPPED:
            raise StepPending("WriteMirrorStates: NOT_COORDINATOR")
        await super().save(key, state, last_mirrored_epoch)


def test_a_detach_resumed_by_a_leader_elected_after_the_pid_reset_does_not_reset_twice():
    # The leader appended MIRROR_PID_RESET in its bumped epoch and died before STOPPED was
    # persisted; the next leader runs in a later epoch, with the reset still ending the log.
    # It only waits for the reset and persists STOPPED: no second LME, bump or reset.
    src, dst, source, fetchers, _, bumper, _ = setup(src_epoch=3)
    store = StoppedWriteRefused()
    mgr = MirrorManager(7, dst.rm, fetchers, store, bumper, lambda name: source, dst.clock)

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        await drain(fetchers)
        await mgr.on_metadata_change(image(7, 0, "m.removed"))
        assert mgr.partitions[TP].state is S.STOPPING and bumper.calls == [4]
        epoch = dst.rm.get_partition(TP).leader_epoch
        reelected = image(7, epoch + 1, "m.removed")  # a new leader, in a later epoch
        dst.rm.apply_image(None, reelected)
        assert dst.rm.get_partition(TP).leader_epoch == epoch + 1
        new_leader = MirrorManager(7, dst.rm, MirrorFetcherManager(7, MirrorLocalReplica(dst.rm), mirror_fetch_policy(),
                                                                   dst.clock),
                                   InMemoryMirrorStateStore(), bumper, lambda name: source, dst.clock)
        new_leader.store.states = dict(store.states)
        await new_leader.on_metadata_change(reelected)
        assert new_leader.partitions[TP].state is S.STOPPED
        assert new_leader.partitions[TP].last_mirrored_epoch == 3

    asyncio.run(go())
    assert bumper.calls == [4]
    resets = [(base, epoch) for base, epoch, raw in batches(dst)
              if next(iter_batches(raw))[1].is_control and read_control_type(raw, 0) is ControlType.MIRROR_PID_RESET]
    assert resets == [(src.rm.get_partition(TP).log.log_end_offset, 4)]
    assert batches(dst)[:-1] == batches(src)

"""A source topic deleted, or re-created under the same name with another topic id, never
changes the destination (KIP-1279 "Topic Deletion"): its partitions go STOPPING -> STOPPED
with the full detach steps, the mirrored records stay, nothing of the new topic is appended,
and no truncation path acts on the new topic's answers."""

import asyncio
import logging
from uuid import UUID

from kmirror.kip1279.membership import is_read_only, parse_mirror_name_config
from kmirror.kip1279.state import MirrorPartitionState as S
from kmirror.metadata.image import PartitionRegistration
from kmirror.mirror.fetcher.local_replica import MirrorLocalReplica
from kmirror.mirror.fetcher.manager import MirrorFetcherManager
from kmirror.mirror.fetcher.policy import mirror_fetch_policy
from kmirror.mirror.lifecycle_ports import InMemoryMirrorStateStore
from kmirror.mirror.manager import MirrorManager
from kmirror.ports import ManualClock
from kmirror.protocol.mirror.find_coordinator import topic_id_string
from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, read_control_type
from kmirror.replication.fetcher.state import FetchPhase
from kmirror.testing.mirror_fetcher import InProcessSourceCluster
from kmirror.testing.replication import image_with
from kmirror.testing.replication_harness import Broker
from kmirror.types import TopicPartition

OLD_ID = UUID(int=0xBEEF)
NEW_ID = UUID(int=0xCAFE)
TP = TopicPartition("t", 0)


def image(broker_id: int, epoch: int, mirror_name: str | None, topic_id: UUID = OLD_ID, present: bool = True):
    regs = {0: PartitionRegistration((broker_id,), (broker_id,), broker_id, epoch, epoch)}
    configs = {"t": {"mirror.name": mirror_name}} if mirror_name else {}
    return image_with({"t": (topic_id, regs)} if present else {}, configs=configs)


class Bumper:
    """BumpLeaderEpochs answered by the next image; the topic keeps `mirror_name`."""

    def __init__(self, dest: Broker, mirror_name: str) -> None:
        self.dest, self.mirror_name, self.calls = dest, mirror_name, []

    async def bump(self, tp, topic_id, min_leader_epoch, min_producer_id):
        self.calls.append(min_leader_epoch)
        epoch = max(self.dest.rm.get_partition(tp).leader_epoch + 1, min_leader_epoch)
        self.dest.rm.apply_image(None, image(self.dest.broker_id, epoch, self.mirror_name))

    def producer_id_floor(self):
        return 0


def produce(rm, n: int, value: bytes = b"v") -> None:
    for _ in range(n):
        rm.append_records({TP: build_batch([(b"k", value * 20, (), 1)] * 2)}, 1)


def log_bytes(b: Broker) -> tuple[int, int, bytes]:
    """(log start, log end, every batch's bytes), read one segment at a time as Kafka's."""
    log = b.rm.get_partition(TP).log
    out, offset = b"", log.log_start_offset
    while offset < log.log_end_offset:
        buf = bytes(getattr(log.read(offset, 1 << 30, log.log_end_offset, True), "records", b""))
        if not buf:
            break
        out += buf
        offset = [h for _, h in iter_batches(buf)][-1].next_offset
    return log.log_start_offset, log.log_end_offset, out


class Setup:
    def __init__(self, src_epoch: int = 3) -> None:
        self.src = Broker(1, ManualClock(), 30_000)
        self.src.rm.apply_image(None, image(1, src_epoch, None))
        produce(self.src.rm, 5)
        self.dst = Broker(7, ManualClock(), 30_000)
        self.dst.rm.apply_image(None, image(7, 0, "m"))
        self.source = InProcessSourceCluster({1: self.src.rm}, 1, cluster_id="src-id")
        self.fetchers = MirrorFetcherManager(7, MirrorLocalReplica(self.dst.rm), mirror_fetch_policy(), self.dst.clock)
        self.store = InMemoryMirrorStateStore()
        self.bumper = Bumper(self.dst, "m")
        self.mgr = MirrorManager(7, self.dst.rm, self.fetchers, self.store, self.bumper,
                                 lambda name: self.source, self.dst.clock)

    async def drain(self, rounds: int = 10) -> None:
        for _ in range(rounds):
            for fetcher in list(self.fetchers.fetchers.values()):
                await fetcher.run_once()

    async def mirrored(self) -> tuple[int, int, bytes]:
        await self.mgr.on_metadata_change(image(7, 0, "m"))
        await self.drain()
        assert self.mgr.partitions[TP].state is S.MIRRORING
        assert log_bytes(self.dst)[1:] == log_bytes(self.src)[1:]
        return log_bytes(self.dst)

    def delete_source_topic(self) -> None:
        self.src.rm.apply_image(None, image(1, 0, None, present=False))

    def recreate_source_topic(self, n: int = 2, epoch: int = 0) -> None:
        self.src.rm.apply_image(None, image(1, epoch, None, topic_id=NEW_ID))
        produce(self.src.rm, n, b"new")

    def read_only(self) -> bool:
        mp = self.mgr.partitions[TP]
        return is_read_only(parse_mirror_name_config("m"), mp.state,
                            source_topic_deleted=self.mgr.source_topic_deleted("m", OLD_ID, 0))


def assert_stopped_keeping(s: Setup, before: tuple[int, int, bytes]) -> None:
    """STOPPED through the detach steps: the mirrored bytes untouched, one MIRROR_PID_RESET
    after them in a bumped epoch, the partition writable."""
    start, end, data = log_bytes(s.dst)
    assert s.mgr.partitions[TP].state is S.STOPPED
    assert (start, data[:len(before[2])]) == (before[0], before[2])
    assert end == before[1] + 1
    assert read_control_type(data[len(before[2]):], 0) is ControlType.MIRROR_PID_RESET
    assert s.bumper.calls == [4]
    assert [st for _, st in s.store.history][-3:] == [S.STOPPING, S.STOPPING, S.STOPPED]  # LME persisted
    assert s.mgr.partitions[TP].last_mirrored_epoch == 3
    assert not s.fetchers.is_fetching(TP)
    assert not s.read_only()


def test_source_topic_deleted_stops_keeping_the_data_and_makes_the_topic_writable(caplog):
    s = Setup()

    async def go():
        before = await s.mirrored()
        assert s.read_only()
        s.delete_source_topic()
        await s.drain()  # the fetcher is answered UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION
        with caplog.at_level(logging.WARNING, logger="kmirror.mirror.manager"):
            await s.mgr.on_metadata_change(image(7, 0, "m"))
            await s.mgr.on_metadata_change(image(7, 0, "m"))
        assert_stopped_keeping(s, before)
        desc = s.mgr.describe()[TP]
        assert desc.state is S.STOPPED and "was deleted" in (desc.reason or "")

    asyncio.run(go())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "Mirror m topic t" in warnings[0] and topic_id_string(OLD_ID) in warnings[0]
    assert s.mgr.source_topic_deleted_partitions == 1


class LateImageBumper(Bumper):
    """BumpLeaderEpochs answered, its image applied only when the test says so (the
    controller's image arrives after the manager's pass)."""

    def __init__(self, dest: Broker, mirror_name: str) -> None:
        super().__init__(dest, mirror_name)
        self.pending: list = []

    async def bump(self, tp, topic_id, min_leader_epoch, min_producer_id):
        self.calls.append(min_leader_epoch)
        epoch = max(self.dest.rm.get_partition(tp).leader_epoch + 1, min_leader_epoch)
        self.pending.append(image(self.dest.broker_id, epoch, self.mirror_name))

    def deliver(self) -> None:
        for img in self.pending:
            self.dest.rm.apply_image(None, img)
        self.pending = []


def test_a_bumped_epoch_arriving_after_the_pass_is_not_bumped_again():
    s = Setup()
    s.bumper = LateImageBumper(s.dst, "m")
    s.mgr.bumper = s.mgr.steps.bumper = s.bumper

    async def go():
        before = await s.mirrored()
        s.delete_source_topic()
        for _ in range(2):  # a missing name counts once confirmed by a second pass
            await s.mgr.on_metadata_change(image(7, 0, "m"))
        assert s.mgr.partitions[TP].state is S.STOPPING and s.bumper.calls == [4]
        s.bumper.deliver()
        await s.mgr.on_metadata_change(image(7, 4, "m"))
        assert_stopped_keeping(s, before)  # one bump only

    asyncio.run(go())


def test_source_topic_recreated_is_never_fetched_nor_truncated_to_and_stops(caplog):
    s = Setup()

    async def go():
        before = await s.mirrored()
        s.delete_source_topic()
        s.recreate_source_topic(n=1)  # 2 records of another topic, where the mirror holds 10
        await s.drain()
        assert log_bytes(s.dst) == before  # nothing appended, nothing truncated
        with caplog.at_level(logging.WARNING, logger="kmirror.mirror.manager"):
            await s.mgr.on_metadata_change(image(7, 0, "m"))
        assert_stopped_keeping(s, before)
        assert topic_id_string(NEW_ID) in (s.mgr.describe()[TP].reason or "")
        # The partition stays STOPPED (never restarted onto the new topic) however often
        # the source is looked at, and the fetcher never reads the new topic.
        produce(s.src.rm, 10, b"new")
        for _ in range(3):
            await s.mgr.on_metadata_change(image(7, 0, "m"))
            await s.drain()
        assert s.mgr.partitions[TP].state is S.STOPPED
        assert log_bytes(s.dst)[2][:len(before[2])] == before[2]
        assert all(p.topic_id == OLD_ID for ep in s.source.endpoints for f in ep.fetches for p in f.partitions)

    asyncio.run(go())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and topic_id_string(NEW_ID) in warnings[0] and topic_id_string(OLD_ID) in warnings[0]


def test_lme_truncation_in_preparing_refuses_an_answer_about_a_recreated_topic():
    # Restart (STOPPED -> PREPARING) of a partition whose source topic is re-created while
    # the LME is asked: DescribeMirrors names topics only, so its -1 ("truncate fully")
    # describes the new topic. Nothing is truncated; the partition fails instead of starting.
    s = Setup()

    async def go():
        before = await s.mirrored()
        s.mgr.partitions[TP].state = S.STOPPED  # as after a failover and an add back
        s.store.states[s.mgr.partitions[TP].key] = (S.STOPPED, 3)
        s.fetchers.remove_partition(TP)

        async def recreated_while_asked(mirror_name, tp):
            s.delete_source_topic()
            s.recreate_source_topic()
            return -1

        s.source.last_mirrored_epoch = recreated_while_asked
        await s.mgr.on_metadata_change(image(7, 0, "m"))
        assert log_bytes(s.dst) == before
        assert s.mgr.partitions[TP].state is S.PREPARING  # persisted before the LME query
        await s.mgr.on_metadata_change(image(7, 0, "m"))
        assert s.mgr.partitions[TP].state is S.FAILED
        assert log_bytes(s.dst) == before
        assert not s.fetchers.is_fetching(TP)

    asyncio.run(go())


def test_failback_to_a_source_whose_topic_was_recreated_never_starts():
    # A STOPPED partition added back to a mirror (failback) whose source topic is another
    # topic now: it stays STOPPED, its local writes and mirrored records untouched.
    s = Setup()

    async def go():
        before = await s.mirrored()
        s.mgr.partitions[TP].state = S.STOPPED
        s.store.states[s.mgr.partitions[TP].key] = (S.STOPPED, 3)
        s.fetchers.remove_partition(TP)
        s.delete_source_topic()
        s.recreate_source_topic(n=8)
        asked = []

        async def lme(mirror_name, tp):
            asked.append(tp)
            return -1

        s.source.last_mirrored_epoch = lme
        for _ in range(3):
            await s.mgr.on_metadata_change(image(7, 0, "m"))
        assert s.mgr.partitions[TP].state is S.STOPPED
        assert log_bytes(s.dst) == before and asked == []
        assert "re-created" in (s.mgr.describe()[TP].reason or "")

    asyncio.run(go())


def test_a_stopped_partition_does_not_restart_while_the_source_is_unreachable():
    s = Setup()

    class Down(InProcessSourceCluster):
        async def topic_id(self, topic):
            raise ConnectionError("source unreachable")

    async def go():
        before = await s.mirrored()
        s.mgr.partitions[TP].state = S.STOPPED
        s.store.states[s.mgr.partitions[TP].key] = (S.STOPPED, 3)
        s.fetchers.remove_partition(TP)
        s.source = Down({1: s.src.rm}, 1, cluster_id="src-id")
        await s.mgr.on_metadata_change(image(7, 0, "m"))
        assert s.mgr.partitions[TP].state is S.STOPPED and log_bytes(s.dst) == before

    asyncio.run(go())


def test_the_fetcher_never_truncates_nor_appends_nor_moves_log_start_for_a_recreated_topic():
    # The fetch engine's own truncation paths: divergence (TRUNCATING, OffsetsForLeaderEpoch),
    # OffsetOutOfRange (RESETTING, the source's log start / end) and log start following.
    # The re-created topic has a later epoch, fewer records and a log start past the
    # mirror's log end: each would truncate or restart the destination for the mirrored id.
    s = Setup()

    async def go():
        before = await s.mirrored()
        s.delete_source_topic()
        s.recreate_source_topic(n=30, epoch=5)
        s.src.rm.get_partition(TP).log.update_high_watermark(60)
        s.src.rm.get_partition(TP).log.maybe_increment_log_start_offset(40)
        # restart fetching from the log end: the engine first resolves divergence
        await s.fetchers.add_partition(TP, "m", s.source, OLD_ID)
        assert TP in s.fetchers.source_topic_changed and not s.fetchers.is_fetching(TP)
        # even a fetcher that already fetches (added before the lookup saw the new id)
        fetcher = next(iter(s.fetchers.fetchers.values()))
        for phase_start in ("add", "reset"):
            fetcher.engine.add_partition(TP, OLD_ID, -1)
            if phase_start == "reset":
                st = fetcher.engine.states[TP]
                fetcher.engine.states[TP] = st.to(FetchPhase.RESETTING)
            for _ in range(5):
                await fetcher.run_once()
                s.dst.clock.advance(2_000)
            assert log_bytes(s.dst) == before
        assert all(p.topic_id == OLD_ID for ep in s.source.endpoints for f in ep.fetches for p in f.partitions)

    asyncio.run(go())


def test_a_name_missing_from_one_metadata_answer_does_not_stop_the_mirror():
    # A source broker answering before its metadata is loaded lists no topic: one pass.
    s = Setup()

    class Forgetful(InProcessSourceCluster):
        forget = 1

        async def topic_id(self, topic):
            if self.forget:
                self.forget -= 1
                return None
            return await super().topic_id(topic)

    async def go():
        before = await s.mirrored()
        s.source = Forgetful({1: s.src.rm}, 1, cluster_id="src-id")
        await s.mgr.on_metadata_change(image(7, 0, "m"))
        await s.mgr.on_metadata_change(image(7, 0, "m"))
        assert s.mgr.partitions[TP].state is S.MIRRORING and s.mgr.source_topic_deleted_partitions == 0
        produce(s.src.rm, 2)
        await s.drain()
        assert log_bytes(s.dst)[2][:len(before[2])] == before[2] and log_bytes(s.dst)[1:] == log_bytes(s.src)[1:]

    asyncio.run(go())

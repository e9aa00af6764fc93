"""Mirrored transactional data on a destination leader: the copy stops at the source LSO,
aborted transactions are indexed on the destination, and failover (STOPPING) truncates the
destination to its own LSO before MIRROR_PID_RESET, dropping a transaction left open."""

import asyncio
from uuid import UUID

from kmirror.kip1279.state import MirrorPartitionState as S
from kmirror.log.append_analysis import AppendOrigin
from kmirror.log.outcomes import LogAppendInfo
from kmirror.log.transaction_index import AbortedTxn
from kmirror.metadata.image import PartitionRegistration
from kmirror.mirror.fetcher.local_replica import MirrorLocalReplica
from kmirror.mirror.fetcher.manager import MirrorFetcherManager
from kmirror.mirror.fetcher.policy import mirror_fetch_policy
from kmirror.mirror.lifecycle_ports import InMemoryMirrorStateStore
from kmirror.mirror.manager import MirrorManager
from kmirror.ports import ManualClock
from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, build_control_batch, read_control_type
from kmirror.testing.mirror_fetcher import InProcessSourceCluster
from kmirror.testing.replication import image_with
from kmirror.testing.replication_harness import Broker
from kmirror.types import TopicPartition

TOPIC_ID = UUID(int=0xCAFE)
TP = TopicPartition("t", 0)
NOW = 1_700_000_000_000


def image(broker_id: int, epoch: int, mirror_name: str | None):
    regs = {0: PartitionRegistration((broker_id,), (broker_id,), broker_id, epoch, epoch)}
    configs = {"t": {"mirror.name": mirror_name}} if mirror_name else {}
    return image_with({"t": (TOPIC_ID, regs)}, configs=configs)


def batches(b: Broker) -> list[tuple[int, bytes]]:
    log = b.rm.get_partition(TP).log
    buf = bytes(getattr(log.read(log.log_start_offset, 1 << 30, log.log_end_offset, True), "records", b""))
    return [(h.base_offset, buf[pos:pos + h.size]) for pos, h in iter_batches(buf)]


class Bumper:
    def __init__(self, dest: Broker) -> None:
        self.dest = dest
        self.floor = 0

    async def bump(self, tp, topic_id, min_leader_epoch, min_producer_id):
        epoch = max(self.dest.rm.get_partition(tp).leader_epoch + 1, min_leader_epoch)
        self.dest.rm.apply_image(None, image(self.dest.broker_id, epoch, "m.removed"))
        self.floor = max(self.floor, min_producer_id)

    def producer_id_floor(self):
        return self.floor


def _source_append(src: Broker, batch: bytes) -> None:
    p = src.rm.get_partition(TP)
    # The coordinator origin lets the test write end-transaction markers as Kafka's
    # transaction coordinator does.
    assert isinstance(p.log.append_as_leader(batch, p.leader_epoch, NOW, origin=AppendOrigin.COORDINATOR),
                      LogAppendInfo)
    p.maybe_increment_high_watermark()


def _txn(pid: int, seq: int = 0) -> bytes:
    return build_batch([(b"k", b"txn-%d" % pid, (), NOW)], producer_id=pid, producer_epoch=0,
                       base_sequence=seq, is_transactional=True)


def _plain() -> bytes:
    return build_batch([(b"k", b"plain", (), NOW)])


def test_failover_truncates_an_open_mirrored_transaction_to_the_lso_before_the_pid_reset():
    src = Broker(1, ManualClock(), 30_000)
    src.rm.apply_image(None, image(1, 3, None))
    for batch in (
        _plain(),                                        # 0
        _txn(10),                                        # 1  pid 10, aborted at 3
        _plain(),                                        # 2
        build_control_batch(ControlType.ABORT, 10, 0, NOW),   # 3
        _txn(11),                                        # 4  pid 11, committed at 7 (after the source LSO)
        _plain(),                                        # 5
        _txn(12),                                        # 6  pid 12, left open: source LSO 6
        build_control_batch(ControlType.COMMIT, 11, 0, NOW),  # 7
        _plain(),                                        # 8
    ):
        _source_append(src, batch)
    src_log = src.rm.get_partition(TP).log
    assert (src_log.last_stable_offset, src_log.high_watermark) == (6, 9)

    dst = Broker(7, ManualClock(), 30_000)
    dst.rm.apply_image(None, image(7, 0, "m"))
    source = InProcessSourceCluster({1: src.rm}, 1, cluster_id="src-id")
    fetchers = MirrorFetcherManager(7, MirrorLocalReplica(dst.rm), mirror_fetch_policy(), dst.clock)
    mgr = MirrorManager(7, dst.rm, fetchers, InMemoryMirrorStateStore(), Bumper(dst),
                        lambda name: source if name == "m" else None, dst.clock)

    async def go():
        await mgr.on_metadata_change(image(7, 0, "m"))
        assert mgr.partitions[TP].state is S.MIRRORING
        for _ in range(10):
            for fetcher in list(fetchers.fetchers.values()):
                await fetcher.run_once()
        dst_log = dst.rm.get_partition(TP).log
        # Copied byte for byte up to the source LSO only: pid 12's open transaction stays out.
        assert batches(dst) == [(o, raw) for o, raw in batches(src) if o < 6]
        # The mirrored ABORT marker is indexed on the destination like the source's.
        assert dst_log.active_segment.txn_index.entries() == src_log.active_segment.txn_index.entries() \
            == [AbortedTxn(10, 1, 3, 4)]
        # pid 11's commit (at 7) was not copied: on the destination its transaction is open.
        assert dst_log.last_stable_offset == 4 and dst_log.log_end_offset == 6
        await mgr.on_metadata_change(image(7, 0, "m.removed"))
        assert mgr.partitions[TP].state is S.STOPPED

    asyncio.run(go())
    got = batches(dst)
    # STOPPING truncated to the LSO (4): pid 11's open transaction and what followed it are
    # gone; MIRROR_PID_RESET is the first batch after the LSO.
    assert [o for o, _ in got] == [0, 1, 2, 3, 4]
    assert got[:4] == [(o, raw) for o, raw in batches(src) if o < 4]
    assert read_control_type(got[-1][1], 0) is ControlType.MIRROR_PID_RESET
    dst_log = dst.rm.get_partition(TP).log
    assert dst_log.producer_state.first_unstable_offset is None
    assert dst_log.active_segment.txn_index.entries() == [AbortedTxn(10, 1, 3, 4)]

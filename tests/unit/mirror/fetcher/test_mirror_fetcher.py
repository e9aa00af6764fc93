"""The mirror fetcher on the shared engine: a destination leader's log ends up with the
source's batches byte for byte at the same offsets and epochs, never past the source LSO;
leader moves, out-of-range and corrupt batches affect only their partition."""

import asyncio
from uuid import UUID

from kmirror.metadata.image import PartitionRegistration
from kmirror.mirror.fetcher.local_replica import MirrorLocalReplica
from kmirror.mirror.fetcher.manager import MirrorFetcherManager
from kmirror.mirror.fetcher.policy import (
    CONSUMER_REPLICA_ID,
    READ_COMMITTED,
    mirror_fetch_policy,
    mirror_fetcher_client_id,
    mirror_fetcher_id,
)
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.testing.mirror_fetcher import InProcessSourceCluster
from kmirror.testing.replication import image_with
from kmirror.testing.replication_harness import Broker, log_batches
from kmirror.types import TopicPartition

TOPIC_ID = UUID(int=0xBEEF)
TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def make_broker(broker_id: int, leader_epoch: int = 0, partitions: int = 2) -> Broker:
    b = Broker(broker_id, ManualClock(), 30_000)
    regs = {p: PartitionRegistration((broker_id,), (broker_id,), broker_id, leader_epoch, 0) for p in range(partitions)}
    b.rm.apply_image(None, image_with({"t": (TOPIC_ID, regs)}))
    return b


def produce_all_compressions(src: Broker, tp: TopicPartition = TP) -> None:
    for i, codec in enumerate((0, 1, 2, 3, 4)):
        records = [(b"k%d" % j, b"value-%d-%d" % (i, j) * 10, (("h", b"x"),), 1000 + j) for j in range(5)]
        src.rm.append_records({tp: build_batch(records, compression=codec)}, 1)


def make_mirror(dest: Broker, *, failed: list | None = None) -> MirrorFetcherManager:
    local = MirrorLocalReplica(dest.rm, on_failed=lambda tp, msg: failed.append((tp, msg)) if failed is not None else None)
    return MirrorFetcherManager(dest.broker_id, local, mirror_fetch_policy(), dest.clock, num_fetchers=2)


async def drain(mgr: MirrorFetcherManager, rounds: int = 20) -> None:
    for _ in range(rounds):
        await mgr.retry_pending()
        for f in list(mgr.fetchers.values()):
            await f.run_once()


def run(coro):
    return asyncio.run(coro)


def test_policy_reads_the_source_as_a_read_committed_consumer():
    p = mirror_fetch_policy()
    assert p.replica_id == CONSUMER_REPLICA_ID and p.isolation_level == READ_COMMITTED
    assert not p.truncate_on_fetch
    assert mirror_fetcher_client_id(3, 1, "m") == "broker-3-fetcher-1-mirror-m"
    assert mirror_fetcher_id("t-0", 4) == mirror_fetcher_id("t-0", 4) < 4


def test_destination_batches_are_byte_identical_at_the_same_offsets_and_epochs():
    src = make_broker(1, leader_epoch=5)
    dst = make_broker(7, leader_epoch=0)
    produce_all_compressions(src)
    source = InProcessSourceCluster({1: src.rm}, leader_id=1)
    mgr = make_mirror(dst)

    async def go():
        await mgr.add_partition(TP, "m", source, TOPIC_ID)
        await drain(mgr)

    run(go())
    assert log_batches(dst, TP) == log_batches(src, TP)
    assert {e for _, e, _ in log_batches(dst, TP)} == {5}
    assert dst.rm.get_partition(TP).log.log_end_offset == 25
    assert dst.rm.get_partition(TP).log.latest_epoch == 5  # the epoch cache follows the batches
    assert mgr.local.source[TP].high_watermark == 25


def test_never_mirrors_past_the_source_high_watermark_or_lso():
    src = Broker(1, ManualClock(), 30_000)
    regs = {0: PartitionRegistration((1, 2), (1, 2), 1, 0, 0)}
    src.rm.apply_image(None, image_with({"t": (TOPIC_ID, regs)}))
    src.rm.append_records({TP: build_batch([(None, b"a", (), 1)])}, 1)  # HW stays 0: follower 2 lags
    dst = make_broker(7, partitions=1)
    mgr = make_mirror(dst)

    async def go():
        await mgr.add_partition(TP, "m", InProcessSourceCluster({1: src.rm}, 1), TOPIC_ID)
        await drain(mgr, 3)

    run(go())
    assert dst.rm.get_partition(TP).log.log_end_offset == 0


def test_partitions_of_one_mirror_spread_over_fetchers_keyed_by_source_broker_mirror_and_id():
    src = make_broker(1)
    dst = make_broker(7)
    source = InProcessSourceCluster({1: src.rm}, 1)
    mgr = make_mirror(dst)

    async def go():
        await mgr.add_partition(TP, "m", source, TOPIC_ID)
        await mgr.add_partition(TP1, "m", source, TOPIC_ID)

    run(go())
    keys = {mgr.fetcher_of[TP], mgr.fetcher_of[TP1]}
    assert all(k.source_broker_id == 1 and k.mirror_name == "m" for k in keys)
    assert {k.fetcher_id for k in keys} == {mirror_fetcher_id("t-0", 2), mirror_fetcher_id("t-1", 2)}


def test_source_leader_change_moves_the_partition_to_the_new_leaders_fetcher():
    src1 = make_broker(1)
    produce_all_compressions(src1)
    dst = make_broker(7, partitions=1)
    source = InProcessSourceCluster({1: src1.rm}, 1)
    mgr = make_mirror(dst)

    async def go():
        await mgr.add_partition(TP, "m", source, TOPIC_ID)
        await drain(mgr)
        # Source partition moves to broker 2 (a copy of the log, new epoch); broker 1 follows it.
        src2 = make_broker(2, leader_epoch=1)
        for _base, _, raw in log_batches(src1, TP):
            src2.rm.get_partition(TP).log.append_as_follower(raw)
        src2.rm.apply_image(None, image_with({"t": (TOPIC_ID, {p: PartitionRegistration((2,), (2,), 2, 1, 1) for p in range(2)})}))
        src2.rm.append_records({TP: build_batch([(None, b"after-move", (), 5)])}, 1)
        src1.rm.apply_image(None, image_with({"t": (TOPIC_ID, {p: PartitionRegistration((1, 2), (1, 2), 2, 1, 1) for p in range(2)})}))
        source.brokers[2] = src2.rm
        source.leader_id = 2
        await drain(mgr)
        return src2

    src2 = run(go())
    assert mgr.fetcher_of[TP].source_broker_id == 2
    assert log_batches(dst, TP) == log_batches(src2, TP)


def test_offset_out_of_range_below_the_source_log_start_follows_the_source_log_start():
    src = make_broker(1, partitions=1)
    produce_all_compressions(src)
    src.rm.delete_records({TP: 15})
    dst = make_broker(7, partitions=1)
    mgr = make_mirror(dst)

    async def go():
        await mgr.add_partition(TP, "m", InProcessSourceCluster({1: src.rm}, 1), TOPIC_ID)
        await drain(mgr)

    run(go())
    log = dst.rm.get_partition(TP).log
    assert log.log_start_offset == 15
    assert log_batches(dst, TP) == log_batches(src, TP)


def test_a_corrupt_batch_fails_only_its_partition():
    src = make_broker(1)
    produce_all_compressions(src, TP)
    produce_all_compressions(src, TP1)
    dst = make_broker(7)
    failed: list = []
    mgr = make_mirror(dst, failed=failed)
    source = InProcessSourceCluster({1: src.rm}, 1)

    async def go():
        await mgr.add_partition(TP, "m", source, TOPIC_ID)
        await mgr.add_partition(TP1, "m", source, TOPIC_ID)
        for ep in source.endpoints:
            real = ep.fetch

            async def corrupting(plan, real=real):
                out = await real(plan)
                r = out.get(TP1)
                if r is not None and len(r.records) > 0:
                    b = bytearray(r.records)
                    b[-1] ^= 0xFF
                    out[TP1] = type(r)(r.error, bytes(b), r.high_watermark, r.log_start_offset, r.last_stable_offset)
                return out

            ep.fetch = corrupting
        await drain(mgr)

    run(go())
    assert failed and all(tp == TP1 for tp, _ in failed)
    assert dst.rm.get_partition(TP1).log.log_end_offset == 0
    assert log_batches(dst, TP) == log_batches(src, TP)


def test_removed_partition_gets_no_more_appends():
    src = make_broker(1, partitions=1)
    dst = make_broker(7, partitions=1)
    mgr = make_mirror(dst)
    source = InProcessSourceCluster({1: src.rm}, 1)

    async def go():
        await mgr.add_partition(TP, "m", source, TOPIC_ID)
        mgr.remove_partition(TP)
        produce_all_compressions(src)
        await drain(mgr)

    run(go())
    assert dst.rm.get_partition(TP).log.log_end_offset == 0
    assert not mgr.is_fetching(TP)


def test_a_replaced_source_takes_over_the_mirrors_partitions_from_the_local_log_end():
    src = make_broker(1)
    produce_all_compressions(src)
    dst = make_broker(7)
    old = InProcessSourceCluster({1: src.rm}, 1)
    new = InProcessSourceCluster({1: src.rm}, 1)
    mgr = make_mirror(dst)

    async def go():
        await mgr.add_partition(TP, "m", old, TOPIC_ID)
        await drain(mgr)
        fetchers_before = set(mgr.fetchers.values())
        src.rm.append_records({TP: build_batch([(None, b"after", (), 1)])}, 1)
        await mgr.replace_source("m", new)
        assert mgr.partitions[TP].source is new
        assert not fetchers_before & set(mgr.fetchers.values())  # the old source's fetchers stopped
        await mgr.replace_source("m", new)  # the same source again: nothing moves
        await drain(mgr)

    run(go())
    assert log_batches(dst, TP) == log_batches(src, TP)
    assert dst.rm.get_partition(TP).log.log_end_offset == 26


def test_a_partition_added_on_an_older_source_is_moved_by_the_next_replace():
    src = make_broker(1)
    dst = make_broker(7)
    old = InProcessSourceCluster({1: src.rm}, 1)
    new = InProcessSourceCluster({1: src.rm}, 1)
    mgr = make_mirror(dst)

    async def go():
        await mgr.add_partition(TP, "m", new, TOPIC_ID)
        await mgr.replace_source("m", new)  # every partition on `new`: remembered
        await mgr.add_partition(TP1, "m", old, TOPIC_ID)  # a plan that read the source before
        await mgr.replace_source("m", new)
        assert {tp: mp.source for tp, mp in mgr.partitions.items()} == {TP: new, TP1: new}

    run(go())


def test_an_unreachable_source_broker_sends_its_partitions_back_to_a_metadata_lookup():
    """A source leader that was killed answers nothing: every partition of the failed request
    is reported as moved (as a consumer refreshes metadata after a connection failure)."""
    import socket

    from kmirror.mirror.fetcher.source_endpoint import SourceClusterEndPoint
    from kmirror.replication.fetcher.engine import EpochQuery, FetchPartitionPlan, FetchPlan

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    moved: list[set[TopicPartition]] = []
    endpoint = SourceClusterEndPoint("127.0.0.1", port, client_id="m", on_leader_change=moved.append,
                                     request_timeout_ms=2000)
    plan = FetchPlan(tuple(FetchPartitionPlan(tp, TOPIC_ID, 0, -1, -1, 0, 1 << 20) for tp in (TP, TP1)),
                     mirror_fetch_policy())

    async def go():
        for call in (lambda: endpoint.fetch(plan),
                     lambda: endpoint.fetch_epoch_end_offsets([EpochQuery(TP, TOPIC_ID, -1, 0)]),
                     lambda: endpoint.fetch_log_offsets(EpochQuery(TP1, TOPIC_ID, -1, 0))):
            try:
                await call()
            except Exception:
                pass
            else:
                raise AssertionError("an unreachable broker answered")
        await endpoint.close()

    run(go())
    assert moved == [{TP, TP1}, {TP}, {TP1}]


def test_pending_partitions_are_assigned_again_after_one_metadata_refresh_per_source():
    """Many partitions sent back by one failed Fetch ask the source for fresh metadata once per
    retry, not once per partition."""
    src, dest = make_broker(1, partitions=8), make_broker(2, partitions=8)
    refreshes: list[bool] = []

    class CountingSource(InProcessSourceCluster):
        async def partition_leader(self, tp, refresh=False):
            refreshes.append(refresh)
            return await super().partition_leader(tp, refresh)

    source = CountingSource({1: src.rm}, 1)
    mgr = make_mirror(dest)
    tps = [TopicPartition("t", p) for p in range(8)]

    async def go():
        for tp in tps:
            await mgr.add_partition(tp, "m", source, TOPIC_ID)
        source.endpoints[0].on_leader_change(set(tps))  # what the endpoint reports after a failed Fetch
        refreshes.clear()
        await mgr.retry_pending()

    run(go())
    assert refreshes.count(True) == 1 and len(refreshes) == 8
    assert all(mgr.is_fetching(tp) for tp in tps)


def test_idle_partitions_of_a_mirror_get_their_source_high_watermarks_in_one_call():
    """A paused mirror's lag follows the source: one ListOffsets call for all its partitions
    (a call each held a pass for a round trip per partition across a WAN)."""
    src, dest = make_broker(1, partitions=50), make_broker(2, partitions=50)
    tps = [TopicPartition("t", p) for p in range(50)]
    for tp in tps:
        src.rm.append_records({tp: build_batch([(None, b"v", (), 1000)] * (tp.partition + 1))}, 1)

    class Counting(InProcessSourceCluster):
        calls: list[int] = []

        async def high_watermarks(self, asked):
            self.calls.append(len(asked))
            return await super().high_watermarks(asked)

    source = Counting({1: src.rm}, leader_id=1)
    mgr = make_mirror(dest)
    run(mgr.refresh_source_offsets({tp: ("m", source) for tp in tps}))
    assert source.calls == [50]
    assert {tp: lag for tp, (_, lag) in mgr.partition_lags().items()} == {tp: tp.partition + 1 for tp in tps}

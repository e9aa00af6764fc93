"""KIP-1279 mirror metrics computed from a real mirror fetcher manager reading an in-process
source (no sockets): lag per partition after catch-up and while not fetched, fetcher stats,
state counts, sync error counters."""

import asyncio
from types import SimpleNamespace
from uuid import UUID

from kmirror.kip1279.state import MirrorPartitionState
from kmirror.metadata.image import PartitionRegistration
from kmirror.metrics.mirror_metrics import fetcher_thread_client_id, register_mirror_metrics
from kmirror.metrics.prometheus import render
from kmirror.metrics.registry import MetricsRegistry
from kmirror.mirror.fetcher.local_replica import MirrorLocalReplica
from kmirror.mirror.fetcher.manager import MirrorFetcherManager
from kmirror.mirror.fetcher.policy import mirror_fetch_policy, mirror_fetcher_id
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.testing.mirror_fetcher import InProcessSourceCluster
from kmirror.testing.replication import image_with
from kmirror.testing.replication_harness import Broker
from kmirror.types import TopicPartition

TOPIC_ID = UUID(int=0xBEEF)
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def make_broker(broker_id: int) -> Broker:
    b = Broker(broker_id, ManualClock(), 30_000)
    regs = {p: PartitionRegistration((broker_id,), (broker_id,), broker_id, 0, 0) for p in range(2)}
    b.rm.apply_image(None, image_with({"t": (TOPIC_ID, regs)}))
    return b


def produce(src: Broker, tp: TopicPartition, n: int) -> None:
    src.rm.append_records({tp: build_batch([(None, b"v%d" % i, (), 1000 + i) for i in range(n)])}, 1)


async def drain(mgr: MirrorFetcherManager, rounds: int = 10) -> None:
    for _ in range(rounds):
        await mgr.retry_pending()
        for f in list(mgr.fetchers.values()):
            await f.run_once()


def test_lag_fetcher_stats_states_and_sync_errors() -> None:
    async def scenario() -> None:
        src, dest = make_broker(1), make_broker(2)
        source = InProcessSourceCluster({1: src.rm}, leader_id=1)
        mgr = MirrorFetcherManager(2, MirrorLocalReplica(dest.rm), mirror_fetch_policy(), dest.clock, num_fetchers=1)
        partitions = {TP0: SimpleNamespace(state=MirrorPartitionState.MIRRORING),
                      TP1: SimpleNamespace(state=MirrorPartitionState.PAUSED)}
        plane = SimpleNamespace(manager=SimpleNamespace(partitions=partitions, fetchers=mgr,
                                                        source_topic_deleted_partitions=2),
                                sync_errors=mgr.sync_errors)
        registry = MetricsRegistry(dest.clock)
        register_mirror_metrics(registry, plane)
        produce(src, TP0, 4)
        produce(src, TP1, 2)
        await mgr.add_partition(TP0, "m", source, TOPIC_ID)
        await mgr.add_partition(TP1, "m", source, TOPIC_ID)
        await drain(mgr)
        client = fetcher_thread_client_id(1, mirror_fetcher_id("t-0", 1), "m")
        lag0 = f"kafka.server:type=FetcherLagMetrics,name=ConsumerLag,clientId={client},topic=t,partition=0"
        registry.poll()
        values = registry.values()
        assert values[lag0] == 0
        assert values["kafka.server.mirror:type=MirrorFetcherManager,name=MaxLag,clientId=MirrorReplica"] == 0
        stats = f"clientId={client},brokerHost=in-process,brokerPort=0,mirror-name=m"
        fetched_bytes = values[f"kafka.server:type=FetcherStats,name=BytesPerSec,{stats}"]
        assert fetched_bytes is not None and fetched_bytes > 0
        requests = values[f"kafka.server:type=FetcherStats,name=RequestsPerSec,{stats}"]
        assert requests is not None and requests >= 1

        # TP1 paused: no fetcher, but its source high watermark is followed
        mgr.remove_partition(TP1)
        produce(src, TP1, 3)
        await mgr.refresh_source_offsets({TP1: ("m", source)})
        registry.poll()
        values = registry.values()
        lag1 = lag0.replace("partition=0", "partition=1").replace(client, fetcher_thread_client_id(
            1, mirror_fetcher_id("t-1", 1), "m"))
        assert values[lag1] == 3
        assert values["kafka.server.mirror:type=MirrorFetcherManager,name=MaxLag,clientId=MirrorReplica"] == 3

        # a partition no longer idle nor fetched leaves the scrape
        await mgr.refresh_source_offsets({})
        assert lag1 not in registry.values()

        mm = "kafka.server.mirror:type=MirrorMetadataManager"
        registry.poll()
        values = registry.values()
        assert values[f"{mm},name=MirroringPartitionState"] == 1
        assert values[f"{mm},name=PausedPartitionState"] == 1
        assert values[f"{mm},name=FailedPartitionState"] == 0
        assert values[f"{mm},name=AclSyncError"] == 0
        assert values[f"{mm},name=SourceTopicDeletedPartitionsCount"] == 2

        class Unreachable(InProcessSourceCluster):
            async def high_watermarks(self, tps):
                raise ConnectionError("source down")

        await mgr.refresh_source_offsets({TP1: ("m", Unreachable({1: src.rm}, leader_id=1))})
        assert registry.values()[f"{mm},name=MetadataRefreshError"] == 1
        text = render(registry)
        assert 'kafka_server_mirror_mirrormetadatamanager_mirroringpartitionstate 1\n' in text
        assert f'kafka_server_fetcherlagmetrics_consumerlag{{clientId="{client}",topic="t",partition="0"}} 0\n' in text
        assert 'kafka_server_mirror_mirrorfetchermanager_minfetchrate{clientId="MirrorReplica"} 0\n' in text
        await mgr.stop()

    asyncio.run(scenario())

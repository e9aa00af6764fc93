import asyncio
import uuid
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from kmirror.metadata.image import EMPTY_IMAGE, ConfigResourceType, MetadataImage
from kmirror.metadata.records import ConfigRecord, PartitionRecord, Record, TopicRecord, encode
from kmirror.metadata.snapshot import snapshot_records
from kmirror.metadata.snapshot_service import MetadataSnapshots
from kmirror.metrics import image_gauges
from kmirror.metrics.meter import TICK_INTERVAL_MS
from kmirror.metrics.node_metrics import register_node_metrics
from kmirror.metrics.prometheus import render
from kmirror.metrics.raft_metrics import register_raft_metrics
from kmirror.metrics.registry import MetricsRegistry
from kmirror.ports import ManualClock
from kmirror.testing.metadata import InMemoryMetadataLogStore, image_with_brokers, server_config


def cluster_image() -> MetadataImage:
    """Brokers 1, 2 and fenced 3; topic a: 3 partitions RF=3, topic b: 1 partition RF=2 with min ISR 2."""
    a, b = uuid.UUID(int=10), uuid.UUID(int=11)
    records: list[Record] = [
        TopicRecord("a", a),
        PartitionRecord(0, a, (1, 2, 3), (1, 2, 3), 1),  # healthy, led by 1
        PartitionRecord(1, a, (2, 3, 1), (2, 1), 2),  # under-replicated, led by 2
        PartitionRecord(2, a, (3, 1, 2), (3,), -1),  # offline
        TopicRecord("b", b),
        PartitionRecord(0, b, (2, 1), (1,), 1),  # led by 1 (not preferred), under min ISR 2
        ConfigRecord(int(ConfigResourceType.TOPIC), "b", "min.insync.replicas", "2"),
    ]
    base = image_with_brokers(1, 2, 3, fenced=(3,))
    return base.apply(records, base.offset + len(records))


def test_controller_gauges() -> None:
    image = cluster_image()
    assert image_gauges.offline_partitions_count(image) == 1
    assert image_gauges.global_topic_count(image) == 2
    assert image_gauges.global_partition_count(image) == 4
    assert image_gauges.fenced_broker_count(image) == 1
    assert image_gauges.active_broker_count(image) == 2
    assert image_gauges.preferred_replica_imbalance_count(image) == 2  # a-2 (no leader) and b-0


def test_broker_gauges_count_only_the_partitions_the_broker_leads() -> None:
    image = cluster_image()
    assert image_gauges.under_replicated_partitions(image, 1) == 1  # b-0
    assert image_gauges.under_replicated_partitions(image, 2) == 1  # a-1
    assert image_gauges.under_replicated_partitions(image, 3) == 0
    assert image_gauges.under_min_isr_partition_count(image, 1, default_min_isr=1) == 1  # b-0: 1 < 2
    assert image_gauges.under_min_isr_partition_count(image, 2, default_min_isr=3) == 1  # a-1: 2 < 3
    assert image_gauges.at_min_isr_partition_count(image, 2, default_min_isr=2) == 1
    assert image_gauges.at_min_isr_partition_count(image, 1, default_min_isr=3) == 1  # a-0: 3 == 3
    assert image_gauges.leader_count(image, 1) == 2
    assert image_gauges.partition_count(image, 1) == 4
    assert image_gauges.partition_count(image, 3) == 3


@dataclass
class FakeMetadata:
    image: MetadataImage
    snapshots: Any = None


class FakeReplicaManager:
    def __init__(self) -> None:
        self.values: dict[str, float] = {"UnderReplicatedPartitions": 5, "IsrShrinks": 0, "IsrExpands": 0,
                                         "ReplicaLagTimeMax": 1200}

    def replication_metrics(self) -> dict[str, float]:
        return dict(self.values)


def test_register_node_metrics_reads_providers_at_scrape_time() -> None:
    clock = ManualClock()
    registry = MetricsRegistry(clock)
    metadata = FakeMetadata(cluster_image(), snapshots=snapshots_of(clock))
    rm = FakeReplicaManager()
    register_node_metrics(registry, node_id=1, metadata=metadata, now_ms=clock.now_ms, replica_manager=rm,
                          default_min_insync_replicas=1)
    values = registry.values()
    assert values["kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"] == 5  # reported
    assert values["kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount"] == 1  # image fallback
    assert values["kafka.server:type=ReplicaManager,name=ReplicaLagTimeMax"] == 1200
    assert values["kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica"] is None
    assert values["kafka.controller:type=KafkaController,name=OfflinePartitionsCount"] == 1
    assert values["kafka.controller:type=KafkaController,name=ActiveBrokerCount"] == 2
    rm.values["UnderReplicatedPartitions"] = 0
    rm.values["IsrShrinks"] = 3
    registry.poll()
    clock.advance(TICK_INTERVAL_MS + 1)
    values = registry.values()
    assert values["kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"] == 0
    assert values["kafka.server:type=ReplicaManager,name=IsrShrinksPerSec"] == 3
    text = render(registry)
    assert "kafka_server_replicamanager_isrshrinks_total 3\n" in text
    assert "kafka_server_replicamanager_isrshrinkspersec_oneminuterate 0.6\n" in text
    assert "kafka_server_replicafetchermanager_maxlag" not in text  # no value reported
    assert "kafka_controller_kafkacontroller_offlinepartitionscount 1\n" in text


def test_without_a_replica_manager_report_every_replication_gauge_comes_from_the_image() -> None:
    clock = ManualClock()
    registry = MetricsRegistry(clock)
    metadata: Any = FakeMetadata(cluster_image(), snapshots=snapshots_of(clock))
    register_node_metrics(registry, node_id=2, metadata=metadata, now_ms=clock.now_ms, replica_manager=object())
    values = registry.values()
    assert values["kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"] == 1
    assert values["kafka.server:type=ReplicaManager,name=IsrShrinksPerSec"] == 0
    assert values["kafka.server:type=ReplicaManager,name=ReplicaLagTimeMax"] is None
    assert values["kafka.server:type=ReplicaManager,name=LeaderCount"] == 1
    assert values["kafka.server:type=ReplicaManager,name=PartitionCount"] == 4


def snapshots_of(clock: ManualClock) -> MetadataSnapshots:
    """A node's snapshots of an in-memory metadata log, snapshotting after every record."""
    config = server_config(metadata_log_max_record_bytes_between_snapshots="1")
    return MetadataSnapshots(config, InMemoryMetadataLogStore(), clock)


def test_snapshot_gauges_follow_the_nodes_snapshots() -> None:
    clock = ManualClock()
    registry = MetricsRegistry(clock)
    snapshots = snapshots_of(clock)
    register_node_metrics(registry, node_id=1, metadata=FakeMetadata(cluster_image(), snapshots),
                          now_ms=clock.now_ms)
    emitter = "kafka.server:type=SnapshotEmitter,name="
    clock.advance(5000)
    values = registry.values()
    assert (values[emitter + "LatestSnapshotGeneratedBytes"], values[emitter + "LatestSnapshotGeneratedAgeMs"]) == \
        (0, 5000)
    image = cluster_image()
    encoded = [encode(record) for record in snapshot_records(image)]
    store = snapshots._store
    store.append(encoded)
    snapshots.appended(encoded)
    asyncio.run(snapshots.snapshot_if_due(EMPTY_IMAGE.apply(snapshot_records(image), len(encoded) - 1)))
    clock.advance(250)
    values = registry.values()
    assert values[emitter + "LatestSnapshotGeneratedBytes"] == len(store.snapshots[store.latest_snapshot]) > 0
    assert values[emitter + "LatestSnapshotGeneratedAgeMs"] == 250
    assert values["kafka.server:type=MetadataLoader,name=HandleLoadSnapshotCount"] == 0
    snapshots.load()  # a start from that snapshot
    assert registry.values()["kafka.server:type=MetadataLoader,name=HandleLoadSnapshotCount"] == 1
    assert "kafka_server_snapshotemitter_latestsnapshotgeneratedbytes " in render(registry)


def test_active_controller_count_is_a_controllers_own() -> None:
    """Only a controller reports it, 1 while it is the active one: a broker names itself the
    controller to clients (it forwards), so its metadata cannot say who is active."""
    clock = ManualClock()
    registry = MetricsRegistry(clock)
    controller: Any = SimpleNamespace(quorum=None, active=True, high_watermark=7, log_end_offset=7,
                                      config=SimpleNamespace(node_id=3000))
    register_raft_metrics(registry, controller)
    name = "kafka.controller:type=KafkaController,name=ActiveControllerCount"
    assert registry.values()[name] == 1
    assert registry.values()["kafka.server:type=raft-metrics,name=current-leader"] == 3000
    controller.active = False
    assert registry.values()[name] == 0
    broker = MetricsRegistry(clock)
    register_node_metrics(broker, node_id=1, metadata=FakeMetadata(cluster_image(), snapshots=snapshots_of(clock)),
                          now_ms=clock.now_ms, replica_manager=object())
    assert name not in broker.values()

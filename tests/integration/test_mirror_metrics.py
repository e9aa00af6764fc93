"""KIP-1279 mirror metrics and request metrics on /metrics with real processes: cluster B
mirrors a topic of cluster A; B's scrape shows the partitions MIRRORING, ConsumerLag 0 once
caught up and growing while paused with new source records, request counts for Fetch (at A,
from B's mirror fetcher) and for mirror RPCs, and READ_ONLY_TOPIC errors of a refused produce."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from kmirror.kip1279.errors import MirrorError
from kmirror.testing.kafka_clients import produce_refused
from kmirror.testing.metrics_scrape import matching, scrape
from kmirror.testing.mirror_clusters import create_mirror, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 2
MIRROR = "dr"
FAST_REFRESH = {"mirror.metadata.refresh.interval.ms": "300"}


@pytest.fixture
def cluster_overrides() -> dict[str, str]:
    return dict(FAST_REFRESH)


@pytest.fixture
def source_overrides() -> dict[str, str]:
    return {"metrics.port": str(free_port_block())}


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    return {"metrics.port": str(free_port_block())}


def produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count * PARTITIONS):
        producer.produce(TOPIC, value=f"record {i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


LAG = "kafka_server_fetcherlagmetrics_consumerlag"
STATE = "kafka_server_mirror_mirrormetadatamanager_{}partitionstate"


def lags(port: int) -> dict[int, float]:
    return {int(k.split('partition="', 1)[1].split('"', 1)[0]): v
            for k, v in matching(scrape(port), LAG, f'topic="{TOPIC}"').items()}


def test_mirror_and_request_metrics_follow_mirroring_pause_and_refused_produce(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    a, b = clusters
    a_port, b_port = (int(c.overrides["metrics.port"]) for c in clusters)
    kmirror("topics", "--bootstrap-server", a.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "1")
    produce(a.bootstrap, 20)
    create_mirror(b, a, MIRROR, TOPIC, tmp_path / "mirror.properties")

    # MIRRORING and caught up: every partition's ConsumerLag is 0
    wait_until(lambda: scrape(b_port).get(STATE.format("mirroring")) == PARTITIONS, "MirroringPartitionState")
    wait_until(lambda: lags(b_port) == {p: 0 for p in range(PARTITIONS)}, "ConsumerLag 0 on every partition")
    samples = scrape(b_port)
    assert samples["kafka_server_mirror_mirrorfetchermanager_maxlag{clientId=\"MirrorReplica\"}"] == 0
    assert samples[STATE.format("failed")] == 0
    assert samples["kafka_server_mirror_mirrorfetchermanager_deadthreadcount{clientId=\"MirrorReplica\"}"] == 0
    client_ids = {k.split('clientId="', 1)[1].split('"', 1)[0] for k in matching(samples, LAG)}
    assert all(c.startswith("MirrorFetcherThread-1-") and c.endswith(f"-{MIRROR}") for c in client_ids), client_ids
    fetched = matching(samples, "kafka_server_fetcherstats_bytes_total", f'mirror_name="{MIRROR}"')
    assert fetched and sum(fetched.values()) > 0
    assert sum(matching(samples, "kafka_server_fetcherstats_requests_total").values()) >= 1
    # each mirror fetcher's connection to A (Kafka's client network metrics, KIP-1279's
    # mirror-broker-{id}-fetcher-{n}-mirror-{name}-metrics with A's broker id)
    network = {k: v for k, v in samples.items()
               if k.startswith("kafka_server_mirror_broker_1_fetcher_") and f"_mirror_{MIRROR}_metrics_" in k}
    groups = {k.split("_metrics_", 1)[0] for k in network}
    assert groups, sorted(samples)
    for group in groups:
        tags = '{broker_id="1",fetcher_id="' + group.split("_fetcher_", 1)[1].split("_", 1)[0] + '"}'
        value = {k.split("_metrics_", 1)[1].removesuffix(tags): v for k, v in network.items() if k.startswith(group)}
        assert value["connection_count"] == 1 and value["connection_creation_total"] >= 1, value
        assert value["successful_authentication_total"] >= 1 and value["failed_authentication_total"] == 0
        assert value["request_total"] >= 2 and value["response_total"] >= value["request_total"] - 1
        assert value["outgoing_byte_total"] >= value["request_total"] * 20 and value["request_size_max"] > 20
    received = sum(v for k, v in network.items() if "_metrics_incoming_byte_total{" in k)
    assert received > sum(fetched.values())  # the answers hold the fetched record bytes and more

    # A served B's mirror fetcher as a consumer Fetch; B served the mirror RPCs
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--describe")
    samples = scrape(b_port)
    a_samples = scrape(a_port)
    assert sum(matching(a_samples, "kafka_network_requestmetrics_requests_total", 'request="Fetch"').values()) > 0
    assert sum(matching(a_samples, "kafka_network_requestmetrics_requests_total",
                        'request="FetchConsumer"').values()) > 0
    for rpc in ("CreateMirror", "AddTopicsToMirror", "DescribeMirrors"):
        assert sum(matching(samples, "kafka_network_requestmetrics_requests_total", f'request="{rpc}"').values()) > 0, rpc
    assert matching(samples, "kafka_network_requestmetrics_errors_total", 'request="CreateMirror"', 'error="NONE"')

    # paused with new source records: the lag grows, nothing is copied
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--pause", "--topic", TOPIC)
    wait_until(lambda: scrape(b_port).get(STATE.format("paused")) == PARTITIONS, "PausedPartitionState")
    produce(a.bootstrap, 7)
    wait_until(lambda: lags(b_port) == {p: 7 for p in range(PARTITIONS)}, "ConsumerLag 7 while paused")
    assert scrape(b_port)["kafka_server_mirror_mirrorfetchermanager_maxlag{clientId=\"MirrorReplica\"}"] == 7
    assert scrape(b_port).get(STATE.format("mirroring")) == 0

    # a produce to the read-only mirror topic is counted under its error
    assert produce_refused(b.bootstrap, TOPIC) == MirrorError.READ_ONLY_TOPIC
    refused = scrape(b_port)['kafka_network_requestmetrics_errors_total{request="Produce",error="READ_ONLY_TOPIC"}']
    assert refused >= 1

    # resumed: caught up again
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--resume", "--topic", TOPIC)
    wait_until(lambda: lags(b_port) == {p: 0 for p in range(PARTITIONS)} and
               scrape(b_port).get(STATE.format("mirroring")) == PARTITIONS, "caught up after resume")

"""The metrics endpoint and the replication tools against a real node."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from kmirror.testing.kafka_clients import consume_partition, create_topic, produce_acked
from kmirror.testing.metrics_scrape import scrape
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

OFFSETS_PARTITIONS = 5


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, int]]:
    """One node shared by the module's tests: each uses its own topics, and counts requests
    as differences."""
    metrics_port = free_port_block()
    c = LocalCluster(dir=tmp_path_factory.mktemp("metered") / "cluster", port=free_port_block(),
                     overrides={"metrics.port": str(metrics_port),
                                # a KIP-848 member's assignment in about a second (Kafka's default interval is 5 s)
                                "group.consumer.heartbeat.interval.ms": "1000",
                                "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)})
    c.up()
    try:
        yield c, metrics_port
    finally:
        c.down()


def test_metrics_endpoint_reports_replication_and_controller_state(metered: tuple[LocalCluster, int]) -> None:
    cluster, port = metered
    kmirror("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "m", "--partitions", "3")
    samples = scrape(port)
    assert samples["kafka_controller_kafkacontroller_activecontrollercount"] == 1
    assert samples["kafka_controller_kafkacontroller_activebrokercount"] == 1
    assert samples["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0
    assert samples["kafka_controller_kafkacontroller_globalpartitioncount"] >= 3
    assert samples["kafka_server_replicamanager_underreplicatedpartitions"] == 0
    assert samples["kafka_server_replicamanager_underminisrpartitioncount"] == 0
    assert samples["kafka_server_replicamanager_leadercount"] >= 3
    assert samples["kafka_server_replicamanager_isrshrinks_total"] == 0
    assert "kafka_server_replicamanager_isrexpandspersec_oneminuterate" in samples
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
    assert missing.value.code == 404


def test_describe_filters_on_a_healthy_topic(metered: tuple[LocalCluster, int]) -> None:
    cluster, _ = metered
    bootstrap = cluster.bootstrap
    kmirror("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "e", "--partitions", "2")
    for flag in ("--under-replicated-partitions", "--unavailable-partitions", "--under-min-isr-partitions"):
        out = kmirror("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "e", flag)
        assert out.stdout == "", flag
    at_min = kmirror("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "e",
                     "--at-min-isr-partitions")
    assert at_min.stdout.splitlines() == [
        "\tTopic: e\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1",
        "\tTopic: e\tPartition: 1\tLeader: 1\tReplicas: 1\tIsr: 1",
    ]


def test_request_metrics_count_requests_errors_and_time_per_api(metered: tuple[LocalCluster, int]) -> None:
    cluster, port = metered
    before = scrape(port)
    create_topic(cluster.bootstrap, "rq", partitions=1)
    produce_acked(cluster.bootstrap, "rq", 5, 1)
    assert len(consume_partition(cluster.bootstrap, "rq", 0, 5)) == 5
    samples = scrape(port)

    def total(prefix: str) -> float:
        """Counted since `before` (the module's other tests share the node)."""
        return sum(v - before.get(k, 0) for k, v in samples.items() if k.startswith(prefix))

    assert total('kafka_network_requestmetrics_requests_total{request="Produce"') >= 1
    assert total('kafka_network_requestmetrics_requests_total{request="Fetch"') >= 1
    assert total('kafka_network_requestmetrics_requests_total{request="FetchConsumer"') >= 1
    assert total('kafka_network_requestmetrics_requests_total{request="CreateTopics"') == 1
    assert samples['kafka_network_requestmetrics_errors_total{request="Produce",error="NONE"}'] >= 1
    assert samples['kafka_network_requestmetrics_totaltimems_count{request="Produce"}'] >= 1
    assert samples['kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}'] >= 0
    assert samples['kafka_network_requestmetrics_requestbytes_max{request="Produce"}'] > 50  # header + one batch of 5 records
    # every client starts with ApiVersions
    assert total('kafka_network_requestmetrics_requests_total{request="ApiVersions"') >= 2


def test_a_long_poll_fetch_spends_its_wait_in_remote_time_and_the_parts_add_up(
        metered: tuple[LocalCluster, int]) -> None:
    cluster, port = metered
    create_topic(cluster.bootstrap, "idle", partitions=1)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "idle-reader",
                         "fetch.wait.max.ms": 400, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("idle", 0, 0)])
        wait_until(lambda: scrape(port).get(
            'kafka_network_requestmetrics_remotetimems_max{request="FetchConsumer"}', 0) >= 300,
            "a Fetch at the log end to wait out fetch.wait.max.ms in RemoteTimeMs", timeout_s=30)
    finally:
        consumer.close()
    samples = scrape(port)
    for request in ("FetchConsumer", "Produce", "Metadata"):
        parts = sum(samples[f'kafka_network_requestmetrics_{part}_sum{{request="{request}"}}']
                    for part in ("requestqueuetimems", "localtimems", "remotetimems", "throttletimems",
                                 "responsequeuetimems", "responsesendtimems"))
        assert parts == pytest.approx(samples[f'kafka_network_requestmetrics_totaltimems_sum{{request="{request}"}}'],
                                      rel=1e-3, abs=0.01), request


def test_group_coordinator_metrics_count_groups_per_protocol_and_state(metered: tuple[LocalCluster, int]) -> None:
    """Kafka's GroupMetadataManager gauges and group-coordinator-metrics: a classic group and
    a KIP-848 group, stable while their consumers run, empty with their offsets once closed."""
    cluster, port = metered
    create_topic(cluster.bootstrap, "grouped", partitions=2)
    produce_acked(cluster.bootstrap, "grouped", 4, 2)
    before = scrape(port)
    common = {"bootstrap.servers": cluster.bootstrap, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    classic = Consumer({**common, "group.id": "metered-classic"})
    kip848 = Consumer({**common, "group.id": "metered-848", "group.protocol": "consumer"})
    consumers = (classic, kip848)
    for consumer in consumers:
        consumer.subscribe(["grouped"])

    def change(sample: str) -> float:
        return scrape(port).get(sample, 0.0) - before.get(sample, 0.0)

    def both_read_all() -> bool:
        for consumer in consumers:
            consumer.poll(0.2)
        return all(len(c.position(c.assignment()) or []) == 2 and sum(p.offset for p in c.position(c.assignment())) == 4
                   for c in consumers)

    wait_until(both_read_all, "both groups to read the topic")
    for consumer in consumers:
        consumer.commit(asynchronous=False)
    manager = "kafka_coordinator_group_groupmetadatamanager_"
    coordinator = "kafka_server_group_coordinator_metrics_"
    wait_until(lambda: change(f"{manager}numgroupsstable") == 1
               and change(f'{coordinator}consumer_group_count{{state="Stable"}}') == 1,
               "both groups stable", timeout_s=60)
    assert change(f'{coordinator}classic_group_count{{state="Stable"}}') == 1
    assert change(f"{manager}numoffsets") == change(f"{coordinator}offset_count") == 4
    assert change(f"{manager}numgroups") == 1
    assert change(f'{coordinator}group_count{{protocol="classic"}}') == 1
    assert change(f'{coordinator}group_count{{protocol="consumer"}}') == 1
    # the sensors: 2 offsets committed by each consumer, the classic group's rebalance completed
    # by its leader's SyncGroup, the KIP-848 group's epoch bumped when its member joined
    assert change(f"{coordinator}offset_commit_count") == 4
    assert change(f"{coordinator}group_completed_rebalance_count") >= 1
    assert change(f"{coordinator}consumer_group_rebalance_count") >= 1
    assert scrape(port)[f"{coordinator}offset_commit_rate"] > 0
    # the coordinator runtime's: every __consumer_offsets partition loaded, seconds ago
    samples = scrape(port)
    assert samples[f'{coordinator}num_partitions{{state="active"}}'] == OFFSETS_PARTITIONS
    assert samples[f'{coordinator}num_partitions{{state="loading"}}'] == 0
    assert samples[f'{coordinator}num_partitions{{state="failed"}}'] == 0
    assert 0 <= samples[f"{coordinator}partition_load_time_avg"] <= samples[f"{coordinator}partition_load_time_max"]
    for consumer in consumers:
        consumer.close()
    wait_until(lambda: change(f"{manager}numgroupsempty") == 1
               and change(f'{coordinator}consumer_group_count{{state="Empty"}}') == 1,
               "both groups empty once their consumers left", timeout_s=60)
    assert change(f"{manager}numoffsets") == 4

"""A source topic deleted, or deleted and re-created under the same name (a new topic id),
on real processes (KIP-1279 "Topic Deletion"): the destination's partitions go STOPPED
through the failover steps, keep every mirrored byte at its offset, become writable, and
nothing of the re-created topic ever reaches them, whether the topic is re-created by
CreateTopics or by a librdkafka producer's auto-creation. To mirror the new topic the
operator removes the old one from the mirror, deletes it at the destination and adds the
name again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from kmirror.records.control import ControlType, read_control_type
from kmirror.testing.acked_writer import partition_layout
from kmirror.testing.kafka_clients import create_topic, end_offsets, produce_acked, produce_delivered
from kmirror.testing.metrics_scrape import scrape
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, describe, topic_id, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import headers, log_batches

pytestmark = pytest.mark.integration

TOPIC = "gone"
PARTITIONS = 2
MIRROR = "m"
DELETED_COUNT = "kafka_server_mirror_mirrormetadatamanager_sourcetopicdeletedpartitionscount"


@pytest.fixture
def cluster_overrides() -> dict[str, str]:
    return {"mirror.metadata.refresh.interval.ms": "500"}


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    return {"metrics.port": str(free_port_block())}


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, f"{topic} deleted at {bootstrap}")


def mirrored(source: LocalCluster, dest: LocalCluster, tmp_path: Path) -> dict[int, list[tuple[int, bytes]]]:
    """`TOPIC` with 40 records at the source, mirrored and caught up; the destination's
    batches per partition."""
    create_topic(source.bootstrap, TOPIC, PARTITIONS)
    produce_acked(source.bootstrap, TOPIC, 40, PARTITIONS)
    ends = end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    create_mirror(dest, source, MIRROR, TOPIC, tmp_path / "mirror.properties")
    # Until the destination broker has the mirror topic in its image: UNKNOWN_TOPIC_OR_PART.
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, PARTITIONS) == ends, "the destination caught up",
               retry_on=(KafkaException,))
    wait_until(lambda: {r[3] for r in describe(dest.bootstrap).values()} == {"MIRRORING"}, "MIRRORING")
    assert topic_id(dest.bootstrap, TOPIC) == topic_id(source.bootstrap, TOPIC)
    batches = {p: log_batches(dest, TOPIC, p) for p in range(PARTITIONS)}
    assert batches == {p: log_batches(source, TOPIC, p) for p in range(PARTITIONS)}
    return batches


def verbose_reasons(bootstrap: str) -> dict[int, str]:
    """`--describe --verbose`: partition -> REASON (the last column, may hold spaces)."""
    out = kmirror("mirrors", "--bootstrap-server", bootstrap, "--describe", "--verbose").stdout.splitlines()
    assert out[0].split()[-2:] == ["STATE", "REASON"], out
    rows = [line.split(maxsplit=7) for line in out[1:] if line.strip()]
    return {int(r[2]): r[7] for r in rows if r[1] == TOPIC}


def assert_kept_and_stopped(dest: LocalCluster, before: dict[int, list[tuple[int, bytes]]]) -> None:
    """Every mirrored batch at its offset, byte for byte, followed by exactly one
    MIRROR_PID_RESET in a leader epoch above every mirrored one (the failover steps)."""
    for p, batches in before.items():
        after = log_batches(dest, TOPIC, p)
        assert after[:len(batches)] == batches
        reset = after[len(batches)]
        assert read_control_type(reset[1]) == ControlType.MIRROR_PID_RESET
        (h,) = headers([reset])
        assert h.base_offset == headers(batches)[-1].next_offset
        assert h.partition_leader_epoch > max(x.partition_leader_epoch for x in headers(batches))


def stopped(dest: LocalCluster) -> None:
    wait_until(lambda: {r[3] for r in describe(dest.bootstrap).values()} == {"STOPPED"}, "every partition STOPPED",
               seen=lambda: describe(dest.bootstrap))


def test_deleted_source_topic_stops_its_partitions_keeping_the_data_and_the_topic_is_writable(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    before = mirrored(source, dest, tmp_path)
    mirrored_id = topic_id(dest.bootstrap, TOPIC)

    delete_topic(source.bootstrap, TOPIC)
    stopped(dest)
    assert_kept_and_stopped(dest, before)
    reasons = verbose_reasons(dest.bootstrap)
    assert set(reasons) == set(range(PARTITIONS))
    assert all(f"source topic {TOPIC} (topic id {mirrored_id}) was deleted" == r for r in reasons.values()), reasons
    warnings = [line for line in dest.log_text().splitlines() if " WARNING " in line and "source topic deleted" in line]
    assert len(warnings) == 1 and f"Mirror {MIRROR} topic {TOPIC}" in warnings[0] and mirrored_id in warnings[0]
    port = int(dest.overrides["metrics.port"])
    assert scrape(port)[DELETED_COUNT] == PARTITIONS

    # Writable: an idempotent producer writes after the MIRROR_PID_RESET, at sequence 0.
    ends = end_offsets(dest.bootstrap, TOPIC, PARTITIONS)
    delivered = produce_delivered({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True}, TOPIC,
                                  [(p, b"k", b"written at the destination") for p in range(PARTITIONS)])
    assert sorted(delivered) == [(p, ends[p]) for p in range(PARTITIONS)]
    for p in range(PARTITIONS):
        new = headers(log_batches(dest, TOPIC, p))[-1]
        assert new.base_offset == ends[p] and new.base_sequence == 0 and not new.is_control

    # Re-created at the source with records: the destination does not change (still the
    # old topic id, the same bytes), its partitions stay STOPPED.
    kept = {p: log_batches(dest, TOPIC, p) for p in range(PARTITIONS)}
    create_topic(source.bootstrap, TOPIC, PARTITIONS, {"retention.ms": "1"})
    produce_acked(source.bootstrap, TOPIC, 7, PARTITIONS, prefix="new")
    new_id = topic_id(source.bootstrap, TOPIC)
    assert new_id != mirrored_id
    wait_until(lambda: all(r.endswith(f"topic id {new_id}, the mirror copies {mirrored_id}")
                           for r in verbose_reasons(dest.bootstrap).values()), "the re-creation seen")
    assert {r[3] for r in describe(dest.bootstrap).values()} == {"STOPPED"}
    assert {p: log_batches(dest, TOPIC, p) for p in range(PARTITIONS)} == kept
    assert topic_id(dest.bootstrap, TOPIC) == mirrored_id
    configs = kmirror("configs", "--bootstrap-server", dest.bootstrap, "--entity-type", "topics",
                      "--entity-name", TOPIC, "--describe").stdout
    assert "retention.ms" not in configs
    assert scrape(port)[DELETED_COUNT] == PARTITIONS


def test_recreated_source_topic_changes_nothing_at_the_destination_explicitly_or_by_auto_creation(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    """Deleted and at once re-created (the destination may not see the deletion on its own),
    first by a librdkafka producer's auto-creation (`auto.create.topics.enable=true` at the
    source), then explicitly, with `retention.ms=1` and more partitions: nothing of the new
    topic reaches the destination and its partitions stop."""
    source, dest = clusters
    before = mirrored(source, dest, tmp_path)
    mirrored_id = topic_id(dest.bootstrap, TOPIC)

    # A producer still running against the source re-creates the topic by auto-creation.
    producer = Producer({"bootstrap.servers": source.bootstrap, "linger.ms": 5,
                         "topic.metadata.refresh.interval.ms": 200})
    delete_topic(source.bootstrap, TOPIC)
    for i in range(30):
        producer.produce(TOPIC, value=f"auto {i}".encode())
    assert producer.flush(30) == 0
    del producer  # destroyed: it would auto-create the topic again after the next deletion
    auto_id = topic_id(source.bootstrap, TOPIC)
    assert auto_id != mirrored_id
    stopped(dest)
    assert_kept_and_stopped(dest, before)
    assert topic_id(dest.bootstrap, TOPIC) == mirrored_id
    kept = {p: log_batches(dest, TOPIC, p) for p in range(PARTITIONS)}

    # Explicit re-creation with more partitions and retention.ms=1.
    delete_topic(source.bootstrap, TOPIC)
    create_topic(source.bootstrap, TOPIC, PARTITIONS + 2, {"retention.ms": "1"})
    produce_acked(source.bootstrap, TOPIC, 12, PARTITIONS + 2, prefix="again")
    new_id = topic_id(source.bootstrap, TOPIC)
    wait_until(lambda: all(new_id in r for r in verbose_reasons(dest.bootstrap).values()), "the re-creation seen")
    summary = kmirror("topics", "--bootstrap-server", dest.bootstrap, "--describe", "--topic", TOPIC).stdout
    assert f"PartitionCount: {PARTITIONS}\t" in summary and "retention.ms" not in summary, summary
    assert {p: log_batches(dest, TOPIC, p) for p in range(PARTITIONS)} == kept
    assert {r[3] for r in describe(dest.bootstrap).values()} == {"STOPPED"}


def test_operator_removes_deletes_and_adds_back_to_mirror_the_recreated_topic(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    mirrored(source, dest, tmp_path)
    mirrored_id = topic_id(dest.bootstrap, TOPIC)
    delete_topic(source.bootstrap, TOPIC)
    create_topic(source.bootstrap, TOPIC, PARTITIONS)
    produce_acked(source.bootstrap, TOPIC, 9, PARTITIONS, prefix="new")
    new_id = topic_id(source.bootstrap, TOPIC)
    stopped(dest)

    # Adding the name back while the destination still holds the old topic is refused
    # (the source's topic id is another) and changes nothing.
    out = kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--mirror", MIRROR, "--topic", TOPIC)
    assert f"Removed 1 topic(s) from mirror {MIRROR}: [{TOPIC}]" in out.stdout
    kept = {p: log_batches(dest, TOPIC, p) for p in range(PARTITIONS)}
    refused = kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", MIRROR, "--topic", TOPIC,
                      check=False)
    assert refused.returncode != 0 and "INVALID_REQUEST" in refused.stderr + refused.stdout
    assert {r[3] for r in describe(dest.bootstrap).values()} == {"STOPPED"}
    assert {p: log_batches(dest, TOPIC, p) for p in range(PARTITIONS)} == kept
    assert topic_id(dest.bootstrap, TOPIC) == mirrored_id

    # The operator's path: delete (or keep under another name) at the destination, add again.
    delete_topic(dest.bootstrap, TOPIC)
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", MIRROR, "--topic", TOPIC)
    ends = end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    wait_until(lambda: topic_id(dest.bootstrap, TOPIC) == new_id, "the new topic at the destination",
               retry_on=(Exception,))
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, PARTITIONS) == ends, "the new topic mirrored",
               retry_on=(KafkaException,))
    wait_until(lambda: {r[3] for r in describe(dest.bootstrap).values()} == {"MIRRORING"}, "MIRRORING")
    for p in range(PARTITIONS):
        assert log_batches(dest, TOPIC, p) == log_batches(source, TOPIC, p)
    assert mirrored_id != new_id


THREE_BROKERS = (1, 2, 3)


@pytest.fixture
def source_and_three_brokers(tmp_path: Path) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    """A single-node source and a destination of a controller and brokers 1..3."""
    refresh = {"mirror.metadata.refresh.interval.ms": "500"}
    source = LocalCluster(dir=tmp_path / "source", port=free_port_block(), overrides=dict(refresh))
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block(3), nodes=3,
                        overrides={**refresh, "default.replication.factor": "3"})
    with clusters_up(source, dest):
        yield source, dest


def test_three_broker_destination_stops_every_partition_on_every_leader_and_replica(
    source_and_three_brokers: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    """Partition leaders on three different destination brokers, RF 3: deletion and
    re-creation at the source stop every partition on its own leader; every replica keeps the
    mirrored batches, then holds the same MIRROR_PID_RESET and the records written after it
    (acks=all); nothing of the re-created topic is copied."""
    source, dest = source_and_three_brokers
    partitions = 3
    create_topic(source.bootstrap, TOPIC, partitions)
    produce_acked(source.bootstrap, TOPIC, 60, partitions)
    ends = end_offsets(source.bootstrap, TOPIC, partitions)
    create_mirror(dest, source, MIRROR, TOPIC, tmp_path / "mirror.properties")
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, partitions) == ends, "caught up", retry_on=(Exception,))
    layout = partition_layout(dest.bootstrap, TOPIC)
    assert sorted(leader for leader, _, _ in layout.values()) == list(THREE_BROKERS), layout
    wait_until(lambda: all(sorted(isr) == list(THREE_BROKERS) for _, _, isr in partition_layout(
        dest.bootstrap, TOPIC).values()), "every replica in the ISR")
    mirrored_batches = {p: log_batches(source, TOPIC, p) for p in range(partitions)}
    wait_until(lambda: all(log_batches(dest, TOPIC, p, n) == mirrored_batches[p]
                           for p in range(partitions) for n in THREE_BROKERS), "every replica mirrored")

    delete_topic(source.bootstrap, TOPIC)
    create_topic(source.bootstrap, TOPIC, partitions)
    produce_acked(source.bootstrap, TOPIC, 9, partitions, prefix="new")
    wait_until(lambda: {r[3] for r in describe(dest.bootstrap).values()} == {"STOPPED"}, "every partition STOPPED",
               seen=lambda: describe(dest.bootstrap))
    delivered = produce_delivered({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True, "acks": "all"},
                                  TOPIC, [(p, b"k", b"written at the destination") for p in range(partitions)])
    assert sorted(delivered) == [(p, ends[p] + 1) for p in range(partitions)]
    for p in range(partitions):
        wait_until(lambda p=p: len({tuple(log_batches(dest, TOPIC, p, n)) for n in THREE_BROKERS}) == 1,
                   f"partition {p}: every replica equal")
        after = log_batches(dest, TOPIC, p, layout[p][0])
        assert after[:len(mirrored_batches[p])] == mirrored_batches[p]
        reset, new = after[len(mirrored_batches[p]):]
        assert read_control_type(reset[1]) == ControlType.MIRROR_PID_RESET
        assert (reset[0], new[0]) == (ends[p], ends[p] + 1)


def test_failback_to_a_cluster_whose_topic_was_recreated_is_refused_and_changes_nothing(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    """A mirrors to B, B fails over, then B's topic is deleted and re-created: failing back
    (A mirrors B) would take the new topic for A's. A's `--add` is refused; A keeps its log."""
    a, b = clusters
    mirrored(a, b, tmp_path)
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--remove", "--topic", ".*")
    stopped(b)
    delete_topic(b.bootstrap, TOPIC)
    create_topic(b.bootstrap, TOPIC, PARTITIONS)
    produce_acked(b.bootstrap, TOPIC, 6, PARTITIONS, prefix="b")
    kept = {p: log_batches(a, TOPIC, p) for p in range(PARTITIONS)}
    a_id = topic_id(a.bootstrap, TOPIC)

    create_mirror(a, b, MIRROR, None, tmp_path / "failback.properties")
    refused = kmirror("mirrors", "--bootstrap-server", a.bootstrap, "--add", "--mirror", MIRROR, "--topic", TOPIC,
                      check=False)
    assert refused.returncode != 0 and "INVALID_REQUEST" in refused.stderr + refused.stdout
    assert describe(a.bootstrap) == {}
    assert {p: log_batches(a, TOPIC, p) for p in range(PARTITIONS)} == kept
    assert topic_id(a.bootstrap, TOPIC) == a_id
    # A is still writable: its topic is in no mirror.
    ends = end_offsets(a.bootstrap, TOPIC, PARTITIONS)
    delivered = produce_delivered({"bootstrap.servers": a.bootstrap}, TOPIC, [(0, b"k", b"still A's")])
    assert delivered == [(0, ends[0])]

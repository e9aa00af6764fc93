"""KIP-1279 between two 3-broker clusters (dedicated controller + brokers 1..3 each), one topic
with 3 partitions and RF=3 at both ends, driven by the `kmirror` CLI and confluent-kafka.

The steps share one pair of clusters and run in order:
1. records from five idempotent acks=all producers (one per codec, keys and headers) are
   mirrored byte-identically at the same offsets, with the same topic id, on the destination
   leader and on both destination followers; Produce at the destination is READ_ONLY_TOPIC;
   `--describe` shows lag 0 and MIRRORING;
2. kill -9 of a destination mirror leader while the source is written to: a new destination
   leader continues the copy, the killed broker comes back, and every replica holds exactly
   the source's batches;
3. kill -9 of a source partition leader while the source is written to (acks=all,
   min.insync.replicas=2): the mirror fetcher follows the new source leader;
4. failover with `--remove --topic '.*'`: every partition STOPPED, MIRROR_PID_RESET at the
   end of each log in a bumped leader epoch, and an idempotent producer writes right after it,
   on all replicas.

The CLI is bootstrapped at one broker only, never the controller, so every mirror RPC is
forwarded from a broker to the controller."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from kmirror.kip1279.errors import MirrorError
from kmirror.mirror.coordinator.partitioner import partition_for
from kmirror.mirror.service import MIRROR_STATE_TOPIC
from kmirror.records.control import ControlType, read_control_type
from kmirror.testing.acked_writer import AckedWriter, assert_acked_mirrored_once, partition_layout
from kmirror.testing.kafka_clients import end_offsets, produce_delivered
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, describe, topic_id
from kmirror.testing.mirror_clusters import wait_until as poll_until
from kmirror.testing.processes import FAST_FAILURE_DETECTION, LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import headers, log_batches

pytestmark = pytest.mark.integration

T = TypeVar("T")

TOPIC = "orders"
PARTITIONS = 3
BROKERS = (1, 2, 3)
MIRROR = "m"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
REPLICATED = {**FAST_FAILURE_DETECTION, "default.replication.factor": "3"}


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    base = tmp_path_factory.mktemp("mirror3")
    source = LocalCluster(dir=base / "source", port=free_port_block(3), nodes=3, overrides=dict(REPLICATED))
    dest = LocalCluster(dir=base / "dest", port=free_port_block(3), nodes=3,
                        overrides={**REPLICATED, "mirror.metadata.refresh.interval.ms": "1000"})
    with clusters_up(source, dest):
        yield source, dest


@pytest.fixture(scope="module")
def shared() -> dict[str, Any]:
    """What one step leaves for the next (the steps run in file order on the same clusters)."""
    return {}


def wait_until(condition: Callable[[], T], what: str) -> T:
    """Metadata or a broker is briefly unavailable during elections: an exception is "not yet"."""
    return poll_until(condition, what, retry_on=(Exception,))


def broker(cluster: LocalCluster, node: int) -> str:
    return f"127.0.0.1:{cluster.port + node - 1}"


def live_bootstrap(cluster: LocalCluster, *down: int) -> str:
    return ",".join(broker(cluster, n) for n in BROKERS if n not in down)


def partitions(bootstrap: str) -> dict[int, tuple[int, list[int], list[int]]]:
    return partition_layout(bootstrap, TOPIC)

def all_replicas_equal(cluster: LocalCluster, partition: int, expected: list[tuple[int, bytes]]) -> bool:
    return all(log_batches(cluster, TOPIC, partition, n) == expected for n in BROKERS)


def source_leader_batches(source: LocalCluster, partition: int) -> list[tuple[int, bytes]]:
    leader = partitions(source.bootstrap)[partition][0]
    return log_batches(source, TOPIC, partition, leader)


def mirror_rows(bootstrap: str) -> dict[int, tuple[int, int, int, str]]:
    """`kmirror mirrors --describe` of this mirror's topic: partition -> (source offset,
    destination offset, lag, state)."""
    return {p: row for (m, t, p), row in describe(bootstrap).items() if (m, t) == (MIRROR, TOPIC)}


def caught_up(dest_bootstrap: str, source_ends: list[int]) -> bool:
    rows = mirror_rows(dest_bootstrap)
    return rows == {p: (source_ends[p], source_ends[p], 0, "MIRRORING") for p in range(PARTITIONS)}


def assert_identical_everywhere(source: LocalCluster, dest: LocalCluster) -> None:
    """Every destination replica (leader and both followers) and every source replica hold
    the same batches at the same offsets as the source leader."""
    for p in range(PARTITIONS):
        expected = source_leader_batches(source, p)
        wait_until(lambda p=p, e=expected: all_replicas_equal(dest, p, e) and all_replicas_equal(source, p, e),
                   f"partition {p}: all source and destination replicas byte-identical")


def copy_progress(dest_bootstrap: str, partition: int) -> int:
    return mirror_rows(dest_bootstrap)[partition][1]


def test_1_byte_identical_on_every_replica_read_only_lag_zero(
    clusters: tuple[LocalCluster, LocalCluster], shared: dict[str, Any], tmp_path: Path
) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", broker(source, 2), "--create", "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "3", "--config", "min.insync.replicas=2")
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions(source.bootstrap).values()),
               "source partitions fully in sync")
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": source.bootstrap, "compression.type": codec,
                             "enable.idempotence": True, "acks": "all", "linger.ms": 20})
        for i in range(90):
            producer.produce(TOPIC, key=f"{codec}-{i % 7}".encode(), value=f"{codec} value {i} ".encode() * 8,
                             partition=i % PARTITIONS, headers=[("codec", codec.encode()), ("i", str(i).encode())])
        assert producer.flush(30) == 0
    source_ends = end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    assert all(end > 0 for end in source_ends)

    # The CLI talks to broker 2 only: create/add are forwarded to the dedicated controller.
    cli = broker(dest, 2)
    create_mirror(cli, source, MIRROR, TOPIC, tmp_path / "mirror.properties")

    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, PARTITIONS) == source_ends, "the destination to reach the source log end")
    assert topic_id(broker(dest, 3), TOPIC) == topic_id(broker(source, 3), TOPIC)
    layout = partitions(dest.bootstrap)
    assert all(sorted(replicas) == list(BROKERS) for _, replicas, _ in layout.values())
    for p in range(PARTITIONS):
        assert len(source_leader_batches(source, p)) >= len(CODECS)
    assert_identical_everywhere(source, dest)
    codecs_seen = {h.attributes & 0x7 for p in range(PARTITIONS) for h in headers(log_batches(dest, TOPIC, p, 1))}
    assert codecs_seen == {0, 1, 2, 3, 4}

    # A mirror topic is read-only, whichever broker leads.
    producer = Producer({"bootstrap.servers": dest.bootstrap, "message.send.max.retries": 0})
    errors: list[KafkaError | None] = []
    for p in range(PARTITIONS):
        producer.produce(TOPIC, value=b"nope", partition=p, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == PARTITIONS
    assert all(e is not None and e.code() == MirrorError.READ_ONLY_TOPIC == 135 for e in errors), errors

    wait_until(lambda: caught_up(cli, source_ends), "--describe: lag 0, MIRRORING")
    shared["ready"] = True


def test_2_kill9_destination_mirror_leader_mid_copy(
    clusters: tuple[LocalCluster, LocalCluster], shared: dict[str, Any]
) -> None:
    assert shared.get("ready"), "step 1 did not complete"
    source, dest = clusters
    # Prefer a partition whose destination leader also coordinates its mirror state in
    # `__mirror_state`: the kill then moves the coordinator too, which must load the states.
    p, victim, moves_coordinator = mirror_leader_to_kill(dest)
    print(f"killing destination broker {victim}, leader of partition {p}; its coordinator too: {moves_coordinator}")
    writer = AckedWriter(source.bootstrap, "during-dest-kill", TOPIC, PARTITIONS)
    writer.start()
    try:
        before = copy_progress(dest.bootstrap, p)
        wait_until(lambda: copy_progress(dest.bootstrap, p) > before + 20, "copying under load")
        assert partitions(dest.bootstrap)[p][0] == victim
        dest.kill9(victim)
        survivors = live_bootstrap(dest, victim)
        new_leader = wait_until(lambda: (lead := partitions(survivors)[p][0]) not in (-1, victim) and lead,
                                f"a new destination leader for partition {p}")
        # The new leader fetches from the source: its log end grows past the killed leader's.
        at_election = end_offsets(survivors, TOPIC, PARTITIONS)[p]
        wait_until(lambda: end_offsets(survivors, TOPIC, PARTITIONS)[p] > at_election + 20,
                   f"mirroring to continue on the new leader {new_leader}")
        dest.start_node(victim)
    finally:
        writer.finish()
    assert len(writer.acked) > 100
    source_ends = end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions(dest.bootstrap).values()),
               "the restarted broker back in every ISR")
    wait_until(lambda: caught_up(broker(dest, 1 + victim % 3), source_ends), "lag 0 after the destination kill")
    assert_identical_everywhere(source, dest)
    # Nothing lost: every record acknowledged by the source is at its offset at the destination.
    assert_acked_mirrored_once(dest.bootstrap, writer)


def mirror_leader_to_kill(dest: LocalCluster) -> tuple[int, int, bool]:
    """(partition, its destination leader, whether that broker also leads the partition's
    `__mirror_state` coordinator partition)."""
    topic = UUID(bytes=base64.urlsafe_b64decode(topic_id(broker(dest, 1), TOPIC) + "=="))  # Kafka's Uuid.toString
    md = AdminClient({"bootstrap.servers": dest.bootstrap}).list_topics(timeout=10)
    state_leaders = {p: m.leader for p, m in md.topics[MIRROR_STATE_TOPIC].partitions.items()}
    leaders = {p: m.leader for p, m in md.topics[TOPIC].partitions.items()}
    for p in range(PARTITIONS):
        if leaders[p] == state_leaders[partition_for(MIRROR, topic, p, len(state_leaders))]:
            return p, leaders[p], True
    return 0, leaders[0], False


def test_3_source_leader_moves_mid_copy(clusters: tuple[LocalCluster, LocalCluster], shared: dict[str, Any]) -> None:
    assert shared.get("ready"), "step 1 did not complete"
    source, dest = clusters
    writer = AckedWriter(source.bootstrap, "during-source-kill", TOPIC, PARTITIONS)
    writer.start()
    try:
        before = copy_progress(dest.bootstrap, 1)
        wait_until(lambda: copy_progress(dest.bootstrap, 1) > before + 20, "copying under load")
        victim = partitions(source.bootstrap)[1][0]
        source.kill9(victim)
        survivors = live_bootstrap(source, victim)
        wait_until(lambda: partitions(survivors)[1][0] not in (-1, victim), "a new source leader for partition 1")
        at_election = end_offsets(survivors, TOPIC, PARTITIONS)[1]
        # The mirror fetcher follows the new source leader: the destination passes the
        # source's log end at the election.
        wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, PARTITIONS)[1] > at_election + 20,
                   "the destination to copy from the new source leader")
        source.start_node(victim)
    finally:
        writer.finish()
    assert len(writer.acked) > 100
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions(source.bootstrap).values()),
               "the restarted source broker back in every ISR")
    source_ends = end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    wait_until(lambda: caught_up(broker(dest, 2), source_ends), "lag 0 after the source kill")
    assert_identical_everywhere(source, dest)
    assert_acked_mirrored_once(dest.bootstrap, writer)
    shared["source_ends"] = source_ends


def test_4_failover_stops_resets_producers_and_continues_offsets(
    clusters: tuple[LocalCluster, LocalCluster], shared: dict[str, Any]
) -> None:
    assert "source_ends" in shared, "step 3 did not complete"
    source, dest = clusters
    source_ends = shared["source_ends"]
    mirrored = {p: source_leader_batches(source, p) for p in range(PARTITIONS)}
    cli = broker(dest, next(n for n in BROKERS if n != partitions(dest.bootstrap)[0][0]))
    out = kmirror("mirrors", "--bootstrap-server", cli, "--remove", "--topic", ".*").stdout
    assert f"Removed 1 topic(s) from mirror {MIRROR}: [{TOPIC}]" in out
    wait_until(lambda: {row[3] for row in mirror_rows(cli).values()} == {"STOPPED"}, "every partition STOPPED")

    delivered = produce_delivered({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True, "acks": "all"},
                                  TOPIC, [(p, b"after", b"written at the destination") for p in range(PARTITIONS)])
    # Last mirrored offset source_end - 1, MIRROR_PID_RESET at source_end, then the new record.
    assert sorted(delivered) == [(p, source_ends[p] + 1) for p in range(PARTITIONS)]
    assert end_offsets(dest.bootstrap, TOPIC, PARTITIONS) == [end + 2 for end in source_ends]

    for p in range(PARTITIONS):
        leader = partitions(dest.bootstrap)[p][0]
        after = log_batches(dest, TOPIC, p, leader)
        n = len(mirrored[p])
        assert after[:n] == mirrored[p]  # the mirrored prefix is untouched
        reset, new = headers(after[n:])
        assert reset.is_control and reset.base_offset == source_ends[p] and reset.records_count == 1
        assert read_control_type(after[n][1]) == ControlType.MIRROR_PID_RESET == 7
        assert reset.partition_leader_epoch > max(h.partition_leader_epoch for h in headers(mirrored[p]))
        assert new.base_offset == source_ends[p] + 1 and new.base_sequence == 0 and not new.is_control
        assert new.partition_leader_epoch >= reset.partition_leader_epoch
        wait_until(lambda p=p, a=after: all_replicas_equal(dest, p, a), f"partition {p}: every replica after failover")

"""A compacted topic, and one whose retention deletes its start, mirrored between two replicated
clusters (3 brokers and a controller at each end, RF 3, min ISR 2) while partition leaders are
killed -9 or paused (SIGSTOP until another broker leads) at both ends.

Compaction: each source replica cleans its own log on its own schedule, as in Kafka, so the source's
replicas are not byte-identical, and a mirror leader that fetched from one source leader goes
on from another. What must hold at every replica of both clusters:
- offsets are sacred: a record at offset o is the one the producer was acknowledged at o;
- compaction loses nothing: an acknowledged record is there, or a later record of its key is;
- the latest record of every key is the same everywhere;
and the destination, which does not clean a mirror topic, holds the same batches on its three
replicas. The same rules hold after a failover and a failback of the compacted topic.

Retention: each replica deletes segments on its own schedule, and the mirror, paused while the
source deletes past its end, follows the source's log start when resumed. At every replica: a
record at offset o is the one acknowledged at o, and every acknowledged record from the
replica's first offset on is there; the destination's replicas hold the same batches from the
latest of their log starts."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kmirror.records.batch import iter_batches
from kmirror.records.record import Record, decode_records
from kmirror.testing.acked_writer import AckedWriter
from kmirror.testing.chaos import REPLICATED_CLUSTER
from kmirror.testing.chaos_checks import BROKERS, retry
from kmirror.testing.kafka_clients import end_offsets, leaders_and_isr_sizes
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, describe, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import log_batches

pytestmark = pytest.mark.integration

TOPIC = "changelog"
PARTITIONS = 2
COMPACTED = ("cleanup.policy=compact", "segment.bytes=8192", "min.cleanable.dirty.ratio=0.01",
             "min.insync.replicas=2")
RETAINED = ("retention.bytes=16384", "segment.bytes=4096", "min.insync.replicas=2")
# Under a leader kill a writer's backlog builds batches up to librdkafka's 1 MB batch.size,
# which the broker refuses above segment.bytes (RECORD_LIST_TOO_LARGE, as Kafka's): keep them small.
BATCH_BYTES = 2048


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    overrides = {**REPLICATED_CLUSTER, "log.cleaner.backoff.ms": "200", "log.retention.check.interval.ms": "500"}
    source = LocalCluster(dir=tmp_path / "source", port=free_port_block(3), nodes=3, overrides=overrides,
                          controllers=1)
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block(3), nodes=3, controllers=1,
                        overrides={**overrides, "mirror.metadata.refresh.interval.ms": "1000"})
    with clusters_up(source, dest):
        yield source, dest


def cleaned_rounds(cluster: LocalCluster, node: int) -> int:
    return len(re.findall(rf"cleaned {TOPIC}-\d ", cluster.log_text(node)))


def replica_records(cluster: LocalCluster, partition: int, node: int) -> list[Record]:
    records: list[Record] = []
    for _, raw in log_batches(cluster, TOPIC, partition, node):
        header = next(iter_batches(raw))[1]
        if not header.is_control:
            records.extend(decode_records(raw))
    return records


def latest_per_key(records: list[Record]) -> dict[bytes | None, tuple[int, bytes | None]]:
    return {r.key: (r.offset, r.value) for r in sorted(records, key=lambda r: r.offset)}


def leader_of(cluster: LocalCluster, partition: int) -> int:
    return leaders_and_isr_sizes(cluster.bootstrap, TOPIC)[partition][0]


def kill_leader(cluster: LocalCluster, partition: int) -> None:
    leader = leader_of(cluster, partition)
    cluster.kill9(leader)
    cluster.start_node(leader)


def pause_leader(cluster: LocalCluster, partition: int) -> None:
    """SIGSTOP until another broker leads, then SIGCONT: the old leader comes back believing
    it still leads."""
    leader = leader_of(cluster, partition)
    cluster.pause(leader)
    try:
        retry(lambda: leader_of(cluster, partition) not in (leader, -1), "another leader elected")
    finally:
        cluster.resume(leader)


Acked = tuple[dict[tuple[int, int], bytes], list[tuple[int, bytes]]]
"""What writers were acknowledged: (partition, offset) -> value, and (partition, value)
acknowledged without an offset."""


def acked_by(*writers: AckedWriter) -> Acked:
    return {k: v for w in writers for k, v in w.acked.items()}, [pv for w in writers for pv in w.acked_unplaced]


def check_offsets(writes: Acked, records: list[Record], partition: int, where: str) -> None:
    unplaced = {v for p, v in writes[1] if p == partition}
    for r in records:
        acked = writes[0].get((partition, r.offset))
        assert acked == r.value or (acked is None and r.value in unplaced), \
            f"{where}: offset {r.offset} holds {r.value!r}, acknowledged there: {acked!r}"


def check_compacted(writes: Acked, records: list[Record], partition: int, where: str) -> None:
    check_offsets(writes, records, partition, where)
    latest = latest_per_key(records)
    lost = [(o, v) for (p, o), v in writes[0].items()
            if p == partition and latest.get(b"k%d" % (int(v.rsplit(b"-", 1)[1]) % 11), (-1, None))[0] < o]
    assert not lost, f"{where}: {len(lost)} acknowledged records gone with no later record of their key: {lost[:3]}"


Fault = tuple[Callable[[LocalCluster, int], None], str, int]  # (fault, "source" or "destination", partition)
FAULTS: tuple[Fault, ...] = ((kill_leader, "source", 0), (kill_leader, "destination", 1), (pause_leader, "source", 1),
                             (pause_leader, "destination", 0), (kill_leader, "source", 1))


def write_under_faults(source: LocalCluster, dest: LocalCluster, tmp_path: Path, config: tuple[str, ...],
                       before_faults: Callable[[AckedWriter], None], faults: tuple[Fault, ...] = FAULTS) -> AckedWriter:
    """The topic created with `config` and mirrored; written to while `before_faults` runs,
    then while leaders are killed and paused at both ends; returns once the mirror caught up."""
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC, "--partitions",
            str(PARTITIONS), "--replication-factor", "3", *(a for c in config for a in ("--config", c)))
    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")
    writer = AckedWriter(source.bootstrap, "w", TOPIC, PARTITIONS, batch_size=BATCH_BYTES)
    writer.start()
    try:
        before_faults(writer)
        for fault, where, partition in faults:
            acked = len(writer.acked)
            fault(source if where == "source" else dest, partition)
            wait_until(lambda a=acked: len(writer.acked) > a + 200, "writes after a leader's restart")
    finally:
        writer.finish()
    assert not writer.failed, sorted({str(e) for e in writer.failed})
    ends = end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    rows = {p: (ends[p], ends[p], 0, "MIRRORING") for p in range(PARTITIONS)}
    retry(lambda: {p: row for (_, _, p), row in describe(dest.bootstrap).items()} == rows,
          "--describe: every partition MIRRORING with lag 0")
    return writer


def test_a_compacted_topic_mirrors_under_leader_kills_and_cleaning_at_both_ends(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    writer = write_under_faults(source, dest, tmp_path, COMPACTED, lambda _: wait_until(
        lambda: all(cleaned_rounds(source, n) > 0 for n in BROKERS), "every source replica cleaned"))
    retry(lambda: all(log_batches(dest, TOPIC, p, 1) == log_batches(dest, TOPIC, p, n)
                      for p in range(PARTITIONS) for n in BROKERS), "the destination's replicas byte-identical")
    assert not any(cleaned_rounds(dest, n) for n in BROKERS), "the destination cleaned a mirror topic"
    for p in range(PARTITIONS):
        replicas = {f"{name} node {n}": replica_records(cluster, p, n)
                    for name, cluster in (("source", source), ("destination", dest)) for n in BROKERS}
        for where, records in replicas.items():
            check_compacted(acked_by(writer), records, p, f"partition {p}, {where}")
        latest = {where: latest_per_key(records) for where, records in replicas.items()}
        assert len({tuple(sorted(v.items())) for v in latest.values()}) == 1, \
            f"partition {p}: the latest record of a key differs between replicas"


def log_end(cluster: LocalCluster, partition: int, node: int) -> int:
    batches = log_batches(cluster, TOPIC, partition, node)
    return next(iter_batches(batches[-1][1]))[1].next_offset if batches else -1


def log_start(cluster: LocalCluster, partition: int, node: int) -> int:
    batches = log_batches(cluster, TOPIC, partition, node)
    return batches[0][0] if batches else -1


def test_retention_at_the_source_is_followed_under_leader_kills_and_a_paused_mirror(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters

    def past_a_paused_mirror(writer: AckedWriter) -> None:
        """The mirror paused until the source deleted past the destination's log end."""
        wait_until(lambda: len(writer.acked) > 300, "records written")
        kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--pause", "--topic", TOPIC)
        held = end_offsets(dest.bootstrap, TOPIC, PARTITIONS)
        wait_until(lambda: all(log_start(source, p, n) > held[p] for p in range(PARTITIONS) for n in BROKERS),
                   "the source's log start past the paused mirror's end")
        kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--resume", "--topic", TOPIC)

    writer = write_under_faults(source, dest, tmp_path, RETAINED, past_a_paused_mirror)
    for p in range(PARTITIONS):
        retry(lambda p=p: len({tuple(b for b in log_batches(dest, TOPIC, p, n)
                                     if b[0] >= max(log_start(dest, p, m) for m in BROKERS))
                               for n in BROKERS}) == 1, f"the destination's replicas of {p} alike")
        for name, cluster in (("source", source), ("destination", dest)):
            for n in BROKERS:
                where = f"partition {p}, {name} node {n}"
                records = replica_records(cluster, p, n)
                check_offsets(acked_by(writer), records, p, where)
                first = records[0].offset if records else ends_at(cluster, p)
                present = {r.offset for r in records}
                lost = sorted(o for (q, o) in writer.acked if q == p and o >= first and o not in present)
                assert not lost, f"{where}: acknowledged records from its log start on missing: {lost[:5]}"


def ends_at(cluster: LocalCluster, partition: int) -> int:
    return end_offsets(cluster.bootstrap, TOPIC, PARTITIONS)[partition]


def mirror_rows_of(cluster: LocalCluster) -> dict[int, tuple[int, int, int, str]]:
    return {p: row for (_, _, p), row in describe(cluster.bootstrap).items()}


def test_a_compacted_topic_fails_over_and_back_with_both_sides_cleaning(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    """After the faults above: failover, writes and cleaning at the destination, then the old
    source mirrors the destination back (failback) while it is still written to. The old
    source's log, cleaned on its own before, keeps its records below the failover point and
    takes the destination's delta above it: at all six replicas each record is the one
    acknowledged at its offset (by either writer), nothing acknowledged is gone without a
    later record of its key, and every replica has the same latest record per key."""
    source, dest = clusters
    first = write_under_faults(source, dest, tmp_path, COMPACTED, lambda _: None, FAULTS[:2])
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", TOPIC)
    retry(lambda: {row[3] for row in mirror_rows_of(dest).values()} == {"STOPPED"}, "every partition STOPPED")
    back = AckedWriter(dest.bootstrap, "back", TOPIC, PARTITIONS, batch_size=BATCH_BYTES)
    back.start()
    try:
        wait_until(lambda: any(cleaned_rounds(dest, n) for n in BROKERS), "the destination cleans after failover")
        create_mirror(source, dest, "back", TOPIC, tmp_path / "failback.properties")
        acked = len(back.acked)
        wait_until(lambda: len(back.acked) > acked + 300, "writes at the destination while failing back")
    finally:
        back.finish()
    assert not back.failed, sorted({str(e) for e in back.failed})
    ends = end_offsets(dest.bootstrap, TOPIC, PARTITIONS)
    rows = {p: (ends[p], ends[p], 0, "MIRRORING") for p in range(PARTITIONS)}
    retry(lambda: mirror_rows_of(source) == rows, "the old source MIRRORING the destination with lag 0")
    retry(lambda: all(log_end(cluster, p, n) == ends[p] for cluster in (source, dest) for p in range(PARTITIONS)
                      for n in BROKERS), "every replica of both clusters at the log end")
    for p in range(PARTITIONS):
        replicas = {f"{name} node {n}": replica_records(cluster, p, n)
                    for name, cluster in (("source", source), ("destination", dest)) for n in BROKERS}
        for where, records in replicas.items():
            check_compacted(acked_by(first, back), records, p, f"partition {p}, {where}")
        latest = {where: latest_per_key(records) for where, records in replicas.items()}
        assert len({tuple(sorted(v.items())) for v in latest.values()}) == 1, \
            f"partition {p}: the latest record of a key differs between replicas"

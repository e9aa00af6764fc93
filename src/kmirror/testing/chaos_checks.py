"""The workload of the chaos runs (`kmirror.testing.chaos`) and the checks a DR copy must pass:
its topics set up and mirrored, the failover, and checks 1-4 of the chaos module's docstring,
at one end, at both ends, or of the destination's copy after a disaster."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from kmirror.metadata.image import EMPTY_IMAGE, MetadataImage
from kmirror.metadata.records import decode, encode
from kmirror.metadata.snapshot import batch_entries, batch_entries_by_epoch, snapshot_records
from kmirror.metadata.snapshot_service import snapshot_image
from kmirror.records.batch import valid_prefix
from kmirror.records.control import ControlType, read_control_type
from kmirror.runtime.metadata_log import (
    BROKER_METADATA_DIR,
    METADATA_PARTITION_DIR,
    SNAPSHOT_SUFFIX,
    parse_snapshot_name,
)
from kmirror.testing.acked_writer import AckedWriter, assert_acked_mirrored_once, partition_layout
from kmirror.testing.kafka_clients import end_offsets, produce_delivered, watermarks
from kmirror.testing.mirror_clusters import create_mirror, describe, quorum_replication, wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import log_batches
from kmirror.testing.transactional_writer import (
    TransactionalWriter,
    assert_committed_exactly,
    assert_whole_or_absent,
)

T = TypeVar("T")

TOPIC = "orders"
TXN_TOPIC = "payments"
TOPICS = (TOPIC, TXN_TOPIC)
PARTITIONS = 3
BROKERS = (1, 2, 3)
MIRROR = "m"
CONVERGE_TIMEOUT_S = 180


def retry(condition: Callable[[], T], what: str) -> T:
    """Metadata or a broker is briefly unavailable after a fault: an exception is "not yet"."""
    return wait_until(condition, what, timeout_s=CONVERGE_TIMEOUT_S, retry_on=(Exception,))


def mirror_rows(bootstrap: str) -> dict[tuple[str, int], tuple[int, int, int, str]]:
    """(topic, partition) -> (source offset, destination offset, lag, state)."""
    return {(t, p): row for (m, t, p), row in describe(bootstrap).items() if m == MIRROR}


def mirror_states(bootstrap: str) -> set[str]:
    rows = mirror_rows(bootstrap)
    return {row[3] for row in rows.values()} if len(rows) == len(TOPICS) * PARTITIONS else set()


def fully_in_sync(cluster: LocalCluster, topics: tuple[str, ...] = TOPICS) -> bool:
    """Every partition of `topics` has all three brokers in its ISR."""
    return all(len(isr) == len(BROKERS) for topic in topics
               for _, _, isr in partition_layout(cluster.bootstrap, topic).values())


def metadata_caught_up(cluster: LocalCluster) -> bool:
    """Every broker, and every voter of a quorum of controllers, is at the end of the active
    controller's metadata log (DescribeQuorum: lag 0), and each broker answers Metadata for the
    topics alike: no node was left behind, by a fault or by a snapshot it had to load."""
    rows = quorum_replication(cluster.bootstrap)
    nodes = [*BROKERS, *(n for n in cluster.node_ids() if n not in BROKERS and cluster.controllers > 1)]
    if {n: rows.get(n, {}).get("Lag") for n in nodes} != dict.fromkeys(nodes, "0"):
        return False
    layouts = [{t: partition_layout(f"127.0.0.1:{cluster.port + n - 1}", t) for t in TOPICS} for n in BROKERS]
    return all(layout == layouts[0] for layout in layouts)


def voter_logs_agree(cluster: LocalCluster) -> bool:
    """Raft's log matching, on disk: every voter of a quorum of controllers holds the same record
    (leader epoch and bytes) at every offset two of them still hold (each deletes its own log
    below its snapshots), and their logs end alike."""
    logs = [metadata_log(cluster.dir / f"node-{n}") for n in cluster.voter_ids()]
    if len(logs) < 2:
        return True
    return (len({end for end, _ in logs}) == 1
            and all(a[o] == b[o] for _, a in logs for _, b in logs for o in a.keys() & b.keys()))


def metadata_images_agree(cluster: LocalCluster) -> bool:
    """Every copy of the metadata log (each voter's, each broker's replica) loads the same image
    from disk: its latest snapshot, then its log after it. A voter's snapshots are written from
    its image, a broker's replica replays the log, so a controller whose image lost a committed
    record (its log and the brokers' replicas hold it) fails this at its next snapshot."""
    images = [image_on_disk(d) for n in cluster.node_ids()
              for d in (cluster.dir / f"node-{n}" / "data" / name for name in (METADATA_PARTITION_DIR, BROKER_METADATA_DIR))
              if d.is_dir()]
    contents = {(image.offset, tuple(sorted(encode(r) for r in snapshot_records(image)))) for image in images}
    return len(contents) == 1


def image_on_disk(directory: Path) -> MetadataImage:
    """The image a copy of the metadata log in `directory` loads (read only)."""
    snapshots = sorted((parse_snapshot_name(p.name), p) for p in directory.glob("*" + SNAPSHOT_SUFFIX))
    image, end = EMPTY_IMAGE, 0
    if snapshots:
        latest, path = snapshots[-1]
        data = path.read_bytes()
        end = latest.end_offset
        image = snapshot_image([value for _, value in batch_entries(data[:valid_prefix(data)[0]])], end)
    entries = sorted((o, v) for o, (_, v) in metadata_log_entries(directory).items() if o >= end)
    return image.apply((decode(v) for _, v in entries), entries[-1][0]) if entries else image


def metadata_log(node_dir: Path) -> tuple[int, dict[int, tuple[int, bytes]]]:
    """A node's metadata log end offset (a log emptied by a snapshot ends at its last segment's
    base offset) and offset -> (leader epoch, record) of its segments' whole batches."""
    segments = sorted((node_dir / "data" / METADATA_PARTITION_DIR).glob("*.log"))
    entries = metadata_log_entries(node_dir / "data" / METADATA_PARTITION_DIR)
    end = max((offset + 1 for offset in entries), default=0)
    return max(end, int(segments[-1].stem) if segments else 0), entries


def metadata_log_entries(directory: Path) -> dict[int, tuple[int, bytes]]:
    """offset -> (leader epoch, record) of the whole batches of the metadata log segments in
    `directory`."""
    entries: dict[int, tuple[int, bytes]] = {}
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        for epoch, batch in batch_entries_by_epoch(data[:valid_prefix(data)[0]]):
            entries.update((offset, (max(epoch, 0), value)) for offset, value in batch)
    return entries


def source_batches(source: LocalCluster) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
    out = {}
    for topic in TOPICS:
        leaders = partition_layout(source.bootstrap, topic)
        out.update({(topic, p): log_batches(source, topic, p, leaders[p][0]) for p in range(PARTITIONS)})
    return out


def replicas_identical(clusters: list[LocalCluster], expected: dict[tuple[str, int], list[tuple[int, bytes]]]) -> bool:
    return all(log_batches(c, topic, p, n) == batches for c in clusters for (topic, p), batches in expected.items()
               for n in BROKERS)


def set_up(source: LocalCluster, dest: LocalCluster, work: Path, through: str | None = None) -> None:
    """The topics at the source, mirrored to the destination, which reaches the source at
    `through` (default: its own listeners)."""
    for topic in TOPICS:
        kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", topic, "--partitions",
                str(PARTITIONS), "--replication-factor", "3", "--config", "min.insync.replicas=2")
    retry(lambda: fully_in_sync(source), "source partitions fully in sync")
    create_mirror(dest, through or source.bootstrap, MIRROR, "|".join(TOPICS), work / "mirror.properties")
    retry(lambda: mirror_states(dest.bootstrap) == {"MIRRORING"}, "the mirror MIRRORING")


def check_source(source: LocalCluster, writer: AckedWriter, txn_writer: TransactionalWriter) -> dict[str, list[int]]:
    """Checks 1-3 at the source alone; returns its log end offsets."""
    retry(partial(fully_in_sync, source), "source: every partition fully in sync")
    expected = retry(lambda: source_batches(source), "the source leaders' batches")
    retry(lambda: replicas_identical([source], expected), "every source replica byte-identical")
    assert_acked_mirrored_once(source.bootstrap, writer, timeout_s=CONVERGE_TIMEOUT_S)
    assert_committed_exactly(source.bootstrap, txn_writer)
    return {t: retry(partial(end_offsets, source.bootstrap, t, PARTITIONS), f"{t}: source log end offsets")
            for t in TOPICS}


def check_converged(source: LocalCluster, dest: LocalCluster, writer: AckedWriter,
                    txn_writer: TransactionalWriter) -> dict[str, list[int]]:
    """Checks 1-3 of the module's docstring; returns the source's log end offsets."""
    ends = check_source(source, writer, txn_writer)
    retry(partial(fully_in_sync, dest), "destination: every partition fully in sync")
    for name, cluster in (("source", source), ("destination", dest)):
        retry(partial(metadata_caught_up, cluster), f"{name}: every broker's metadata at the controller's log end")
        retry(partial(voter_logs_agree, cluster), f"{name}: every voter's metadata log alike")
        retry(partial(metadata_images_agree, cluster), f"{name}: every copy of the metadata loads the same image")
    caught_up = {(t, p): (ends[t][p], ends[t][p], 0, "MIRRORING") for t in TOPICS for p in range(PARTITIONS)}
    retry(lambda: mirror_rows(dest.bootstrap) == caught_up, "--describe: every partition MIRRORING with lag 0")
    expected = source_batches(source)
    retry(lambda: replicas_identical([source, dest], expected), "every replica of both clusters byte-identical")
    assert_acked_mirrored_once(dest.bootstrap, writer, timeout_s=CONVERGE_TIMEOUT_S)
    assert_committed_exactly(dest.bootstrap, txn_writer)
    return ends


def writers_make_progress(writer: AckedWriter, txn_writer: TransactionalWriter) -> None:
    """Liveness once every fault has ended: both writers get writes through again (a cluster
    that stays stuck after healing fails the run, even if it loses nothing)."""
    acked, committed = len(writer.acked), len(txn_writer.committed)
    wait_until(lambda: len(writer.acked) > acked + 20 and len(txn_writer.committed) > committed + 3,
               "both writers to get writes through after the faults", timeout_s=CONVERGE_TIMEOUT_S,
               seen=lambda: (len(writer.acked) - acked, len(txn_writer.committed) - committed,
                             sorted({str(e) for e in writer.failed})[:3], txn_writer.errors[-3:]))


def fail_over(dest: LocalCluster) -> None:
    """`--remove` of both topics, then every partition STOPPED."""
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", "|".join(TOPICS))
    retry(lambda: mirror_states(dest.bootstrap) == {"STOPPED"}, "every partition STOPPED")


def write_after_failover(dest: LocalCluster, ends: dict[str, list[int]]) -> None:
    """Check 4's write: a producer's records land right after each MIRROR_PID_RESET marker,
    which is at `ends` (the mirrored log end)."""
    for topic in TOPICS:
        delivered = produce_delivered({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True, "acks": "all"},
                                      topic, [(p, b"after", b"written at the destination") for p in range(PARTITIONS)])
        assert sorted(delivered) == [(p, ends[topic][p] + 1) for p in range(PARTITIONS)], (topic, delivered, ends)


def check_disaster_copy(source: LocalCluster, dest: LocalCluster, txn_writer: TransactionalWriter) -> dict[str, list[int]]:
    """The destination's copy after a disaster failover (the module's docstring); returns the
    offsets of its MIRROR_PID_RESET markers."""
    retry(partial(fully_in_sync, dest), "destination: every partition fully in sync")
    source_logs = source_batches(source)
    dest_leaders = {t: partition_layout(dest.bootstrap, t) for t in TOPICS}
    dest_logs = {(t, p): log_batches(dest, t, p, dest_leaders[t][p][0]) for t in TOPICS for p in range(PARTITIONS)}
    retry(lambda: replicas_identical([dest], dest_logs), "every destination replica byte-identical")
    resets: dict[str, list[int]] = {t: [] for t in TOPICS}
    for (topic, p), batches in dest_logs.items():
        *mirrored, (reset_offset, reset) = batches
        assert read_control_type(reset) == ControlType.MIRROR_PID_RESET, (topic, p, "no MIRROR_PID_RESET last")
        assert mirrored == source_logs[(topic, p)][:len(mirrored)], f"{topic}-{p}: not a prefix of the source"
        resets[topic].append(reset_offset)
        low, hw = watermarks(dest.bootstrap, topic, p)
        assert watermarks(dest.bootstrap, topic, p, "read_committed") == (low, hw), f"{topic}-{p}: LSO below HW"
    assert_whole_or_absent(dest.bootstrap, txn_writer, per_partition=True)
    return resets

"""A partition's segment files of a real-process cluster, read straight from disk.

Byte-exactness is judged on the files: `log_batches` returns (base offset, bytes) of every
batch of one replica of a partition in offset order, across all its segment files, so two
replicas (of one cluster or of two) are compared batch by batch (offsets and bytes)."""

from __future__ import annotations

from pathlib import Path

from kmirror.records.batch import BatchHeader, crc_ok, iter_batches
from kmirror.testing.processes import LocalCluster

LOG_SUFFIX = ".log"
FIRST_SEGMENT = "00000000000000000000.log"


def partition_dir(cluster: LocalCluster, topic: str, partition: int, node_id: int = 1) -> Path:
    """The replica's directory in whichever of the node's log dirs (`data`, `data2`, ...) holds
    it; in `data` when none does."""
    node_dir = cluster.dir / f"node-{node_id}"
    name = f"{topic}-{partition}"
    for log_dir in sorted(node_dir.glob("data*")):
        if (log_dir / name).is_dir():
            return log_dir / name
    return node_dir / "data" / name


def first_segment(cluster: LocalCluster, topic: str, partition: int, node_id: int = 1) -> Path:
    """The segment file at base offset 0 (a partition that never rolled has only this one)."""
    return partition_dir(cluster, topic, partition, node_id) / FIRST_SEGMENT


def segment_files(cluster: LocalCluster, topic: str, partition: int, node_id: int = 1) -> list[Path]:
    """The replica's `.log` files in base-offset order (the 20-digit names sort as numbers)."""
    directory = partition_dir(cluster, topic, partition, node_id)
    try:
        return sorted(p for p in directory.iterdir() if p.name.endswith(LOG_SUFFIX))
    except FileNotFoundError:
        return []


def log_size(cluster: LocalCluster, topic: str, partition: int, node_id: int = 1) -> int:
    """Bytes in the replica's `.log` files; a file the cleaner or retention deletes while it is
    counted counts as empty."""
    total = 0
    for segment in segment_files(cluster, topic, partition, node_id):
        try:
            total += segment.stat().st_size
        except FileNotFoundError:
            pass
    return total


def log_batches(cluster: LocalCluster, topic: str, partition: int, node_id: int = 1) -> list[tuple[int, bytes]]:
    """(base offset, bytes) of every batch of every segment of the replica on `node_id`; none
    while the partition does not exist there, or while a full truncation (copy from scratch)
    swaps its segments."""
    batches: list[tuple[int, bytes]] = []
    for path in segment_files(cluster, topic, partition, node_id):
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return []
        batches.extend((h.base_offset, raw[pos:pos + h.size]) for pos, h in iter_batches(raw))
    return batches


def txn_index_bytes(cluster: LocalCluster, topic: str, partition: int, node_id: int = 1) -> bytes:
    """The first segment's `.txnindex` (Kafka's 34-byte aborted-transaction entries); empty
    when the segment has none."""
    path = first_segment(cluster, topic, partition, node_id).with_suffix(".txnindex")
    return path.read_bytes() if path.exists() else b""


def headers(batches: list[tuple[int, bytes]]) -> list[BatchHeader]:
    return [h for _, raw in batches for _, h in iter_batches(raw)]


def crc_valid(raw: bytes) -> bool:
    """Whether one stored batch still matches its CRC-32C."""
    (_, header), = iter_batches(raw)
    return crc_ok(raw, 0, header)

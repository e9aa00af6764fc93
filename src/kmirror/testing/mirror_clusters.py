"""Helpers for mirroring tests on real processes: two `LocalCluster`s, the `kmirror` CLI, and
the segment files of single-node clusters read straight from disk.

Byte-exactness is judged on the files: `log_batches` returns (base offset, bytes) of every
batch of a partition in offset order, across all its segment files, so two clusters'
partitions are compared batch by batch (offsets and bytes)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from kmirror.records.batch import BatchHeader, crc_ok, iter_batches
from kmirror.testing.processes import LocalCluster, kmirror

DESCRIBE_HEADERS = ["MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG", "STATE"]
LOG_SUFFIX = ".log"


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60,
               seen: Callable[[], object] | None = None) -> None:
    """Poll `condition`; on timeout the message carries `seen()`, what was observed last."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}" + ("" if seen is None else f"; seen: {seen()}"))


def partition_dir(cluster: LocalCluster, topic: str, partition: int, node_id: int = 1) -> Path:
    return cluster.dir / f"node-{node_id}" / "data" / f"{topic}-{partition}"


def segment_files(cluster: LocalCluster, topic: str, partition: int) -> list[Path]:
    """The partition's `.log` files in base-offset order (the 20-digit names sort as numbers)."""
    directory = partition_dir(cluster, topic, partition)
    try:
        return sorted(p for p in directory.iterdir() if p.name.endswith(LOG_SUFFIX))
    except FileNotFoundError:
        return []


def log_batches(cluster: LocalCluster, topic: str, partition: int) -> list[tuple[int, bytes]]:
    """(base offset, bytes) of every batch of every segment; none while the partition does not
    exist, or while a full truncation (copy from scratch) swaps its segments."""
    batches: list[tuple[int, bytes]] = []
    for path in segment_files(cluster, topic, partition):
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return []
        batches.extend((h.base_offset, raw[pos:pos + h.size]) for pos, h in iter_batches(raw))
    return batches


def headers(batches: list[tuple[int, bytes]]) -> list[BatchHeader]:
    return [h for _, raw in batches for _, h in iter_batches(raw)]


def crc_valid(raw: bytes) -> bool:
    """Whether one stored batch still matches its CRC-32C."""
    (_, header), = iter_batches(raw)
    return crc_ok(raw, 0, header)


def describe(bootstrap: str, *extra: str) -> dict[tuple[str, str, int], tuple[int, int, int, str]]:
    """`kmirror mirrors --describe` as {(mirror, topic, partition): (source offset, destination
    offset, lag, state)}; -1 for an unknown offset."""
    out = kmirror("mirrors", "--bootstrap-server", bootstrap, "--describe", *extra).stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert lines[0] == DESCRIBE_HEADERS, out
    return {(m, t, int(p)): (_offset(src), _offset(dst), _offset(lag), state)
            for m, t, p, src, dst, lag, state in lines[1:]}


def _offset(cell: str) -> int:
    """The tool prints `-` for an offset it does not know."""
    return -1 if cell == "-" else int(cell)


def partition_states(bootstrap: str, topic: str) -> dict[int, str]:
    return {p: row[3] for (_, t, p), row in describe(bootstrap).items() if t == topic}


def create_mirror(dest: LocalCluster, source: LocalCluster, mirror: str, topic: str, config_path: Path) -> None:
    """On `dest`: enable `mirror.version=1`, create `mirror` towards `source`, add `topic`."""
    kmirror("features", "--bootstrap-server", dest.bootstrap, "upgrade", "--feature", "mirror.version=1")
    config_path.write_text(f"bootstrap.servers={source.bootstrap}\n")
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--create", "--mirror", mirror,
            "--mirror-config", str(config_path))
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", mirror, "--topic", topic)


def metric_value(port: int, family: str) -> float | None:
    """The value of the single sample of a Prometheus family on a node's /metrics
    (`metrics.port`), None when the family is absent."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line and not line.startswith("#") and line.split("{", 1)[0].split(" ", 1)[0] == family]
    assert len(values) <= 1, f"{family} has {len(values)} samples"
    return values[0] if values else None

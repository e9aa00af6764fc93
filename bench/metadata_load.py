"""How long a node takes to load its metadata at start, from the whole metadata log against
from its latest snapshot (KIP-630), as the log's history grows.

The image: `--topics` topics of 10 partitions on 3 brokers (replication factor 3, a config
each). The history after it: ISR changes (PartitionChangeRecords, one record a batch as the
controller commits them, shrinking and expanding the ISR in turn), the records a cluster's
metadata log gains most of (95% of it in a chaos run, docs/design/controller.md). For each
history length, three `__cluster_metadata-0` directories are written and loaded by the code a
node starts with (`MetadataSnapshots.load`: read, check CRCs, decode, replay):
- the whole log, never snapshotted (kmirror before snapshots);
- the latest snapshot at the log end and nothing after it;
- the latest snapshot and 20 MB of records after it: the most a node replays after its
  snapshot with the default `metadata.log.max.record.bytes.between.snapshots`.
Every load is of files in the page cache (written just before): the disk's read time is not
measured, only the CPU a start spends. Medians of `--runs` loads; the whole log's load is the
baseline of each history length.

    .venv/bin/python bench/metadata_load.py [--records 100000,250000,500000,1000000] [--topics 1000]
        [--runs 3] [--plot docs/metadata_load.png]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from line_plot import save_line_plot

from kmirror.metadata import records as r
from kmirror.metadata.image import EMPTY_IMAGE, MetadataImage
from kmirror.metadata.snapshot import snapshot_bytes, snapshot_records
from kmirror.metadata.snapshot_service import MetadataSnapshots, SnapshotId
from kmirror.ports import ManualClock
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.runtime.metadata_log import (
    METADATA_PARTITION_DIR,
    FileMetadataLogStore,
    segment_name,
    snapshot_name,
)
from kmirror.testing.metadata import server_config

DEFAULT_BETWEEN_SNAPSHOTS = 20 * 1024 * 1024
NOW_MS = 1_790_000_000_000


def base_records(topics: int) -> list[r.Record]:
    out: list[r.Record] = [r.ClusterIdRecord("bench"), r.FeatureLevelRecord("metadata.version", 27)]
    out += [r.RegisterBrokerRecord(b, uuid.UUID(int=b + 1), 10, (r.BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092 + b),),
                                   None, False) for b in range(3)]
    for t in range(topics):
        topic_id = uuid.UUID(int=t + 100)
        out.append(r.TopicRecord(f"topic-{t:05d}", topic_id))
        out += [r.PartitionRecord(p, topic_id, (0, 1, 2), (0, 1, 2), p % 3) for p in range(10)]
        out.append(r.ConfigRecord(2, f"topic-{t:05d}", "retention.ms", "86400000"))
    return out


def isr_change(i: int, topics: int) -> r.Record:
    """The i-th ISR change: a follower leaves the ISR of a partition, the next change of that
    partition brings it back."""
    round_, partition = divmod(i, topics * 10)
    isr = (0, 1) if round_ % 2 == 0 else (0, 1, 2)
    return r.PartitionChangeRecord(partition % 10, uuid.UUID(int=partition // 10 + 100), isr=isr)


def write_log(directory: Path, records: list[r.Record], first_offset: int) -> int:
    """The records as one-record batches (as the controller commits an ISR change), in one
    segment starting at `first_offset`; returns its size."""
    parts = [build_batch([SimpleRecord(None, r.encode(rec), (), NOW_MS)], base_offset=first_offset + i)
             for i, rec in enumerate(records)]
    data = b"".join(parts)
    (directory / segment_name(first_offset)).write_bytes(data)
    return len(data)


def write_snapshot(log_dir: Path, image: MetadataImage) -> int:
    """A snapshot of `image` at its end offset, as a node writes one, and the empty segment
    the log rolled to; returns the snapshot's size."""
    directory = log_dir / METADATA_PARTITION_DIR
    directory.mkdir(parents=True)
    data = snapshot_bytes([r.encode(rec) for rec in snapshot_records(image)], NOW_MS)
    (directory / snapshot_name(SnapshotId(image.offset + 1, 0))).write_bytes(data)
    (directory / segment_name(image.offset + 1)).touch()
    return len(data)


def load_seconds(log_dir: Path) -> tuple[float, MetadataImage]:
    snapshots = MetadataSnapshots(server_config(), FileMetadataLogStore(log_dir), ManualClock())
    started = time.perf_counter()
    _, image = snapshots.load()
    return time.perf_counter() - started, image


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="100000,250000,500000,1000000", help="history lengths (ISR changes)")
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args()
    base = base_records(args.topics)
    series: dict[str, list[tuple[float, float]]] = {"whole log": [], "snapshot": [], "snapshot + 20 MB of log": []}
    print("| ISR changes | whole log MB | whole log load s | snapshot MB | snapshot load s | snapshot + 20 MB load s "
          "| whole log ÷ snapshot | whole log ÷ snapshot + 20 MB |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.records.split(",")):
        history = base + [isr_change(i, args.topics) for i in range(n)]
        image = EMPTY_IMAGE.apply(history, len(history) - 1)
        batch_size = len(build_batch([SimpleRecord(None, r.encode(isr_change(n, args.topics)), (), NOW_MS)]))
        tail_records = [isr_change(n + i, args.topics) for i in range(DEFAULT_BETWEEN_SNAPSHOTS // batch_size)]
        with tempfile.TemporaryDirectory(prefix="metadata-load-") as tmp:
            whole, snap, snap_tail = Path(tmp) / "whole", Path(tmp) / "snapshot", Path(tmp) / "snapshot-tail"
            (whole / METADATA_PARTITION_DIR).mkdir(parents=True)
            whole_bytes = write_log(whole / METADATA_PARTITION_DIR, history, 0)
            snapshot_bytes = write_snapshot(snap, image)
            write_snapshot(snap_tail, image)
            tail_bytes = write_log(snap_tail / METADATA_PARTITION_DIR, tail_records, image.offset + 1)
            times: dict[str, list[float]] = {name: [] for name in series}
            for _ in range(args.runs):
                for name, log_dir in (("whole log", whole), ("snapshot", snap), ("snapshot + 20 MB of log", snap_tail)):
                    seconds, loaded = load_seconds(log_dir)
                    if name != "snapshot + 20 MB of log":
                        assert loaded == image, f"{name}: the loaded image differs"
                    times[name].append(seconds)
        medians = {name: statistics.median(values) for name, values in times.items()}
        for name, value in medians.items():
            series[name].append((n, value))
        print(f"| {n:,} | {whole_bytes / 1e6:.1f} | {medians['whole log']:.2f} | {snapshot_bytes / 1e6:.2f} | "
              f"{medians['snapshot']:.2f} | {medians['snapshot + 20 MB of log']:.2f} "
              f"({tail_bytes / 1e6:.1f} MB of log) | {medians['whole log'] / medians['snapshot']:.1f} | "
              f"{medians['whole log'] / medians['snapshot + 20 MB of log']:.1f} |", flush=True)
    if args.plot is not None:
        save_line_plot(args.plot, series, "ISR changes in the metadata log's history",
                       "seconds to load the metadata at start",
                       f"Metadata load at start, {args.topics * 10:,} partitions")
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()

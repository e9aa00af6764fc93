"""The metadata log on disk: `<log dir>/__cluster_metadata-0/`, segments and snapshots.

- Segments `<base offset, 20 digits>.log`: one Kafka RecordBatch v2 per append (values are
  encoded metadata records, keys null, the partition leader epoch the epoch of its leader),
  written and fsynced before `append` returns. Opening recovers: the last segment is cut back
  to its longest prefix of whole, CRC-valid batches (a torn tail from a crash). `truncate_to`
  drops a suffix that diverged from the quorum's leader (Kafka's `truncateTo`).
- The epoch cache (`kmirror.log.epoch_cache`, Kafka's `LeaderEpochFileCache`) is kept in
  memory only: `load` rebuilds it from the batch headers and the latest snapshot's epoch.
- Snapshots `<end offset, 20 digits>-<epoch, 10 digits>.checkpoint` (KIP-630): the image of
  every record below the end offset (`metadata.snapshot`), its epoch that of the record at
  end offset - 1, written as `.checkpoint.part`, fsynced and renamed. A snapshot at the log end
  rolls the log: the next segment starts at its end offset, so the segments below it can be
  deleted whole (`enforce_retention`).
- `quorum-state` (Kafka's `FileQuorumStateStore`, JSON, data_version 0): the voter's election
  state, replaced atomically.
- `meta.properties` in the log dir records the node's identity (Kafka's MetaProperties v1) and
  is checked on every start.
"""

from __future__ import annotations

import base64
import bisect
import logging
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from kmirror.config.properties import parse_properties
from kmirror.log.epoch_cache import EpochCache
from kmirror.metadata.snapshot import SegmentInfo, batch_entries, segments_past_retention, snapshot_bytes
from kmirror.metadata.snapshot_service import LoadedLog, SnapshotId
from kmirror.quorum.election_state import ElectionState
from kmirror.records.batch import BatchHeader, valid_prefix
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.records.record import decode_records
from kmirror.runtime.log_dir_failure import hand_over
from kmirror.runtime.quorum_state_file import (
    QUORUM_STATE,
    CorruptQuorumStateError,
    fsync_dir,
    read_quorum_state,
    write_quorum_state,
)

log = logging.getLogger(__name__)

METADATA_PARTITION_DIR = "__cluster_metadata-0"
BROKER_METADATA_DIR = "__cluster_metadata-broker"
"""The broker role's replica of the metadata log on a combined node that is one voter of
several (its controller role keeps `__cluster_metadata-0`); not a partition directory."""
META_PROPERTIES = "meta.properties"
SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"


class MetaPropertiesError(RuntimeError):
    """This log dir belongs to another node or cluster; str() is one line."""


class CorruptMetadataLogError(RuntimeError):
    """The metadata log cannot be read back whole (str() is one line)."""


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def snapshot_name(snapshot: SnapshotId) -> str:
    return f"{snapshot.end_offset:020d}-{snapshot.epoch:010d}{SNAPSHOT_SUFFIX}"


class FileMetadataLogStore:
    def __init__(self, log_dir: str | Path, now_ms: Callable[[], int] | None = None,
                 on_failure: Callable[[str, OSError], NoReturn] | None = None,
                 directory: str = METADATA_PARTITION_DIR) -> None:
        """`on_failure`: called when the storage refuses a write (`log_dir_failure`); it halts
        the node, so that the next record is never appended after a torn one. `directory`: the
        log's directory under `log_dir`."""
        self._on_failure = on_failure
        self._log_dir = Path(log_dir)
        self._dir = self._log_dir / directory
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._segments: list[int] = [0]
        """Base offsets of the segments, oldest first; the last one is appended to."""
        self._snapshots: list[SnapshotId] = []
        self._next_offset = 0
        self._epochs = EpochCache()
        """The epoch of every offset from `_first_known_offset` to the log end."""

    @property
    def path(self) -> Path:
        """The active segment."""
        return self._dir / segment_name(self._segments[-1])

    @property
    def log_start_offset(self) -> int:
        return self._segments[0]

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def latest_snapshot(self) -> SnapshotId | None:
        return self._snapshots[-1] if self._snapshots else None

    @property
    def last_epoch(self) -> int:
        """The epoch of the last record, that of the latest snapshot when the log is empty
        above it, 0 when there is neither."""
        latest = self._epochs.latest_epoch
        if latest is not None:
            return latest
        snapshot = self.latest_snapshot
        return snapshot.epoch if snapshot is not None else 0

    def epoch_of(self, offset: int) -> int:
        """The epoch of the record at `offset`, from the log start (or the last offset the
        latest snapshot covers) to the log end; ValueError elsewhere."""
        self._check_known(offset, offset + 1)
        epoch = self._epochs.epoch_for_offset(offset)
        if epoch is None:
            raise ValueError(f"no epoch is known for offset {offset} of the metadata log")
        return epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """`(largest known epoch <= epoch, its end offset)`: the start offset of the next known
        epoch, or the log end offset for the latest. `(-1, -1)` below every known epoch."""
        entries = self._epochs.entries
        i = bisect.bisect_right([e.epoch for e in entries], epoch)
        if i == 0:
            return -1, -1
        if i == len(entries):
            return entries[-1].epoch, self._next_offset
        return entries[i - 1].epoch, entries[i].start_offset

    def epoch_ranges(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """`(epoch, first offset, end offset exclusive)` of the runs of one epoch covering
        `[start, end)`, in order."""
        if start == end:
            return []
        self._check_known(start, end)
        entries = self._epochs.entries
        ranges = []
        for i, entry in enumerate(entries):
            run_end = entries[i + 1].start_offset if i + 1 < len(entries) else self._next_offset
            first, last_exclusive = max(start, entry.start_offset), min(end, run_end)
            if first < last_exclusive:
                ranges.append((entry.epoch, first, last_exclusive))
        return ranges

    def _check_known(self, start: int, end: int) -> None:
        if not self._first_known_offset() <= start < end <= self._next_offset:
            raise ValueError(f"offsets [{start}, {end}) are outside the metadata log's known offsets "
                             f"[{self._first_known_offset()}, {self._next_offset})")

    def _first_known_offset(self) -> int:
        """The log start offset, or the last offset the latest snapshot covers when that is lower."""
        snapshot = self.latest_snapshot
        if snapshot is not None and snapshot.end_offset > 0:
            return min(self.log_start_offset, snapshot.end_offset - 1)
        return self.log_start_offset

    def _seed_epochs(self, snapshot: SnapshotId | None) -> None:
        """Restart the epoch cache from a snapshot: the record at its end offset - 1 is of its epoch."""
        self._epochs = EpochCache()
        if snapshot is not None and snapshot.end_offset > 0:
            self._epochs.assign(snapshot.epoch, snapshot.end_offset - 1)

    def load(self) -> LoadedLog:
        """Recover (drop a snapshot left half written, cut a torn tail) and read the latest
        snapshot and every stored record."""
        self._dir.mkdir(parents=True, exist_ok=True)
        for partial in self._dir.glob("*" + PARTIAL_SUFFIX):
            partial.unlink()
        self._snapshots = sorted(parse_snapshot_name(p.name) for p in self._dir.glob("*" + SNAPSHOT_SUFFIX))
        self._segments = sorted(int(p.stem) for p in self._dir.glob("*.log") if p.stem.isdigit()) or [0]
        snapshot = self.latest_snapshot
        snapshot_end = snapshot.end_offset if snapshot else 0
        if not (self._dir / segment_name(self._segments[-1])).exists():
            self._create_segment(self._segments[-1])
        self._seed_epochs(snapshot)
        entries: list[tuple[int, bytes]] = []
        for i, base in enumerate(self._segments):
            segment_entries, headers = self._read_segment(base, last=i == len(self._segments) - 1)
            entries.extend(segment_entries)
            for header in headers:
                self._epochs.assign(_leader_epoch(header), header.base_offset)
        self._next_offset = entries[-1][0] + 1 if entries else self._segments[-1]
        if snapshot is not None and snapshot.end_offset > self._next_offset:
            # a snapshot installed from the controller, the crash came before the log restarted at its end
            self._restart_log_at(snapshot.end_offset)
            entries = []
        elif self._segments[0] > snapshot_end:
            raise CorruptMetadataLogError(
                f"the metadata log in {self._dir} starts at offset {self._segments[0]} and no snapshot covers the "
                f"offsets below it")
        records = None
        if snapshot is not None:
            records = [value for _, value in batch_entries(self._read_snapshot_file(snapshot))]
        return LoadedLog(records, snapshot_end, entries)

    def _read_segment(self, base: int, *, last: bool) -> tuple[list[tuple[int, bytes]], list[BatchHeader]]:
        path = self._dir / segment_name(base)
        data = path.read_bytes()
        n_valid, headers = valid_prefix(data)
        if n_valid < len(data):
            if not last:
                raise CorruptMetadataLogError(f"invalid batches in {path} at byte {n_valid}, before its last segment")
            log.warning("Found invalid batches in the metadata log %s: %d bytes truncated, the log ends at offset %d "
                        "(a write cut short by a crash or a failed disk)", path, len(data) - n_valid,
                        headers[-1].next_offset if headers else base)
            with open(path, "r+b") as f:
                f.truncate(n_valid)
                f.flush()
                os.fsync(f.fileno())
        return batch_entries(data[:n_valid]), headers

    def _read_snapshot_file(self, snapshot: SnapshotId) -> bytes:
        path = self._dir / snapshot_name(snapshot)
        data = path.read_bytes()
        if valid_prefix(data)[0] != len(data):
            raise CorruptMetadataLogError(f"the metadata snapshot {path} holds invalid batches")
        return data

    def append(self, encoded: list[bytes], epoch: int = 0) -> int:
        """Write the records as one batch of leader epoch `epoch` (never below the last
        epoch), flushed; the offset of the last one."""
        if not encoded:
            return self._next_offset - 1
        if epoch < self.last_epoch:
            raise ValueError(f"an append of epoch {epoch} to a metadata log whose last epoch is {self.last_epoch}")
        now = self._now_ms()
        batch = build_batch([SimpleRecord(None, value, (), now) for value in encoded], base_offset=self._next_offset,
                            partition_leader_epoch=epoch)
        try:
            with open(self.path, "ab") as f:
                f.write(batch)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            hand_over(exc, str(self.path), self._on_failure)
        self._epochs.assign(epoch, self._next_offset)
        self._next_offset += len(encoded)
        return self._next_offset - 1

    def truncate_to(self, offset: int) -> None:
        """Drop every record at and above `offset` (Kafka's `truncateTo`): the segments based
        above it are deleted, newest first, and the one holding it is cut where the batch
        holding `offset` starts, that batch's records below `offset` written back as one
        batch of its epoch. Nothing at or above the log end: no change. Below the latest
        snapshot's end offset (committed): ValueError."""
        snapshot_end = self.latest_snapshot.end_offset if self.latest_snapshot else 0
        if offset < max(snapshot_end, self.log_start_offset):
            raise ValueError(f"a truncation of the metadata log to {offset}, below its snapshot at {snapshot_end} "
                             f"or its log start offset {self.log_start_offset}")
        if offset >= self._next_offset:
            return
        while self._segments[-1] > offset:
            self._delete(self._dir / segment_name(self._segments.pop()))
        path = self.path
        try:
            fsync_dir(self._dir)
            data = path.read_bytes()
            position, kept = _cut_at(data, offset)
            with open(path, "r+b") as f:
                f.seek(position)
                f.write(kept)
                f.truncate(position + len(kept))
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            hand_over(exc, str(path), self._on_failure)
        self._epochs.truncate_from_end(offset)
        self._next_offset = offset

    def write_snapshot(self, end_offset: int, encoded: list[bytes]) -> int:
        """Store the snapshot of the image of every record below `end_offset`, from the log
        start to the log end, of the epoch of the record at `end_offset - 1`; at the log end
        it rolls the log there. Returns the snapshot's size in bytes."""
        if not self.log_start_offset <= end_offset <= self._next_offset:
            raise ValueError(f"a snapshot at {end_offset} of a log from {self.log_start_offset} to {self._next_offset}")
        epoch = self.epoch_of(end_offset - 1) if end_offset > 0 else 0
        data = snapshot_bytes(encoded, self._now_ms())
        self._store_snapshot(SnapshotId(end_offset, epoch), data)
        if end_offset == self._next_offset and self._segments[-1] != end_offset:
            self._create_segment(end_offset)
            self._segments.append(end_offset)
        return len(data)

    def install_snapshot(self, snapshot: SnapshotId, data: bytes) -> list[bytes]:
        """Replace the whole log by a snapshot fetched from the controller (this node's log
        ended below the controller's log start). Returns the snapshot's encoded records."""
        if valid_prefix(data)[0] != len(data):
            raise CorruptMetadataLogError(f"the fetched metadata snapshot {snapshot_name(snapshot)} holds invalid batches")
        self._store_snapshot(snapshot, data)
        self._restart_log_at(snapshot.end_offset)
        return [value for _, value in batch_entries(data)]

    def _store_snapshot(self, snapshot: SnapshotId, data: bytes) -> None:
        path = self._dir / snapshot_name(snapshot)
        partial = path.with_name(path.name.removesuffix(SNAPSHOT_SUFFIX) + PARTIAL_SUFFIX)
        try:
            with open(partial, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(partial, path)
            fsync_dir(self._dir)
        except OSError as exc:
            hand_over(exc, str(partial), self._on_failure)
        self._snapshots = sorted({*self._snapshots, snapshot})

    def _restart_log_at(self, offset: int) -> None:
        """Delete every segment and start an empty one at `offset`, above the latest snapshot."""
        self._create_segment(offset)
        for base in self._segments:
            if base != offset:
                self._delete(self._dir / segment_name(base))
        self._segments = [offset]
        self._next_offset = offset
        self._delete_snapshots_below(offset)
        self._seed_epochs(self.latest_snapshot)

    def _create_segment(self, base: int) -> None:
        try:
            (self._dir / segment_name(base)).touch()
            fsync_dir(self._dir)
        except OSError as exc:
            hand_over(exc, str(self._dir / segment_name(base)), self._on_failure)

    def read_snapshot(self, snapshot: SnapshotId, position: int, max_bytes: int) -> tuple[int, bytes] | None:
        """`(size, bytes from position)` of a stored snapshot (FetchSnapshot), None if absent."""
        if snapshot not in self._snapshots:
            return None
        path = self._dir / snapshot_name(snapshot)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                f.seek(position)
                return size, f.read(max(0, min(max_bytes, size - position)))
        except FileNotFoundError:  # deleted by retention meanwhile
            return None

    def enforce_retention(self, max_bytes: int, max_ms: int) -> int:
        """Kafka's metadata log retention: delete the oldest segments `segments_past_retention`
        lets go, then every snapshot below the new log start, the latest kept. Returns the log
        start offset."""
        latest = self.latest_snapshot
        if latest is None:
            return self.log_start_offset
        segments = [SegmentInfo(base, *_size_and_mtime_ms(self._dir / segment_name(base))) for base in self._segments]
        snapshots_size = sum(_size_and_mtime_ms(self._dir / snapshot_name(s))[0] for s in self._snapshots)
        for _ in range(segments_past_retention(segments, snapshots_size, latest.end_offset, max_bytes, max_ms,
                                               self._now_ms())):
            self._delete(self._dir / segment_name(self._segments.pop(0)))
        self._delete_snapshots_below(self.log_start_offset)
        self._epochs.truncate_from_start(self._first_known_offset())
        return self.log_start_offset

    def _delete_snapshots_below(self, offset: int) -> None:
        for old in [s for s in self._snapshots[:-1] if s.end_offset < offset]:
            self._delete(self._dir / snapshot_name(old))
            self._snapshots.remove(old)

    def _delete(self, path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            hand_over(exc, str(path), self._on_failure)

    def read_election_state(self) -> ElectionState | None:
        """The voter's stored election state (`quorum-state`), None if it never stored one."""
        try:
            return read_quorum_state(self._dir)
        except CorruptQuorumStateError as exc:
            raise CorruptMetadataLogError(str(exc)) from None
        except OSError as exc:
            hand_over(exc, str(self._dir / QUORUM_STATE), self._on_failure)

    def write_election_state(self, state: ElectionState) -> None:
        """Replace `quorum-state` atomically; callable before `load`."""
        try:
            if not self._dir.exists():
                self._dir.mkdir(parents=True, exist_ok=True)
                fsync_dir(self._log_dir)
            write_quorum_state(self._dir, state)
        except OSError as exc:
            hand_over(exc, str(self._dir / QUORUM_STATE), self._on_failure)

    def bind(self, cluster_id: str, node_id: int) -> None:
        ensure_meta_properties(self._log_dir, cluster_id, node_id)


def _leader_epoch(header: BatchHeader) -> int:
    """A batch's leader epoch; one written without any (-1) is of epoch 0, the first leader's."""
    return max(header.partition_leader_epoch, 0)


def _cut_at(data: bytes, offset: int) -> tuple[int, bytes]:
    """`(position, batch)`: a segment's bytes `data` without its records from `offset` on are
    `data[:position] + batch`, where `batch` holds the records below `offset` of the batch
    holding `offset` (empty when `offset` starts a batch)."""
    position = 0
    for header in valid_prefix(data)[1]:
        if header.next_offset > offset:
            if header.base_offset >= offset:
                break
            kept = [SimpleRecord(r.key, r.value, r.headers, r.timestamp)
                    for r in decode_records(data, position) if r.offset < offset]
            return position, build_batch(kept, compression=header.compression, base_offset=header.base_offset,
                                         partition_leader_epoch=header.partition_leader_epoch)
        position += header.size
    return position, b""


def parse_snapshot_name(name: str) -> SnapshotId:
    offset, _, epoch = name.removesuffix(SNAPSHOT_SUFFIX).partition("-")
    return SnapshotId(int(offset), int(epoch))


def _size_and_mtime_ms(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except FileNotFoundError:  # deleted meanwhile
        return 0, 0
    return st.st_size, int(st.st_mtime * 1000)


def ensure_meta_properties(log_dir: str | Path, cluster_id: str, node_id: int) -> dict[str, str]:
    """Write `meta.properties` (version=1, cluster.id, node.id, directory.id) if absent, else
    check it: a different node.id or cluster.id refuses to start (MetaPropertiesError)."""
    directory = Path(log_dir)
    path = directory / META_PROPERTIES
    if path.exists():
        props = parse_properties(path.read_text(encoding="utf-8"))
        if props.get("node.id") != str(node_id):
            raise MetaPropertiesError(
                f"stored node.id {props.get('node.id')} in {path} does not match node.id {node_id} in the configuration"
            )
        if props.get("cluster.id") != cluster_id:
            raise MetaPropertiesError(
                f"stored cluster.id {props.get('cluster.id')} in {path} does not match the metadata log's cluster id {cluster_id}"
            )
        return props
    directory.mkdir(parents=True, exist_ok=True)
    props = {
        "version": "1",
        "cluster.id": cluster_id,
        "node.id": str(node_id),
        "directory.id": _directory_id(),
    }
    text = "#\n#" + time.strftime("%a %b %d %H:%M:%S %Z %Y") + "\n" + "".join(f"{k}={v}\n" for k, v in props.items())
    tmp = path.with_suffix(".properties.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(directory)
    return props


def _directory_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def log_dir_ids(log_dirs: list[str], cluster_id: str, node_id: int) -> dict[str, uuid.UUID]:
    """Each log directory's id (`directory.id` of its `meta.properties`, written when the
    directory has none, as Kafka's storage formatting writes one into every log directory).
    A directory whose file names no id has none here, nor has one that cannot be read or
    written (a failed disk: the log load takes it offline, KIP-858)."""
    ids: dict[str, uuid.UUID] = {}
    for log_dir in log_dirs:
        path = Path(log_dir) / META_PROPERTIES
        try:
            if path.exists():
                props = parse_properties(path.read_text(encoding="utf-8"))
            else:
                props = ensure_meta_properties(log_dir, cluster_id, node_id)
        except OSError as exc:
            log.error("log dir %s has no readable %s: %s", log_dir, META_PROPERTIES, exc)
            continue
        raw = props.get("directory.id")
        if raw:
            ids[log_dir] = uuid.UUID(bytes=base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    return ids

"""`MetadataSnapshots`: when and how a node snapshots its metadata image and trims its log
(Kafka's `SnapshotGenerator` and the metadata log's retention), for the controller and the
broker alike. See docs/design/controller.md "Metadata snapshots".
"""

from __future__ import annotations

import asyncio
import logging
from typing import NamedTuple, Protocol

from kmirror.config.server import ServerConfig
from kmirror.metadata.image import EMPTY_IMAGE, MetadataImage
from kmirror.metadata.records import decode, encode
from kmirror.metadata.snapshot import SnapshotPolicy, snapshot_records
from kmirror.ports import Clock
from kmirror.quorum.election_state import ElectionState

log = logging.getLogger(__name__)

class SnapshotId(NamedTuple):
    end_offset: int
    epoch: int


class LoadedLog(NamedTuple):
    snapshot: list[bytes] | None
    """The latest snapshot's encoded records (the image below `snapshot_end`), or None."""
    snapshot_end: int
    entries: list[tuple[int, bytes]]
    """Every stored `(offset, encoded record)` from the log start offset, in order; those below
    `snapshot_end` are already in the snapshot."""


class MetadataLogStore(Protocol):
    """Durable storage of the `__cluster_metadata` log: encoded records and snapshots."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def latest_snapshot(self) -> SnapshotId | None: ...

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record takes."""
        ...

    @property
    def last_epoch(self) -> int:
        """The last record's epoch; the latest snapshot's if none is above it; 0 if neither."""
        ...

    def load(self) -> LoadedLog:
        """Recover, then the latest snapshot and every stored record."""
        ...

    def append(self, encoded: list[bytes], epoch: int = 0) -> int:
        """Store the records durably (flushed) as of leader epoch `epoch`; the offset of the last one."""
        ...

    def epoch_of(self, offset: int) -> int:
        """The epoch of the record at `offset` (log start or snapshot end - 1 to log end), else ValueError."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """`(largest known epoch <= epoch, its end offset)` (Kafka's `endOffsetFor`), `(-1, -1)` below all."""
        ...

    def epoch_ranges(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """`(epoch, first offset, end offset exclusive)` runs of one epoch covering `[start, end)`."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every record at and above `offset`, never below the latest snapshot (ValueError)."""
        ...

    def write_snapshot(self, end_offset: int, encoded: list[bytes]) -> int:
        """Store a snapshot of the image below `end_offset` (at most the log end); returns its size."""
        ...

    def install_snapshot(self, snapshot: SnapshotId, data: bytes) -> list[bytes]:
        """Replace the whole log by a snapshot fetched from the controller; its records."""
        ...

    def read_snapshot(self, snapshot: SnapshotId, position: int, max_bytes: int) -> tuple[int, bytes] | None:
        """`(size, bytes from position)` of a stored snapshot, None if there is none such."""
        ...

    def enforce_retention(self, max_bytes: int, max_ms: int) -> int:
        """Delete what retention allows below the latest snapshot; the new log start offset."""
        ...

    def read_election_state(self) -> ElectionState | None:
        """The voter's stored election state (Kafka's `quorum-state`), None if none was stored."""
        ...

    def write_election_state(self, state: ElectionState) -> None:
        """Store the voter's election state durably, replacing the previous one atomically."""
        ...

    def bind(self, cluster_id: str, node_id: int) -> None:
        """Called once the cluster id is known: record or check the node's identity (meta.properties)."""
        ...


def snapshot_image(encoded: list[bytes], end_offset: int) -> MetadataImage:
    """The image a snapshot of the log below `end_offset` holds."""
    return EMPTY_IMAGE.apply((decode(data) for data in encoded), end_offset - 1)


class MetadataSnapshots:
    """Snapshots a node's image once `metadata.log.max.record.bytes.between.snapshots` of
    records were appended since the last one (or `metadata.log.max.snapshot.interval.ms`
    passed), then deletes the log and snapshots that `metadata.max.retention.bytes`/`.ms`
    let go, below the latest snapshot."""

    def __init__(self, config: ServerConfig, store: MetadataLogStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._max_retention_bytes = int(config.get("metadata.max.retention.bytes"))
        self._max_retention_ms = int(config.get("metadata.max.retention.ms"))
        self._policy = SnapshotPolicy(int(config.get("metadata.log.max.record.bytes.between.snapshots")),
                                      int(config.get("metadata.log.max.snapshot.interval.ms")), clock.now_ms(),
                                      last_retention_ms=clock.now_ms())
        # Kafka's SnapshotEmitter and MetadataLoader metrics
        self.latest_generated_bytes = 0
        self.latest_generated_ms = clock.now_ms()
        """When the latest snapshot was written (from the node's start until the first)."""
        self.snapshots_loaded = 0
        """Snapshots this node started from or fetched from the controller."""

    def appended(self, encoded: list[bytes]) -> None:
        self._policy.appended(sum(len(data) for data in encoded))

    def load(self) -> tuple[LoadedLog, MetadataImage]:
        """Load the stored log; its image (the snapshot, then the records after it), whose
        records after the snapshot count towards the next one."""
        loaded = self._store.load()
        image = EMPTY_IMAGE if loaded.snapshot is None else snapshot_image(loaded.snapshot, loaded.snapshot_end)
        tail = [(offset, data) for offset, data in loaded.entries if offset >= loaded.snapshot_end]
        if tail:
            image = image.apply((decode(data) for _, data in tail), tail[-1][0])
        self.appended([data for _, data in tail])
        self.snapshots_loaded += loaded.snapshot is not None
        return loaded, image

    def installed(self) -> None:
        """The log restarted from a snapshot fetched from the controller: nothing appended since."""
        self._policy.taken(self._clock.now_ms())
        self.snapshots_loaded += 1

    async def snapshot_if_due(self, image: MetadataImage) -> int | None:
        """Snapshot `image` (of the whole log: nothing may be appended meanwhile) when due, on
        a worker thread, and apply retention, or only retention when `SnapshotPolicy` says so.
        Returns the log start offset after either, None if neither ran."""
        now = self._clock.now_ms()
        if not self._policy.due(now):
            if not self._policy.retention_due(now):
                return None
            return self._store.enforce_retention(self._max_retention_bytes, self._max_retention_ms)
        self._policy.taken(now)
        started = self._clock.monotonic_ms()
        end_offset = image.offset + 1
        size = await asyncio.to_thread(self._write, image, end_offset)
        self.latest_generated_bytes, self.latest_generated_ms = size, self._clock.now_ms()
        log_start = self._store.enforce_retention(self._max_retention_bytes, self._max_retention_ms)
        log.info("Wrote a metadata snapshot at offset %d (%d bytes) in %d ms; the metadata log starts at offset %d",
                 end_offset, size, self._clock.monotonic_ms() - started, log_start)
        return log_start

    def _write(self, image: MetadataImage, end_offset: int) -> int:
        return self._store.write_snapshot(end_offset, [encode(record) for record in snapshot_records(image)])

"""The `partition.metadata` file Kafka writes in each partition dir (topic id, KIP-516).

Exact text: `version: 0\\ntopic_id: <topic id>\\n`, the id in Kafka's `Uuid.toString`
form: URL-safe base64 of the 16 bytes without padding (22 characters).

A new log's file is written without an fsync and made durable later (`write_unsynced`, then
`maybe_flush`), as Kafka's `PartitionMetadataFile` defers its flush: creating a topic of
thousands of partitions then costs no fsync per partition. The flush runs on a worker thread
soon after the creation (`LogManager.flush_new_logs`) and always before the log's first flush,
so no durable record can outlive the topic id of its log. A process kill keeps the unsynced
file (page cache); a machine crash before the flush may leave it missing or empty, read as
absent (nothing in that directory was durable either), and the next start writes the topic
id of the metadata. The same flush syncs the new directory's entry in its log dir.
"""

from __future__ import annotations

import base64
import uuid

from kmirror.log.fs import FileSystem, dirname, join

PARTITION_METADATA_FILE = "partition.metadata"


class CorruptPartitionMetadataError(Exception):
    pass


def topic_id_to_string(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_string(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a topic id: {text!r}")
    return uuid.UUID(bytes=raw)


class PartitionMetadataFile:
    """The file of one partition directory. `maybe_flush` may run on a worker thread while the
    loop flushes or deletes the log: it only syncs (an fsync twice is harmless, and one of a
    file whose directory was renamed away meanwhile finds nothing), so it needs no lock."""

    def __init__(self, fs: FileSystem, partition_dir: str) -> None:
        self.fs = fs
        self.partition_dir = partition_dir
        self.path = join(partition_dir, PARTITION_METADATA_FILE)
        self._unsynced_file = False
        self._new_dir = False
        self._closed = False

    def write_unsynced(self, topic_id: uuid.UUID | None, new_dir: bool) -> None:
        """Write `topic_id` (if any) with no fsync, and remember what `maybe_flush` must make
        durable: that file and, with `new_dir`, the partition directory's entry in its parent."""
        if topic_id is not None:
            self.fs.write_file(self.path, _text(topic_id))
        self._unsynced_file = topic_id is not None
        self._new_dir = new_dir

    @property
    def dirty(self) -> bool:
        return self._unsynced_file or self._new_dir

    def maybe_flush(self, sync_parent: bool = True) -> str | None:
        """Make the unsynced file and the new directory durable: an fsync of the file (written
        whole at creation, one sector), of the partition directory, and with `sync_parent` of
        its parent; without it, returns the parent to sync (a caller flushing many logs syncs
        each log dir once). Nothing once `close`d or once the directory is gone (deleted)."""
        if self._closed or not self.dirty:
            return None
        parent = dirname(self.partition_dir) if self._new_dir else None
        try:
            if self._unsynced_file:
                self.fs.fsync(self.path)
                self.fs.close(self.path)
            self.fs.sync_dir(self.partition_dir)
        except FileNotFoundError:
            return None  # deleted meanwhile (renamed away)
        self._unsynced_file = self._new_dir = False
        if parent is not None and sync_parent:
            self.fs.sync_dir(parent)
            return None
        return parent

    def close(self) -> None:
        """Nothing more to sync (a deletion renames the directory next)."""
        self._closed = True

    def read(self) -> uuid.UUID | None:
        """The stored topic id; None when the file is missing or empty (see the module docstring)."""
        if not self.fs.exists(self.path) or self.fs.size(self.path) == 0:
            return None
        text = self.fs.read(self.path, 0, self.fs.size(self.path)).decode("utf-8", errors="replace")
        fields: dict[str, str] = {}
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        if fields.get("version") != "0" or "topic_id" not in fields:
            raise CorruptPartitionMetadataError(f"{self.path}: unexpected content {text!r}")
        try:
            return topic_id_from_string(fields["topic_id"])
        except ValueError as exc:
            raise CorruptPartitionMetadataError(f"{self.path}: {exc}") from None


def _text(topic_id: uuid.UUID) -> bytes:
    return f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}\n".encode()

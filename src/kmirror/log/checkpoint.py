"""Kafka's text checkpoint files, written atomically (tmp file, fsync, rename).

Format (Kafka `CheckpointFile`): line 1 the version `0`, line 2 the entry count, then one
entry per line, every line ending in `\\n`:
- `leader-epoch-checkpoint` in a partition dir: `<epoch> <start_offset>`;
- `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` (and
  `replication-offset-checkpoint`) in a log dir: `<topic> <partition> <offset>`.
A file that does not parse raises `CorruptCheckpointError` (Kafka fails the log dir).
"""

from __future__ import annotations

from collections.abc import Mapping

from kmirror.log.epoch_cache import EpochCache, EpochEntry
from kmirror.log.fs import FileSystem, join
from kmirror.types import TopicPartition

VERSION = 0
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"


class CorruptCheckpointError(Exception):
    pass


def format_lines(lines: list[str]) -> bytes:
    return "".join(f"{line}\n" for line in [str(VERSION), str(len(lines)), *lines]).encode()


def parse_lines(path: str, text: bytes) -> list[list[str]]:
    rows = text.decode("utf-8", errors="replace").split("\n")
    if rows and rows[-1] == "":
        rows.pop()
    if len(rows) < 2 or rows[0].strip() != str(VERSION):
        raise CorruptCheckpointError(f"{path}: unrecognised version or empty")
    try:
        count = int(rows[1])
    except ValueError:
        raise CorruptCheckpointError(f"{path}: bad entry count {rows[1]!r}") from None
    entries = [row.split() for row in rows[2:]]
    if count != len(entries):
        raise CorruptCheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


def write_atomically(fs: FileSystem, path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    fs.write_file(tmp, data)
    fs.fsync(tmp)
    fs.rename(tmp, path)


def _read(fs: FileSystem, path: str) -> bytes | None:
    if not fs.exists(path):
        return None
    return fs.read(path, 0, fs.size(path))


class LeaderEpochCheckpoint:
    """Persists an `EpochCache` as a partition's `leader-epoch-checkpoint`."""

    def __init__(self, fs: FileSystem, partition_dir: str) -> None:
        self.fs = fs
        self.path = join(partition_dir, LEADER_EPOCH_CHECKPOINT)
        # The file found at open may be an unsynced write of a process that was killed while
        # the page cache kept it: a power loss would still take it back. It is synced before the
        # recovery point first moves, as any unsynced write.
        self.unsynced = True

    def write(self, cache: EpochCache, *, sync: bool = True) -> None:
        """`sync=False` (an epoch a new leader or an append assigns): overwritten in place with
        no fsync, made durable by `sync` when the log's recovery point next moves, as Kafka's
        `LeaderEpochFileCache.assign` does not fsync either. Recovery re-reads the epochs of
        the batches past the recovery point, so a crash loses nothing the log needs; a torn
        file is reported by `read_or_none`. Truncations write synced."""
        data = format_lines([f"{e.epoch} {e.start_offset}" for e in cache.entries])
        if sync:
            write_atomically(self.fs, self.path, data)
        else:
            self.fs.write_file(self.path, data)
        self.unsynced = not sync

    def sync(self, cache: EpochCache) -> None:
        """Make an unsynced write durable (before the recovery point moves past its records)."""
        if self.unsynced:
            self.write(cache)

    def read_or_none(self) -> EpochCache | None:
        """The cache, or None when the file does not parse (a crash tore an unsynced write)."""
        try:
            return self.read()
        except CorruptCheckpointError:
            return None

    def read(self) -> EpochCache:
        text = _read(self.fs, self.path)
        if text is None:
            return EpochCache()
        entries: list[EpochEntry] = []
        for fields in parse_lines(self.path, text):
            if len(fields) != 2:
                raise CorruptCheckpointError(f"{self.path}: bad line {' '.join(fields)!r}")
            try:
                entries.append(EpochEntry(int(fields[0]), int(fields[1])))
            except ValueError:
                raise CorruptCheckpointError(f"{self.path}: bad line {' '.join(fields)!r}") from None
        return EpochCache(entries)


class OffsetCheckpoint:
    """A log dir's `topic partition offset` checkpoint (recovery point, log start offset)."""

    def __init__(self, fs: FileSystem, log_dir: str, name: str) -> None:
        self.fs = fs
        self.path = join(log_dir, name)

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        lines = [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
        write_atomically(self.fs, self.path, format_lines(lines))

    def read(self) -> dict[TopicPartition, int]:
        text = _read(self.fs, self.path)
        if text is None:
            return {}
        out: dict[TopicPartition, int] = {}
        for fields in parse_lines(self.path, text):
            if len(fields) != 3:
                raise CorruptCheckpointError(f"{self.path}: bad line {' '.join(fields)!r}")
            try:
                out[TopicPartition(fields[0], int(fields[1]))] = int(fields[2])
            except ValueError:
                raise CorruptCheckpointError(f"{self.path}: bad line {' '.join(fields)!r}") from None
        return out

"""`cleaner-offset-checkpoint`: per log dir, the first dirty offset of each compacted log.

Kafka's `CheckpointFile` text format (version 0, entry count, `<topic> <partition> <offset>`
lines), written atomically like the other log-dir checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping

from kmirror.log.checkpoint import OffsetCheckpoint
from kmirror.log.fs import FileSystem
from kmirror.types import TopicPartition

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


class CleanerOffsetCheckpoint:
    def __init__(self, fs: FileSystem, log_dir: str) -> None:
        self._file = OffsetCheckpoint(fs, log_dir, CLEANER_OFFSET_CHECKPOINT)

    @property
    def path(self) -> str:
        return self._file.path

    def read(self) -> dict[TopicPartition, int]:
        return self._file.read()

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._file.write(offsets)

"""The `partition.metadata` file Kafka writes in each partition dir (topic id, KIP-516).

Exact text: `version: 0\\ntopic_id: <topic id>\\n`, the id in Kafka's `Uuid.toString`
form: URL-safe base64 of the 16 bytes without padding (22 characters).
"""

from __future__ import annotations

import base64
import uuid

from kmirror.log.checkpoint import write_atomically
from kmirror.log.fs import FileSystem, join

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
    def __init__(self, fs: FileSystem, partition_dir: str) -> None:
        self.fs = fs
        self.path = join(partition_dir, PARTITION_METADATA_FILE)

    def write(self, topic_id: uuid.UUID) -> None:
        text = f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}\n"
        write_atomically(self.fs, self.path, text.encode())

    def read(self) -> uuid.UUID | None:
        if not self.fs.exists(self.path):
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

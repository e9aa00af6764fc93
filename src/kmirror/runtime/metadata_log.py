"""The metadata log on disk: `<log dir>/__cluster_metadata-0/00000000000000000000.log`.

One Kafka RecordBatch v2 per append (values are encoded metadata records, keys null), written
and fsynced before `append` returns. Opening recovers: the file is cut back to its longest
prefix of whole, CRC-valid batches (a torn tail from a crash). `meta.properties` in the log
dir records the node's identity (Kafka's MetaProperties v1) and is checked on every start.
"""

from __future__ import annotations

import base64
import logging
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from kmirror.config.properties import parse_properties
from kmirror.records.batch import valid_prefix
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.records.record import decode_records
from kmirror.runtime.log_dir_failure import hand_over

log = logging.getLogger(__name__)

METADATA_PARTITION_DIR = "__cluster_metadata-0"
SEGMENT_NAME = "00000000000000000000.log"
META_PROPERTIES = "meta.properties"


class MetaPropertiesError(RuntimeError):
    """This log dir belongs to another node or cluster; str() is one line."""


class FileMetadataLogStore:
    def __init__(self, log_dir: str | Path, now_ms: Callable[[], int] | None = None,
                 on_failure: Callable[[str, OSError], NoReturn] | None = None) -> None:
        """`on_failure`: called when the storage refuses a write (`log_dir_failure`); it halts
        the node, so that the next record is never appended after a torn one."""
        self._on_failure = on_failure
        self._log_dir = Path(log_dir)
        self._dir = self._log_dir / METADATA_PARTITION_DIR
        self._path = self._dir / SEGMENT_NAME
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._next_offset = 0
        self._file_size = 0

    @property
    def path(self) -> Path:
        return self._path

    def read_all(self) -> list[tuple[int, bytes]]:
        """Recover (truncate a torn tail) and return every stored record."""
        self._dir.mkdir(parents=True, exist_ok=True)
        if not self._path.exists():
            self._path.touch()
            _fsync_dir(self._dir)
        data = self._path.read_bytes()
        n_valid, headers = valid_prefix(data)
        if n_valid < len(data):
            log.warning("Found invalid batches in the metadata log %s: %d bytes truncated, the log ends at offset %d "
                        "(a write cut short by a crash or a failed disk)", self._path, len(data) - n_valid,
                        headers[-1].next_offset if headers else 0)
            with open(self._path, "r+b") as f:
                f.truncate(n_valid)
                f.flush()
                os.fsync(f.fileno())
        out: list[tuple[int, bytes]] = []
        pos = 0
        for header in headers:
            for rec in decode_records(data, pos):
                if rec.value is not None:
                    out.append((rec.offset, rec.value))
            pos += header.size
        self._next_offset = headers[-1].next_offset if headers else 0
        self._file_size = n_valid
        return out

    def append(self, encoded: list[bytes]) -> int:
        if not encoded:
            return self._next_offset - 1
        now = self._now_ms()
        batch = build_batch([SimpleRecord(None, value, (), now) for value in encoded], base_offset=self._next_offset)
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            with open(self._path, "ab") as f:
                f.write(batch)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            hand_over(exc, str(self._path), self._on_failure)
        self._next_offset += len(encoded)
        self._file_size += len(batch)
        return self._next_offset - 1

    def bind(self, cluster_id: str, node_id: int) -> None:
        ensure_meta_properties(self._log_dir, cluster_id, node_id)


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
    _fsync_dir(directory)
    return props


def _directory_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

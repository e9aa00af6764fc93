"""Reading a segment's batches in I/O-buffer-sized chunks for the cleaner (Kafka reads
`log.cleaner.io.buffer.size` at a time and grows the buffer for a larger batch)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from numba import njit  # type: ignore[import-untyped]

from kmirror.log.segment import LogSegment
from kmirror.records.batch import RECORD_BATCH_OVERHEAD, BatchHeader, CorruptRecordError, read_header
from kmirror.records.record_scan import B_ATTRIBUTES, B_COUNT, B_POS, BATCH_FIELDS, walk_batches

# Compression codec, transactional and control flags: batches without any are "plain".
_NOT_PLAIN = 0x37


@dataclass(slots=True)
class Chunk:
    """Whole batches read at once: `headers[B_FIELD, i]` (`record_scan.walk_batches`) of
    the `n` batches in data[:size] (`buf` views the same bytes; past `size` lies the start of
    a batch the next chunk reads whole, left there rather than copied away). `headers` is reused by the next
    chunk of the same iteration: a chunk is used before the next is asked for."""

    data: bytes
    size: int
    buf: np.ndarray
    headers: np.ndarray
    n: int
    all_plain: bool  # no batch compressed, transactional or control: the compiled paths take it whole
    records: int
    max_records: int

    def batches(self) -> list[tuple[int, BatchHeader]]:
        """(position, parsed header) of each batch, for the per-batch paths."""
        return [(int(pos), read_header(self.data, int(pos))) for pos in self.headers[B_POS, :self.n]]


def iter_chunks(segment: LogSegment, start_position: int, chunk_size: int, check: Callable[[], None]
                ) -> Iterator[Chunk]:
    """The whole batches from `start_position` to the segment's end, a chunk at a time.
    `check` runs before every read (it raises when the segment went away between two
    steps). A torn or malformed batch raises `CorruptRecordError` (the log was recovered at
    load: this is a broken disk)."""
    fs, path = segment.fs, segment.log_path
    end = segment.size
    position = start_position
    headers = np.empty((BATCH_FIELDS, max(chunk_size // RECORD_BATCH_OVERHEAD, 1)), dtype=np.int64)
    while position < end:
        check()
        chunk = fs.read(path, position, min(chunk_size, end - position))
        buf = np.frombuffer(chunk, dtype=np.uint8)
        n, offset = walk_batches(buf, 0, len(chunk), headers)
        if n == 0:
            header = read_header(fs.read(path, position, RECORD_BATCH_OVERHEAD))
            if position + header.size > end:
                raise CorruptRecordError(f"{path}: batch at {position} extends past the segment end")
            chunk = fs.read(path, position, header.size)
            buf = np.frombuffer(chunk, dtype=np.uint8)
            n, offset = walk_batches(buf, 0, len(chunk), headers)
            if n != 1:
                raise CorruptRecordError(f"{path}: malformed batch at {position}")
        all_plain, records, max_records = summarize(headers, n)
        yield Chunk(chunk, int(offset), buf, headers, int(n), bool(all_plain), int(records), int(max_records))
        position += offset


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def summarize(headers: np.ndarray, n: int) -> tuple[bool, int, int]:
    """(no batch compressed, transactional or control; records; most records in one batch)
    of the `n` batches of `headers`, in one call per chunk."""
    plain = True
    records = most = 0
    for b in range(n):
        count = headers[B_COUNT, b]
        records += count
        most = max(most, count)
        if headers[B_ATTRIBUTES, b] & _NOT_PLAIN:
            plain = False
    return plain, records, most

"""Reading a segment's batches in I/O-buffer-sized chunks for the cleaner (Kafka reads
`log.cleaner.io.buffer.size` at a time and grows the buffer for a larger batch)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kmirror.log.segment import LogSegment
from kmirror.records.batch import RECORD_BATCH_OVERHEAD, BatchHeader, CorruptRecordError, read_header


def iter_chunks(segment: LogSegment, start_position: int, chunk_size: int, check: Callable[[], None]
                ) -> Iterator[tuple[bytes, list[tuple[int, BatchHeader]]]]:
    """(chunk bytes, [(position in chunk, header)]) of whole batches from `start_position`
    to the segment's end. `check` runs before every read (it raises when the segment went
    away between two steps). A torn or malformed batch raises `CorruptRecordError` (the log
    was recovered at load: this is a broken disk)."""
    fs, path = segment.fs, segment.log_path
    end = segment.size
    position = start_position
    while position < end:
        check()
        chunk = fs.read(path, position, min(chunk_size, end - position))
        batches: list[tuple[int, BatchHeader]] = []
        offset = 0
        while len(chunk) - offset >= RECORD_BATCH_OVERHEAD:
            header = read_header(chunk, offset)
            if offset + header.size > len(chunk):
                break
            batches.append((offset, header))
            offset += header.size
        if not batches:
            header = read_header(fs.read(path, position, RECORD_BATCH_OVERHEAD))
            if position + header.size > end:
                raise CorruptRecordError(f"{path}: batch at {position} extends past the segment end")
            chunk = fs.read(path, position, header.size)
            batches, offset = [(0, header)], header.size
        yield chunk[:offset], batches
        position += offset

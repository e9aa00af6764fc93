"""Kafka RecordBatch v2 headers: parse, walk, verify and patch batches in place.

Layout (big-endian, 61 bytes, Kafka `DefaultRecordBatch`):

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordsCount int32

`batchLength` counts the bytes after itself, so a batch occupies `batchLength + 12` bytes.
The CRC32C covers `attributes` to the end of the batch; `baseOffset`, `batchLength` and
`partitionLeaderEpoch` are outside it, which is why a leader can assign offsets and epochs
without recomputing the CRC. Everything here accepts `bytes`, `bytearray` or `memoryview`
and never copies a batch body.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final, NamedTuple

from crc32c import crc32c

Buffer = bytes | bytearray | memoryview

HEADER_STRUCT: Final = struct.Struct(">qiibIhiqqqhii")
RECORD_BATCH_OVERHEAD: Final = HEADER_STRUCT.size  # 61
LOG_OVERHEAD: Final = 12  # baseOffset + batchLength: bytes not counted by batchLength
MAGIC_V2: Final = 2

BASE_OFFSET_OFFSET: Final = 0
LENGTH_OFFSET: Final = 8
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
MAX_TIMESTAMP_OFFSET: Final = 35

COMPRESSION_CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_FLAG_MASK: Final = 0x10
CONTROL_FLAG_MASK: Final = 0x20
DELETE_HORIZON_FLAG_MASK: Final = 0x40

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
NO_TIMESTAMP: Final = -1

_INT32_MAX: Final = 2**31 - 1
_INT64: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")
_INT16: Final = struct.Struct(">h")
# Legacy MessageSet entries (magic 0/1): offset int64, size int32, crc uint32, magic int8.
_LEGACY_PREFIX: Final = struct.Struct(">qiIb")


class CorruptRecordError(Exception):
    """Bytes that are not a well-formed record batch (Kafka's CorruptRecordException)."""


class UnsupportedMagicError(CorruptRecordError):
    """A batch whose magic is not 2: a legacy MessageSet (0/1) or garbage."""

    def __init__(self, magic: int, pos: int) -> None:
        super().__init__(f"unsupported record batch magic {magic} at position {pos}")
        self.magic = magic
        self.pos = pos


class BatchHeader(NamedTuple):
    """The v2 batch header (`HEADER_STRUCT`), a value. A named tuple, not a frozen
    dataclass: one is built for every batch read, several times per batch on the produce,
    fetch and mirror paths, and a 13-field frozen dataclass costs several times as much to
    build."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime (Kafka's TimestampType ids)."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """When set (compacted logs), `base_timestamp` holds the delete horizon."""
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from int32 max to 0 as in Kafka."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's `DefaultRecordBatch.incrementSequence`: int32 sequences wrap to 0."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def read_header(buf: Buffer, pos: int = 0, *, require_v2: bool = True) -> BatchHeader:
    """Parse the batch header at `pos`.

    Raises `CorruptRecordError` when fewer header bytes than needed remain or the declared
    length is below the v2 header size, and `UnsupportedMagicError` for magic != 2. With
    `require_v2=False` a legacy (magic 0/1) entry is returned with only `base_offset`,
    `batch_length`, `crc` and `magic` meaningful, so callers can report it as Kafka does.
    The batch body is not checked to be complete; see `iter_batches`.
    """
    available = len(buf) - pos
    if available < MAGIC_OFFSET + 1:
        raise CorruptRecordError(f"truncated batch header at position {pos}")
    magic = buf[pos + MAGIC_OFFSET]
    if magic >= 128:
        magic -= 256
    if magic != MAGIC_V2:
        if require_v2 or magic not in (0, 1) or available < _LEGACY_PREFIX.size:
            raise UnsupportedMagicError(magic, pos)
        offset, size, crc, _ = _LEGACY_PREFIX.unpack_from(buf, pos)
        return BatchHeader(offset, size, NO_PARTITION_LEADER_EPOCH, magic, crc, 0, 0,
                           NO_TIMESTAMP, NO_TIMESTAMP, NO_PRODUCER_ID, NO_PRODUCER_EPOCH,
                           NO_SEQUENCE, 1)
    if available < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(f"truncated batch header at position {pos}")
    header = BatchHeader._make(HEADER_STRUCT.unpack_from(buf, pos))
    if header.size < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"batch length {header.batch_length} at position {pos} is smaller than the header")
    return header


def iter_batches(buf: Buffer, *, allow_truncated_tail: bool = False) -> Iterator[tuple[int, BatchHeader]]:
    """Yield `(position, header)` for each v2 batch in `buf`, in order.

    Strict: a batch extending past the end of `buf` raises `CorruptRecordError`, unless
    `allow_truncated_tail` (a Fetch response may end in a partial batch cut at max_bytes,
    which Kafka consumers skip). CRCs are not checked here; see `crc_ok`.
    """
    end = len(buf)
    pos = 0
    while pos < end:
        if allow_truncated_tail and end - pos < RECORD_BATCH_OVERHEAD:
            return
        header = read_header(buf, pos)
        if pos + header.size > end:
            if allow_truncated_tail:
                return
            raise CorruptRecordError(
                f"batch at position {pos} needs {header.size} bytes, {end - pos} remain")
        yield pos, header
        pos += header.size


def cut_within_first_batch(buf: Buffer) -> bool:
    """True when `buf` is a non-empty prefix of one v2 batch ending before the batch does:
    what a Fetch answer holds for a partition whose share of the response ran out inside its
    first batch. Bytes that cannot start a v2 batch are not a cut batch."""
    if len(buf) == 0:
        return False
    if len(buf) <= MAGIC_OFFSET:
        return True
    if buf[MAGIC_OFFSET] != MAGIC_V2:
        return False
    if len(buf) < RECORD_BATCH_OVERHEAD:
        return True
    # The batch length alone (no header object: this runs for every partition of a Fetch answer).
    size = _INT32.unpack_from(buf, LENGTH_OFFSET)[0] + LOG_OVERHEAD
    return RECORD_BATCH_OVERHEAD <= size and size > len(buf)


def valid_prefix(buf: Buffer) -> tuple[int, list[BatchHeader]]:
    """Length of the longest prefix of whole, CRC-valid v2 batches, and their headers.

    Crash recovery (Kafka `LogSegment.recover`): everything from the first truncated,
    malformed, non-v2 or bad-CRC batch onwards is a torn tail to truncate.
    """
    headers: list[BatchHeader] = []
    end = len(buf)
    pos = 0
    while pos < end:
        try:
            header = read_header(buf, pos)
        except CorruptRecordError:
            break
        if pos + header.size > end or not crc_ok(buf, pos, header):
            break
        headers.append(header)
        pos += header.size
    return pos, headers


def compute_crc(buf: Buffer, pos: int = 0, header: BatchHeader | None = None) -> int:
    """CRC32C of the batch at `pos` over attributes..end (what the header's crc must equal)."""
    if header is None:
        header = read_header(buf, pos)
    view = memoryview(buf)
    return int(crc32c(view[pos + ATTRIBUTES_OFFSET:pos + header.size]))


def crc_ok(buf: Buffer, pos: int = 0, header: BatchHeader | None = None) -> bool:
    """True when the stored CRC matches the batch bytes (which must be complete in `buf`)."""
    if header is None:
        header = read_header(buf, pos)
    if pos + header.size > len(buf):
        return False
    return compute_crc(buf, pos, header) == header.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign the batch's base offset (outside the CRC: no recomputation)."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch that appended the batch (outside the CRC)."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with `timestamp_ms` as max timestamp, then fix the CRC.

    Kafka's LogValidator does this for topics with message.timestamp.type=LogAppendTime:
    record timestamps stay as sent; readers take the batch's max timestamp instead.
    """
    header = read_header(buf, pos)
    attributes = header.attributes | TIMESTAMP_TYPE_MASK
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    write_crc(buf, pos, header)


def write_crc(buf: bytearray | memoryview, pos: int = 0, header: BatchHeader | None = None) -> int:
    """Recompute and store the CRC of the batch at `pos`; returns it."""
    crc = compute_crc(buf, pos, header)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
    return crc

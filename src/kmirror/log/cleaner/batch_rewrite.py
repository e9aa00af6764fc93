"""How a retained batch is written by the cleaner (Kafka `MemoryRecords.filterTo`).

- every record kept and no delete horizon to set: the batch is copied byte for byte;
- otherwise the batch is rebuilt: base offset, last offset delta (so the producer's last
  sequence survives, Kafka `overrideLastOffset`), partition leader epoch, producer id,
  epoch and base sequence, timestamp type, transactional and control flags and the
  compression codec are kept; the kept records' bytes are copied unchanged (their offset
  and timestamp deltas stay valid because the base offset and base timestamp are kept)
  and recompressed with the batch's codec at Kafka's default level. When a delete horizon
  is set (KIP-534: the batch holds a tombstone or an empty transaction's marker) the base
  timestamp becomes the horizon, the DELETE_HORIZON attribute is set and each record's
  timestamp delta is re-encoded against it. The max timestamp is the kept records' largest
  (LogAppendTime batches keep theirs). The CRC is recomputed.
- a batch with no record kept that must stay (the last batch of an active producer, or the
  round's last batch) becomes an empty batch header (Kafka `writeEmptyHeader`).

The kept records' bytes come from `record_filter.write_kept` (compiled); this module frames
them for the per-batch path (compressed, transactional and control batches).
`record_filter.filter_chunk` applies the same rules to whole chunks of plain batches.
"""

from __future__ import annotations

from kmirror.records.batch import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_STRUCT,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    Buffer,
    write_crc,
)
from kmirror.records.compression import compress, decompress


def records_of(buf: Buffer, pos: int, header: BatchHeader) -> bytes | memoryview:
    body = memoryview(buf)[pos + RECORD_BATCH_OVERHEAD:pos + header.size]
    return body if header.compression == 0 else decompress(header.compression, body)


def rebuild_batch(header: BatchHeader, body: bytes, kept: int, max_timestamp_delta: int,
                  delete_horizon_ms: int | None) -> bytes:
    """The retained form of a batch whose `kept` records (at least one) are `body`, as
    `record_filter.write_kept` wrote them (timestamp deltas re-encoded against the horizon
    when one is set); `max_timestamp_delta` is the kept records' largest original delta."""
    attributes = header.attributes
    base_timestamp = header.base_timestamp
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
        attributes |= DELETE_HORIZON_FLAG_MASK
    if header.timestamp_type == 1:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = header.base_timestamp + max_timestamp_delta
    codec = header.attributes & COMPRESSION_CODEC_MASK
    if codec:
        body = compress(codec, body)
    buf = bytearray(RECORD_BATCH_OVERHEAD + len(body))
    HEADER_STRUCT.pack_into(
        buf, 0, header.base_offset, len(buf) - 12, header.partition_leader_epoch, MAGIC_V2, 0, attributes,
        header.last_offset_delta, base_timestamp, max_timestamp, header.producer_id, header.producer_epoch,
        header.base_sequence, kept)
    buf[RECORD_BATCH_OVERHEAD:] = body
    write_crc(buf)
    return bytes(buf)


def empty_batch(header: BatchHeader) -> bytes:
    """Kafka `DefaultRecordBatch.writeEmptyHeader`: no records, no compression, the base
    and last offsets, producer fields, epoch and flags of `header`; both timestamps are its
    max timestamp."""
    attributes = header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK)
    buf = bytearray(RECORD_BATCH_OVERHEAD)
    HEADER_STRUCT.pack_into(
        buf, 0, header.base_offset, RECORD_BATCH_OVERHEAD - 12, header.partition_leader_epoch, MAGIC_V2, 0,
        attributes, header.last_offset_delta, header.max_timestamp, header.max_timestamp, header.producer_id,
        header.producer_epoch, header.base_sequence, 0)
    write_crc(buf)
    return bytes(buf)



"""Build RecordBatch v2 bytes (producers, the metadata log, coordinators, tests).

The broker never rebuilds a batch it received; this is only for batches it originates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kmirror.records.batch import (
    CONTROL_FLAG_MASK,
    HEADER_STRUCT,
    MAGIC_V2,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    write_crc,
)
from kmirror.records.compression import compress
from kmirror.records.record import Header, encode_record


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """A record to build: Kafka's SimpleRecord (offsets are assigned by the batch)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp: int = NO_TIMESTAMP


RecordInput = SimpleRecord | tuple[bytes | None, bytes | None, Sequence[Header], int]


def build_batch(records: Sequence[RecordInput], *, compression: int = 0, base_offset: int = 0,
                partition_leader_epoch: int = -1, producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1, is_transactional: bool = False, is_control: bool = False,
                timestamp_type: int = 0, now_ms: int | None = None) -> bytes:
    """A v2 batch holding `records` (offset deltas 0..n-1) with a correct CRC.

    Records are `SimpleRecord`s or `(key, value, headers, timestamp)` tuples. A record
    timestamp of -1 takes `now_ms` (required then), as a producer stamps CreateTime.
    With `timestamp_type=1` (LogAppendTime) the max timestamp is `now_ms` when given.
    An empty `records` is refused: Kafka never writes an empty batch from a producer.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    normalized = [r if isinstance(r, SimpleRecord) else SimpleRecord(r[0], r[1], tuple(r[2]), r[3])
                  for r in records]
    timestamps = []
    for record in normalized:
        if record.timestamp >= 0:
            timestamps.append(record.timestamp)
        elif now_ms is not None:
            timestamps.append(now_ms)
        else:
            raise ValueError("record without timestamp and no now_ms given")
    base_timestamp = timestamps[0]
    body = b"".join(encode_record(i, ts - base_timestamp, r.key, r.value, r.headers)
                    for i, (r, ts) in enumerate(zip(normalized, timestamps, strict=True)))
    max_timestamp = max(timestamps)
    if timestamp_type == 1 and now_ms is not None:
        max_timestamp = now_ms
    return build_batch_from_records(
        body, len(normalized), base_timestamp=base_timestamp, max_timestamp=max_timestamp, compression=compression,
        base_offset=base_offset, partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, is_transactional=is_transactional,
        is_control=is_control, timestamp_type=timestamp_type)


def build_batch_from_records(records: bytes | bytearray | memoryview, record_count: int, *, base_timestamp: int,
                             max_timestamp: int, compression: int = 0, base_offset: int = 0,
                             partition_leader_epoch: int = -1, producer_id: int = -1, producer_epoch: int = -1,
                             base_sequence: int = -1, is_transactional: bool = False, is_control: bool = False,
                             timestamp_type: int = 0) -> bytes:
    """A v2 batch around an already encoded (uncompressed) records section of
    `record_count` records with offset deltas 0..n-1, compressed here with `compression`."""
    if record_count <= 0:
        raise ValueError("a record batch needs at least one record")
    body = compress(compression, records) if compression else records
    attributes = compression & 0x07
    if timestamp_type == 1:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    buf = bytearray(HEADER_STRUCT.size + len(body))
    HEADER_STRUCT.pack_into(
        buf, 0, base_offset, len(buf) - 12, partition_leader_epoch, MAGIC_V2, 0, attributes,
        record_count - 1, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
        record_count)
    buf[HEADER_STRUCT.size:] = body
    write_crc(buf)
    return bytes(buf)

"""What a leader checks on produced records before appending them (Kafka's
`ProduceRequest.validateRecords`, `UnifiedLog.analyzeAndValidateRecords` and `LogValidator`).

The outcome is a value: `ValidatedRecords` or `InvalidRecords(error, message, record_errors)`,
mapped to the partition's error code at the handler. Checks, in Kafka's order:

1. The request holds exactly one batch and it is magic 2 (Produce v3+): none, legacy magic
   0/1 or a second whole batch -> INVALID_RECORD. Kafka ignores (trims) a trailing partial
   batch; `valid_bytes` says how much to append.
2. Batch size > max.message.bytes -> MESSAGE_TOO_LARGE; total > segment.bytes ->
   RECORD_LIST_TOO_LARGE; bad CRC, unknown magic or garbage length -> CORRUPT_MESSAGE.
3. Batch rules for client writes: lastOffsetDelta + 1 == recordsCount > 0, not a control
   batch, a producer id implies baseSequence >= 0 -> else INVALID_RECORD; zstd needs
   Produce v7+ -> UNSUPPORTED_COMPRESSION_TYPE.
4. Records: a compacted topic needs keys (INVALID_RECORD); CreateTime timestamps must lie in
   [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms] and producers
   may not claim LogAppendTime (INVALID_TIMESTAMP); errors are reported per record index.

Compressed batches are decompressed, at most DECOMPRESSION_RATIO_BOUND times
`max.message.bytes` of output (more fails with RECORD_LIST_TOO_LARGE as soon as the cap is
passed: a decompression bomb costs bounded memory and time; Kafka bounds neither, and accepts
any batch whose compressed size fits, see docs/design/protocol.md "Decompressed size of
produced batches"), and every inner record's layout walked (`record_walk`: keys, values and
headers skipped, as Kafka's skipKeyValueIterator): the record count must match and inner offset
deltas must be 0..n-1. Kafka would *rebuild* a batch whose inner offsets are
not consecutive, or recompress to a topic `compression.type` differing from the producer's;
kmirror never re-encodes (stored bytes are exactly the producer's, which byte-exact mirroring
relies on), so non-consecutive inner offsets are INVALID_RECORD and `compression.type` is
treated as "producer".

Uncompressed batches are CRC-checked; their records are walked (framing, offset deltas,
timestamps, key presence — not the header contents) only when a rule needs them: finite
timestamp bounds or a compacted topic. With Kafka's defaults (unbounded timestamps, delete
policy) the CRC and header checks are all that apply, and a 1 MiB batch is validated at
CRC32C speed instead of walking its records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
from kio.schema.errors import ErrorCode

from kmirror.records import record_walk
from kmirror.records.batch import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Buffer,
    CorruptRecordError,
    UnsupportedMagicError,
    crc_ok,
    read_header,
)
from kmirror.records.compression import CompressionType, DecompressedTooLarge
from kmirror.records.record import InvalidRecordError, records_section

# A compressed batch may decompress to this many times max.message.bytes (64 MiB with Kafka's
# default): past what real producers' batches reach with real data (a producer's batch.size
# bounds the compressed size, so a well-compressing batch of 1 MiB can hold tens of MiB of
# records), short of what a bomb would cost the event loop.
DECOMPRESSION_RATIO_BOUND: Final = 64

UNBOUNDED_MS: Final = 2**63 - 1  # Kafka's default message.timestamp.before/after.max.ms
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_LOG_APPEND_TIME: Final = "LogAppendTime"
_MIN_ZSTD_PRODUCE_VERSION: Final = 7


@dataclass(frozen=True, slots=True)
class ValidBatch:
    position: int
    header: BatchHeader
    records_count: int
    max_timestamp: int  # largest record timestamp (-1 if none), before any LogAppendTime stamping
    offset_delta_of_max_timestamp: int


@dataclass(frozen=True, slots=True)
class ValidatedRecords:
    batches: tuple[ValidBatch, ...]
    valid_bytes: int  # append records[:valid_bytes]; anything after is a trimmed partial batch

    @property
    def records_count(self) -> int:
        return sum(b.records_count for b in self.batches)


@dataclass(frozen=True, slots=True)
class RecordError:
    """One rejected record (ProduceResponse v8+ `record_errors`)."""

    batch_index: int
    message: str


@dataclass(frozen=True, slots=True)
class InvalidRecords:
    error: ErrorCode
    message: str
    record_errors: tuple[RecordError, ...] = ()


ValidationOutcome = ValidatedRecords | InvalidRecords


def validate_for_append(records: Buffer, *, max_message_bytes: int, now_ms: int,
                        message_timestamp_type: str = "CreateTime",
                        timestamp_before_max_ms: int = UNBOUNDED_MS,
                        timestamp_after_max_ms: int = UNBOUNDED_MS,
                        compacted: bool = False, segment_bytes: int | None = None,
                        produce_version: int | None = None) -> ValidationOutcome:
    """Validate one partition's produced records; never modifies `records`."""
    try:
        header = read_header(records, 0)
    except UnsupportedMagicError as error:
        if error.magic in (0, 1):
            return InvalidRecords(ErrorCode.invalid_record,
                                  "Produce requests are only allowed to contain record batches with magic version 2")
        return InvalidRecords(ErrorCode.corrupt_message, str(error))
    except CorruptRecordError as error:
        if _declared_size(records, 0) > len(records):
            # Kafka's batch iterator yields nothing for a partial batch.
            return InvalidRecords(ErrorCode.invalid_record, "Produce requests must have at least one record batch")
        return InvalidRecords(ErrorCode.corrupt_message, str(error))
    if header.size > len(records):
        return InvalidRecords(ErrorCode.invalid_record, "Produce requests must have at least one record batch")
    trailing = _check_trailing(records, header.size)
    if trailing is not None:
        return trailing

    if header.size > max_message_bytes:
        return InvalidRecords(ErrorCode.message_too_large,
                              f"record batch of {header.size} bytes exceeds max.message.bytes {max_message_bytes}")
    if segment_bytes is not None and header.size > segment_bytes:
        return InvalidRecords(ErrorCode.record_list_too_large,
                              f"records of {header.size} bytes exceed segment.bytes {segment_bytes}")
    if not crc_ok(records, 0, header):
        return InvalidRecords(ErrorCode.corrupt_message, "record batch CRC does not match its contents")

    batch_error = _check_batch(header, produce_version)
    if batch_error is not None:
        return batch_error
    try:
        return _check_records(records, header, now_ms, message_timestamp_type == _LOG_APPEND_TIME,
                              timestamp_before_max_ms, timestamp_after_max_ms, compacted,
                              max_message_bytes * DECOMPRESSION_RATIO_BOUND)
    except DecompressedTooLarge as error:
        return InvalidRecords(ErrorCode.record_list_too_large,
                              f"{error}: the decompressed size is bounded by {DECOMPRESSION_RATIO_BOUND} times "
                              "max.message.bytes")
    except InvalidRecordError as error:
        return InvalidRecords(ErrorCode.invalid_record, str(error))
    except CorruptRecordError as error:
        return InvalidRecords(ErrorCode.corrupt_message, str(error))


def _check_trailing(records: Buffer, first_size: int) -> InvalidRecords | None:
    remaining = len(records) - first_size
    if remaining < 17:
        return None  # Kafka's batch iterator stops silently on a partial header
    try:
        next_header = read_header(records, first_size, require_v2=False)
    except UnsupportedMagicError as error:
        if error.magic in (0, 1):
            return None  # too short for even a legacy entry: a partial tail
        return InvalidRecords(ErrorCode.corrupt_message, str(error))
    except CorruptRecordError:
        if _declared_size(records, first_size) > remaining:
            return None
        return InvalidRecords(ErrorCode.corrupt_message, "invalid record batch length after the first batch")
    if next_header.size <= remaining:
        return InvalidRecords(ErrorCode.invalid_record,
                              "Produce requests are only allowed to contain exactly one record batch")
    return None


def _declared_size(records: Buffer, pos: int) -> int:
    """Bytes the entry at `pos` claims (length field + 12); a partial length field claims more
    than remains. A claim below the v2 header size is garbage, not a partial batch."""
    if len(records) - pos < 12:
        return len(records) - pos + 1
    size = int.from_bytes(records[pos + 8:pos + 12], "big", signed=True) + 12
    return size if size >= 61 else -1


def _check_batch(header: BatchHeader, produce_version: int | None) -> InvalidRecords | None:
    count_from_offsets = header.last_offset_delta + 1
    if count_from_offsets <= 0:
        return InvalidRecords(ErrorCode.invalid_record,
                              f"Batch has an invalid offset range: last offset delta {header.last_offset_delta}")
    if header.records_count <= 0:
        return InvalidRecords(ErrorCode.invalid_record,
                              f"Invalid reported count for record batch: {header.records_count}")
    if count_from_offsets != header.records_count:
        return InvalidRecords(ErrorCode.invalid_record,
                              f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of "
                              f"records {header.records_count}")
    if header.is_control:
        return InvalidRecords(ErrorCode.invalid_record, "Clients are not allowed to write control records")
    if header.has_producer_id and header.base_sequence < 0:
        return InvalidRecords(ErrorCode.invalid_record,
                              f"Invalid sequence number {header.base_sequence} in record batch with producerId "
                              f"{header.producer_id}")
    if header.compression > CompressionType.ZSTD:
        return InvalidRecords(ErrorCode.corrupt_message, f"unknown compression codec id {header.compression}")
    if (header.compression == CompressionType.ZSTD and produce_version is not None
            and produce_version < _MIN_ZSTD_PRODUCE_VERSION):
        return InvalidRecords(ErrorCode.unsupported_compression_type,
                              "Produce requests with version < 7 are not allowed to use ZStandard compression")
    return None


def _check_records(records: Buffer, header: BatchHeader, now_ms: int, log_append_time_topic: bool,
                   before_max_ms: int, after_max_ms: int, compacted: bool,
                   max_decompressed_bytes: int) -> ValidationOutcome:
    bounded = before_max_ms < UNBOUNDED_MS or after_max_ms < UNBOUNDED_MS
    producer_log_append_time = header.timestamp_type == 1
    # For a LogAppendTime batch every record's timestamp reads as the batch max timestamp.
    check_each_timestamp = not log_append_time_topic and not producer_log_append_time and bounded

    if header.compression != CompressionType.NONE:
        section = records_section(records, 0, header, max_decompressed_bytes)
        walked = record_walk.walk(section, 0, len(section), header.records_count)
    elif compacted or (check_each_timestamp and before_max_ms < UNBOUNDED_MS):
        walked = record_walk.walk(records, RECORD_BATCH_OVERHEAD, header.size, header.records_count)
    else:
        # Only the "after" bound is finite (Kafka 4 defaults: before unbounded, after 1 hour):
        # the batch's max timestamp decides it, so an uncompressed batch is not walked. A producer
        # that understates max_timestamp can store a future timestamp; nothing else depends on it.
        walked = None
        if (check_each_timestamp and header.max_timestamp != -1
                and _out_of_range(header.max_timestamp, now_ms, before_max_ms, after_max_ms)):
            return InvalidRecords(
                ErrorCode.invalid_timestamp,
                "One or more records have been rejected due to invalid timestamp",
                (RecordError(header.last_offset_delta, f"Timestamp {header.max_timestamp} is out of range. The "
                             f"timestamp should be at most {now_ms + after_max_ms}"),),
            )

    errors: list[RecordError] = []
    timestamp_error = False
    max_timestamp, max_delta = header.max_timestamp, header.last_offset_delta
    if walked is not None:
        timestamp_deltas, null_keys = walked  # the inner offset deltas were 0, 1, 2, ...
        # int64 arithmetic, as Kafka's `baseTimestamp + timestampDelta` in a Java long
        timestamps = timestamp_deltas + np.int64(header.base_timestamp)
        keyless = null_keys if compacted else np.zeros(len(timestamps), dtype=np.bool_)
        out_of_range = np.zeros(len(timestamps), dtype=np.bool_)
        if check_each_timestamp:
            earliest, latest = now_ms - before_max_ms, now_ms + after_max_ms
            if earliest > _INT64_MIN:
                out_of_range |= timestamps < earliest
            if latest < _INT64_MAX:
                out_of_range |= timestamps > latest
            out_of_range &= (timestamps != -1) & ~keyless
        for index in np.flatnonzero(keyless | out_of_range).tolist():
            if keyless[index]:
                errors.append(RecordError(index, "Compacted topic cannot accept message without key"))
            else:
                timestamp_error = True
                errors.append(RecordError(index, f"Timestamp {int(timestamps[index])} of message with offset delta "
                                                 f"{index} is out of range. The timestamp should be within "
                                                 f"[{now_ms - before_max_ms}, {now_ms + after_max_ms}]"))
        newest = int(np.argmax(timestamps))  # the first of the largest, as Kafka keeps it (records_count >= 1)
        max_timestamp, max_delta = (int(timestamps[newest]), newest) if timestamps[newest] > -1 else (-1, -1)

    if producer_log_append_time and not errors:
        # Kafka: in a CreateTime topic such records read as the batch max timestamp and are
        # range-checked; otherwise a producer claiming LogAppendTime is rejected.
        batch_timestamp = header.max_timestamp
        if log_append_time_topic or batch_timestamp == -1:
            timestamp_error = True
            errors = [RecordError(i, "Producer should not set timestamp type to LogAppendTime.")
                      for i in range(header.records_count)]
        elif bounded and _out_of_range(batch_timestamp, now_ms, before_max_ms, after_max_ms):
            timestamp_error = True
            errors = [RecordError(i, f"Timestamp {batch_timestamp} is out of range")
                      for i in range(header.records_count)]
        max_timestamp, max_delta = batch_timestamp, 0

    if errors:
        if timestamp_error:
            return InvalidRecords(ErrorCode.invalid_timestamp,
                                  "One or more records have been rejected due to invalid timestamp", tuple(errors))
        return InvalidRecords(ErrorCode.invalid_record,
                              f"One or more records have been rejected due to {len(errors)} record errors in total",
                              tuple(errors))
    batch = ValidBatch(0, header, header.records_count, max_timestamp, max_delta)
    return ValidatedRecords((batch,), header.size)


def _out_of_range(timestamp: int, now_ms: int, before_max_ms: int, after_max_ms: int) -> bool:
    difference = now_ms - timestamp
    return difference > before_max_ms or -difference > after_max_ms

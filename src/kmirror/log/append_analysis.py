"""Which batches an append holds, checked for the origin of the write.

Client writes to a leader go through `kmirror.records.validation.validate_for_append`
(Kafka `LogValidator`: one v2 batch, sizes, CRC, producer fields, timestamps). Writes that
keep their bytes (replication, mirroring) and the broker's own writes (coordinators,
transaction markers) only need well-formed v2 batches with valid CRCs, like Kafka's
`analyzeAndValidateRecords` for those origins.
"""

from __future__ import annotations

from enum import Enum

from kmirror.log.config import LogConfig
from kmirror.log.outcomes import AppendError
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import BatchHeader, Buffer, CorruptRecordError, crc_ok, iter_batches
from kmirror.records.validation import InvalidRecords, validate_for_append


class AppendOrigin(Enum):
    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


Analyzed = tuple[list[tuple[int, BatchHeader]], int]


def analyze_for_append(records: Buffer, config: LogConfig, now_ms: int, origin: AppendOrigin,
                       produce_version: int | None = None) -> Analyzed | AppendError:
    """[(position, header)] of the batches to append and how many bytes they span."""
    if origin is AppendOrigin.CLIENT:
        outcome = validate_for_append(
            records, max_message_bytes=config.max_message_bytes, now_ms=now_ms,
            message_timestamp_type=config.message_timestamp_type,
            timestamp_before_max_ms=config.message_timestamp_before_max_ms,
            timestamp_after_max_ms=config.message_timestamp_after_max_ms,
            compacted=config.compact_enabled, segment_bytes=config.segment_bytes,
            produce_version=produce_version)
        if isinstance(outcome, InvalidRecords):
            return AppendError(outcome.error, outcome.message,
                               tuple((e.batch_index, e.message) for e in outcome.record_errors))
        return [(b.position, b.header) for b in outcome.batches], outcome.valid_bytes
    batches: list[tuple[int, BatchHeader]] = []
    # A fetch response (follower replication, mirroring) may end in a batch cut at max_bytes,
    # as Kafka's do; only the whole batches before it are appended, the rest is fetched again.
    truncated_tail_ok = origin is AppendOrigin.REPLICATION
    try:
        for position, header in iter_batches(records, allow_truncated_tail=truncated_tail_ok):
            if not crc_ok(records, position, header):
                return AppendError(ErrorCode.corrupt_message,
                                   f"record batch at offset {header.base_offset} fails its CRC check")
            if origin is AppendOrigin.COORDINATOR and header.size > config.max_message_bytes:
                return AppendError(ErrorCode.message_too_large,
                                   f"record batch of {header.size} bytes exceeds max.message.bytes")
            batches.append((position, header))
    except CorruptRecordError as error:
        return AppendError(ErrorCode.corrupt_message, str(error))
    if not batches:
        return AppendError(ErrorCode.corrupt_message, "no record batch to append")
    end = batches[-1][0] + batches[-1][1].size
    return batches, end

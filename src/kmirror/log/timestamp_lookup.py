"""ListOffsets lookups on a log (Kafka `UnifiedLog.fetchOffsetByTimestamp`).

Special timestamps (Kafka `ListOffsetsRequest`): -1 LATEST -> the LEO with the latest epoch;
-2 EARLIEST and -4 EARLIEST_LOCAL -> the log start offset with its epoch; -3 MAX_TIMESTAMP
(KIP-734) -> the record with the largest timestamp; -5 LATEST_TIERED -> no tiered storage, so
(-1, -1, -1) as Kafka answers then. A timestamp >= 0 -> the first record whose timestamp is
>= it, with the partition leader epoch of its batch; None when no such record exists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kmirror.log.outcomes import TimestampAndOffset
from kmirror.records.batch import NO_TIMESTAMP
from kmirror.records.record import decode_records

if TYPE_CHECKING:
    from kmirror.log.log import Log
    from kmirror.log.segment import LogSegment

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
UNKNOWN_EPOCH = -1


def _epoch(value: int | None) -> int:
    return UNKNOWN_EPOCH if value is None or value < 0 else value


def find_offset_by_timestamp(log: Log, timestamp: int) -> TimestampAndOffset | None:
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return TimestampAndOffset(NO_TIMESTAMP, log.log_start_offset,
                                  _epoch(log.epoch_cache.epoch_for_offset(log.log_start_offset)))
    if timestamp == LATEST_TIMESTAMP:
        return TimestampAndOffset(NO_TIMESTAMP, log.log_end_offset, _epoch(log.latest_epoch))
    if timestamp == LATEST_TIERED_TIMESTAMP:
        return TimestampAndOffset(NO_TIMESTAMP, -1, -1)
    if timestamp == MAX_TIMESTAMP:
        return _max_timestamp(log)
    if timestamp < 0:
        return None
    for segment in log.segments:
        if segment.largest_timestamp >= timestamp:
            found = _first_record_at_or_after(segment, timestamp, log.log_start_offset)
            if found is not None:
                return found
    return None


def _batch_records(segment: LogSegment, position: int, size: int) -> list:  # type: ignore[type-arg]
    return decode_records(segment.fs.read(segment.log_path, position, size))


def _first_record_at_or_after(segment: LogSegment, timestamp: int, start_offset: int) -> TimestampAndOffset | None:
    _, index_offset = segment.time_index.lookup(timestamp)
    _, position = segment.offset_index.lookup(max(index_offset, start_offset))
    for pos, header in segment.batches(position):
        if header.max_timestamp < timestamp or header.last_offset < start_offset or header.is_control:
            continue
        for record in _batch_records(segment, pos, header.size):
            if record.timestamp >= timestamp and record.offset >= start_offset:
                return TimestampAndOffset(record.timestamp, record.offset, _epoch(header.partition_leader_epoch))
    return None


def _max_timestamp(log: Log) -> TimestampAndOffset | None:
    segment = max(log.segments, key=lambda s: s.max_timestamp_so_far)
    target = segment.max_timestamp_so_far
    if target == NO_TIMESTAMP:
        return None
    _, position = segment.offset_index.lookup(segment.offset_of_max_timestamp_so_far)
    for pos, header in segment.batches(position):
        if header.max_timestamp != target:
            continue
        if header.timestamp_type == 1:
            return TimestampAndOffset(target, header.base_offset, _epoch(header.partition_leader_epoch))
        for record in _batch_records(segment, pos, header.size):
            if record.timestamp == target:
                return TimestampAndOffset(target, record.offset, _epoch(header.partition_leader_epoch))
    return None

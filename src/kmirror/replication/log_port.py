"""The part of `kmirror.log.Log` a partition uses, and how its outcomes read as data-plane values.

Declared as a Protocol so `Partition` depends on behaviour, not on the log's module; the
real `Log` satisfies it, and tests may use the real `Log` over the in-memory file system.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from kmirror.log.append_analysis import AppendOrigin
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import RECORD_BATCH_OVERHEAD, CorruptRecordError, read_header
from kmirror.replication.outcomes import AppendOutcome, PartitionError


class PartitionLog(Protocol):
    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def last_stable_offset(self) -> int: ...

    @property
    def latest_epoch(self) -> int | None: ...

    def update_high_watermark(self, offset: int) -> Any: ...

    def append_as_leader(self, records: bytes | memoryview, leader_epoch: int, now_ms: int | None = None, *,
                         origin: AppendOrigin = AppendOrigin.CLIENT) -> Any: ...

    def append_as_follower(self, records: bytes | memoryview) -> Any: ...

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int, min_one_message: bool) -> Any: ...

    def fetch_offset_by_timestamp(self, timestamp: int) -> Any: ...

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> Sequence[Any]:
        """Aborted transactions (each with `producer_id`, `first_offset`) overlapping the range."""
        ...

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None: ...

    def epoch_for_offset(self, offset: int) -> int | None: ...

    def maybe_increment_log_start_offset(self, offset: int) -> Any: ...

    def truncate_to(self, offset: int) -> bool: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...


def append_outcome(result: Any) -> AppendOutcome | PartitionError:
    """Read the log's append result (LogAppendInfo or an expected-failure value)."""
    code = _error_code_of(result)
    if code is not None:
        return PartitionError(code, getattr(result, "message", None), _record_errors_of(result))
    return AppendOutcome(
        base_offset=int(result.first_offset if hasattr(result, "first_offset") else result.base_offset),
        last_offset=int(result.last_offset),
        log_append_time_ms=int(getattr(result, "log_append_time_ms", -1)),
        log_start_offset=int(getattr(result, "log_start_offset", -1)),
        duplicate=bool(getattr(result, "duplicate", False)),
    )


def read_outcome(result: Any) -> bytes | memoryview | PartitionError:
    """Read the log's read result (a records buffer, or an object carrying `records`)."""
    code = _error_code_of(result)
    if code is not None:
        return PartitionError(code, getattr(result, "message", None))
    if isinstance(result, bytes | bytearray | memoryview):
        return result if not isinstance(result, bytearray) else bytes(result)
    records: bytes | memoryview = result.records
    return records


def _error_code_of(result: Any) -> ErrorCode | None:
    code = getattr(result, "error_code", None)
    if code is None:
        code = getattr(result, "error", None)
    if code is None or isinstance(code, str):
        return None
    code = ErrorCode(int(code))
    return None if code == ErrorCode.none else code


def _record_errors_of(result: Any) -> tuple[tuple[int, str | None], ...]:
    errors = getattr(result, "record_errors", ()) or ()
    return tuple((int(i), m) for i, m in errors)


def fetched_upper_bound_offset(records: bytes | memoryview, fetch_offset: int) -> int:
    """An exclusive offset bound of the batches in a fetch answer (Kafka bounds the aborted
    transaction search by the first offset after the fetched bytes): the offset after the
    last batch whose header is readable, a trailing partial batch included."""
    upper = fetch_offset
    position = 0
    while position + RECORD_BATCH_OVERHEAD <= len(records):
        try:
            header = read_header(records, position)
        except CorruptRecordError:
            break
        upper = max(upper, header.next_offset)
        position += header.size
    return upper

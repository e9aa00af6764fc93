"""The part of `kmirror.log.Log` a partition uses, and how its outcomes read as data-plane values.

Declared as a Protocol so `Partition` depends on behaviour, not on the log's module; the
real `Log` satisfies it, and tests may use the real `Log` over the in-memory file system.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kmirror.log.append_analysis import AppendOrigin
from kmirror.log.outcomes import (
    AppendError,
    FetchDataInfo,
    LogAppendInfo,
    OffsetOutOfRange,
    Ok,
    TimestampAndOffset,
)
from kmirror.log.producer_state import ProducerStateEntry, VerificationGuard
from kmirror.log.transaction_index import AbortedTxn
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

    def update_high_watermark(self, offset: int) -> int: ...

    def append_as_leader(self, records: bytes | memoryview, leader_epoch: int, now_ms: int | None = None, *,
                         origin: AppendOrigin = AppendOrigin.CLIENT,
                         verification_guard: VerificationGuard | None = None) -> LogAppendInfo | AppendError: ...

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, epoch: int,
                                             now_ms: int | None = None) -> VerificationGuard | AppendError:
        """KIP-890 part 1: the guard a verified transactional append must carry (`SENTINEL`
        when the producer's transaction is already open here)."""
        ...

    def append_as_follower(self, records: bytes | memoryview) -> LogAppendInfo | AppendError: ...

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None, min_one_message: bool
             ) -> FetchDataInfo | OffsetOutOfRange: ...

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None: ...

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> Sequence[AbortedTxn]:
        """Aborted transactions (each with `producer_id`, `first_offset`) overlapping the range."""
        ...

    def active_producers(self) -> Sequence[ProducerStateEntry]: ...

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None: ...

    def epoch_for_offset(self, offset: int) -> int | None: ...

    def assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """`leader_epoch` starts at `start_offset` (Kafka `maybeAssignEpochStartOffset`)."""
        ...

    def maybe_increment_log_start_offset(self, offset: int) -> Ok | OffsetOutOfRange: ...

    def truncate_to(self, offset: int) -> bool: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...


def append_outcome(result: LogAppendInfo | AppendError) -> AppendOutcome | PartitionError:
    """The log's append result as a data-plane value."""
    if isinstance(result, AppendError):
        return PartitionError(result.error_code, result.message, result.record_errors)
    return AppendOutcome(
        base_offset=result.first_offset,
        last_offset=result.last_offset,
        log_append_time_ms=result.log_append_time_ms,
        log_start_offset=result.log_start_offset,
        duplicate=result.duplicate,
    )


def read_outcome(result: FetchDataInfo | OffsetOutOfRange) -> bytes | memoryview | PartitionError:
    """The log's read result as a data-plane value."""
    if isinstance(result, OffsetOutOfRange):
        return PartitionError(result.error_code, result.message)
    return result.records


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

"""What the log answers: results and expected failures as values.

Failures carry `error_code` (Kafka's code for the Produce/Fetch edge) and `message`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kmirror.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """Kafka `LogAppendInfo`: offsets the batches got (the original ones for a duplicate)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    records_count: int
    valid_bytes: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class AppendError:
    """A rejected append: nothing was written."""

    error_code: ErrorCode
    message: str
    record_errors: tuple[tuple[int, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """Bytes from the batch containing `fetch_offset` (may end in a partial batch)."""

    records: bytes
    fetch_offset: int


@dataclass(frozen=True, slots=True)
class OffsetOutOfRange:
    offset: int
    log_start_offset: int
    log_end_offset: int

    @property
    def error_code(self) -> ErrorCode:
        return ErrorCode.offset_out_of_range

    @property
    def message(self) -> str:
        return (f"offset {self.offset} is out of range [{self.log_start_offset}, "
                f"{self.log_end_offset}]")


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """Kafka `TimestampAndOffset` for ListOffsets; leader_epoch -1 when unknown."""

    timestamp: int
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class Ok:
    pass


OK = Ok()

"""Control batches: transaction markers and other broker-written control records.

A control batch has the control attribute bit set and holds one record whose key is
`version int16 (0) | type int16` (Kafka `ControlRecordType`). End-transaction markers
(ABORT/COMMIT) are also transactional and their value is
`version int16 (0) | coordinatorEpoch int32` (Kafka `EndTransactionMarker`).
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final

from kmirror.records.batch import Buffer, CorruptRecordError, read_header
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.records.record import InvalidRecordError, decode_records

CONTROL_KEY: Final = struct.Struct(">hh")
END_TXN_MARKER_VALUE: Final = struct.Struct(">hi")
CONTROL_KEY_VERSION: Final = 0
END_TXN_MARKER_VERSION: Final = 0


class ControlType(IntEnum):
    UNKNOWN = -1  # a type this broker does not know: Kafka reads it and ignores it
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    MIRROR_PID_RESET = 7  # reserved for KIP-1279 Cluster Mirroring

    @property
    def is_end_transaction_marker(self) -> bool:
        return self in (ControlType.ABORT, ControlType.COMMIT)


def control_key(control_type: ControlType) -> bytes:
    return CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type)


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return END_TXN_MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def build_control_batch(control_type: ControlType, producer_id: int, producer_epoch: int, timestamp_ms: int,
                        *, base_offset: int = 0, partition_leader_epoch: int = -1, coordinator_epoch: int = 0,
                        value: bytes | None = None) -> bytes:
    """A one-record control batch.

    For ABORT/COMMIT the value is the end-transaction marker (with `coordinator_epoch`) and the
    batch is transactional, as Kafka's `MemoryRecords.withEndTransactionMarker`; other types
    carry `value` as given.
    """
    if control_type == ControlType.UNKNOWN:
        raise ValueError("cannot build a control batch of unknown type")
    if control_type.is_end_transaction_marker:
        value = end_txn_marker_value(coordinator_epoch)
    return build_batch(
        [SimpleRecord(control_key(control_type), value, (), timestamp_ms)],
        base_offset=base_offset, partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
        producer_epoch=producer_epoch, is_transactional=control_type.is_end_transaction_marker,
        is_control=True)


def build_end_txn_marker(committed: bool, producer_id: int, producer_epoch: int, timestamp_ms: int,
                         coordinator_epoch: int) -> bytes:
    """The COMMIT (`committed`) or ABORT marker of a producer's transaction, as WriteTxnMarkers
    writes it on each partition of the transaction."""
    return build_control_batch(ControlType.COMMIT if committed else ControlType.ABORT, producer_id, producer_epoch,
                               timestamp_ms, coordinator_epoch=coordinator_epoch)


def parse_control_key(key: bytes | None) -> ControlType:
    if key is None or len(key) < CONTROL_KEY.size:
        raise InvalidRecordError("control record key is too short")
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    try:
        return ControlType(type_id)
    except ValueError:
        return ControlType.UNKNOWN


def parse_end_txn_marker(value: bytes | None) -> int:
    """The coordinator epoch of an end-transaction marker value."""
    if value is None or len(value) < END_TXN_MARKER_VALUE.size:
        raise InvalidRecordError("end transaction marker value is too short")
    version, coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"invalid end transaction marker version {version}")
    return int(coordinator_epoch)


def read_control_type(buf: Buffer, pos: int = 0) -> ControlType:
    """The control type of the control batch at `pos` (from its first record's key)."""
    header = read_header(buf, pos)
    if not header.is_control:
        raise CorruptRecordError(f"batch at position {pos} is not a control batch")
    records = decode_records(buf, pos)
    if not records:
        raise InvalidRecordError("control batch without records")
    return parse_control_key(records[0].key)

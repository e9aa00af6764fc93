"""The MIRROR_PID_RESET control record (KIP-1279 "Idempotent Producer").

Written once per destination partition in STOPPING (after the fetcher is removed and the log
truncated to the LSO, before the partition becomes writable); on append and on recovery it
expires every producer state entry. Its key is the standard control key (version 0, type 7);
its value is `MirrorPidResetRecord` v0, flexible:
  Version int16 | SourceClusterId compact string | tagged fields (uvarint 0)
The Version field is part of the record itself (as Kafka's LeaderChangeMessage), not a
separate prefix.
"""

import io
from dataclasses import dataclass, field
from typing import ClassVar

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i16

from kmirror.records.control import ControlType, control_key

MIRROR_PID_RESET_VERSION = 0


class InvalidMirrorPidResetRecord(Exception):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class MirrorPidResetRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    version: i16 = field(metadata={"kafka_type": "int16"}, default=i16(MIRROR_PID_RESET_VERSION))
    """The version of the mirror PID reset record."""
    source_cluster_id: str = field(metadata={"kafka_type": "string"})
    """The source cluster UUID for verification."""


def mirror_pid_reset_key() -> bytes:
    return control_key(ControlType.MIRROR_PID_RESET)


def encode_mirror_pid_reset(source_cluster_id: str) -> bytes:
    buf = io.BytesIO()
    entity_writer(MirrorPidResetRecord)(buf, MirrorPidResetRecord(source_cluster_id=source_cluster_id))
    return buf.getvalue()


def decode_mirror_pid_reset(value: bytes | None) -> MirrorPidResetRecord:
    if value is None:
        raise InvalidMirrorPidResetRecord("MIRROR_PID_RESET record without a value")
    try:
        record, size = entity_reader(MirrorPidResetRecord)(bytes(value), 0)
    except Exception as e:  # the native reader raises several kinds on bad input
        raise InvalidMirrorPidResetRecord(f"cannot decode MIRROR_PID_RESET value: {e}") from e
    if record.version < 0:
        raise InvalidMirrorPidResetRecord(f"invalid MIRROR_PID_RESET version {record.version}")
    if size != len(value) and record.version == MIRROR_PID_RESET_VERSION:
        raise InvalidMirrorPidResetRecord("trailing bytes after a v0 MIRROR_PID_RESET value")
    result: MirrorPidResetRecord = record
    return result

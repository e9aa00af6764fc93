# Generated from schemas/DeleteMirrorRequest.json and schemas/DeleteMirrorResponse.json by scripts/generate_mirror_protocol.py: do not edit by hand.
"""DeleteMirror (API key 104, v0, flexible): KIP-1279 "Protocol Changes" > DeleteMirror.

Deletes a mirror and its configuration; the mirror must be empty or hold only STOPPED
partitions (else MIRROR_NOT_EMPTY). Irreversible: failback with this mirror is no longer possible.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32Timedelta

API_KEY = 104


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteMirrorRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """The cluster mirror name to delete."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteMirrorResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The duration in milliseconds for which the request was throttled due to a quota violation, or zero if the request did not violate any quota."""
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """The error code, or 0 if there was no error."""
    error_message: str | None = field(metadata={"kafka_type": "string"})
    """The error message, or null if there was no error."""

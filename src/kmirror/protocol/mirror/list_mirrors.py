# Generated from schemas/ListMirrorsRequest.json and schemas/ListMirrorsResponse.json by scripts/generate_mirror_protocol.py: do not edit by hand.
"""ListMirrors (API key 98, v0, flexible): KIP-1279 "Protocol Changes" > ListMirrors.

The mirrors of this cluster with their source bootstrap servers, source cluster id and topic
count, read from the local metadata image (no records written).
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta

API_KEY = 98


@dataclass(frozen=True, slots=True, kw_only=True)
class ListMirrorsRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedMirror:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """The cluster mirror name."""
    source_bootstrap: str = field(metadata={"kafka_type": "string"})
    """The source cluster bootstrap servers."""
    source_cluster_id: str = field(metadata={"kafka_type": "string"}, default="")
    """The source cluster ID, or empty if not yet resolved."""
    topic_count: i32 = field(metadata={"kafka_type": "int32"}, default=i32(0))
    """The number of topics configured for this mirror. 0 indicates an empty mirror with no topics."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListMirrorsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The duration in milliseconds for which the request was throttled due to a quota violation, or zero if the request did not violate any quota."""
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """The error code, or 0 if there was no error."""
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The top-level error message, or null if there was no error."""
    mirrors: tuple[ListedMirror, ...]
    """Each mirror in the response."""

# Generated from schemas/DescribeMirrorsRequest.json and schemas/DescribeMirrorsResponse.json by scripts/generate_mirror_protocol.py: do not edit by hand.
"""DescribeMirrors (API key 99, v0, flexible): KIP-1279 "Protocol Changes" > DescribeMirrors.

Per-partition mirroring status: source offset (source high watermark), destination offset
(local log end offset), lag, state name and last mirror epoch (LME). A destination leader in
PREPARING also sends it to the source cluster to learn the LME there (failback).

`MirrorNames` is not nullable on the wire (the KIP gives no nullableVersions); empty means
all mirrors.

The KIP's PartitionDetail has an unnamed int32 field ("The last mirror leader epoch");
it is `LastMirrorEpoch` here, the name ReadMirrorStates uses for the same value.
`StateReason` (nullable string, tag 0) is kmirror's tagged field: why a partition is
STOPPED or FAILED, printed by `kmirror mirrors --describe --verbose`.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

API_KEY = 99


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeMirrorsRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    mirror_names: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The names of the mirrors to describe. Empty array means all mirrors."""
    include_authorized_operations: bool = field(metadata={"kafka_type": "bool"}, default=False)
    """Whether to include authorized operations."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionDetail:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """The partition index."""
    source_offset: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """The high watermark offset from the source cluster leader, or -1 if not yet available."""
    destination_offset: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """The log end offset on the destination cluster, or -1 if not yet available."""
    lag: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """The lag (source offset - destination offset), or -1 if not yet available."""
    state: str = field(metadata={"kafka_type": "string"})
    """The partition state."""
    last_mirror_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """The last mirror leader epoch, or -1 if not available."""
    state_reason: str | None = field(metadata={"kafka_type": "string", "tag": 0}, default=None)
    """kmirror (tagged, ignored by other readers): why the partition is STOPPED or FAILED when the partition leader knows, e.g. its source topic was deleted or re-created."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: str = field(metadata={"kafka_type": "string"})
    """The topic name."""
    partitions: tuple[PartitionDetail, ...]
    """Each partition detail."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedMirror:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """The error code, or 0 if there was no error."""
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """The cluster mirror name."""
    topics: tuple[TopicPartitions, ...]
    """Each topic in the mirror."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeMirrorsResponse:
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
    mirrors: tuple[DescribedMirror, ...]
    """Each described mirror."""

# Generated from schemas/WriteMirrorStatesRequest.json and schemas/WriteMirrorStatesResponse.json by scripts/generate_mirror_protocol.py: do not edit by hand.
"""WriteMirrorStates (API key 101, v0, flexible): KIP-1279 "Protocol Changes" > WriteMirrorStates.

Inter-broker: a partition leader persists mirror partition state transitions (and LMEs) through
the MirrorCoordinator that owns them in `__mirror_state`. `RemovedTopics` tombstones the
named topics' states. The KIP's PartitionData has an unnamed int32 field ("The last mirror
leader epoch"); it is `LastMirrorEpoch` here, as in ReadMirrorStates.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta

API_KEY = 101


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """The partition index."""
    last_mirror_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """The last mirror leader epoch, or -1 if not available."""
    state: i8 = field(metadata={"kafka_type": "int8"})
    """The mirror partition state."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: str = field(metadata={"kafka_type": "string"})
    """The topic name."""
    partitions: tuple[PartitionData, ...]
    """The data for the partitions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteMirrorStatesRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """The mirror name."""
    topics: tuple[TopicData, ...]
    """The data for the topics."""
    removed_topics: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The topic names to be removed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """The partition index."""
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """The error code, or 0 if there was no error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: str = field(metadata={"kafka_type": "string"})
    """The topic name."""
    partitions: tuple[PartitionResult, ...]
    """The results for the partitions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteMirrorStatesResponse:
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
    topics: tuple[TopicResult, ...]
    """The write results for the topics."""

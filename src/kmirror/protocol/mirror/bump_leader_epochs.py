# Generated from schemas/BumpLeaderEpochsRequest.json and schemas/BumpLeaderEpochsResponse.json by scripts/generate_mirror_protocol.py: do not edit by hand.
"""BumpLeaderEpochs (API key 105, v0, flexible): KIP-1279 "Protocol Changes" > BumpLeaderEpochs.

A destination partition leader asks the destination controller to raise the partition's leader
epoch to at least `MinLeaderEpoch` (above every mirrored source epoch) before the partition
becomes writable (STOPPING). The request names topics by id, the response by name, as the KIP.
The KIP spells the partition fields `partitionIndex` and `minLeaderEpoch`; they are
`PartitionIndex` and `MinLeaderEpoch` here, as Kafka's schemas spell fields (names do not
reach the wire).

`MinProducerId` (int64, tag 0, default -1) is kmirror's tagged field: one more than the
greatest producer id in the partitions' mirrored logs. The controller fences producer ids
below it in the same records as the bump, so producers get ids "separate from previously
mirrored IDs" (KIP "Producer State"). Not written at -1: the KIP's v0 bytes.
"""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

API_KEY = 105


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderEpochState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """The partition index."""
    min_leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """The minimum leader epoch that the destination cluster should bump to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The unique topic ID."""
    partitions: tuple[LeaderEpochState, ...]
    """The partition leader epochs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BumpLeaderEpochsRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topics: tuple[TopicState, ...]
    """The topic and partitions state."""
    min_producer_id: i64 = field(metadata={"kafka_type": "int64", "tag": 0}, default=i64(-1))
    """The producer id below which no producer id is handed out any more, or -1 for no change."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionDetail:
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
class TopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: str = field(metadata={"kafka_type": "string"})
    """The topic name."""
    partitions: tuple[PartitionDetail, ...]
    """Each partition state."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BumpLeaderEpochsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The duration in milliseconds for which the request was throttled due to a quota violation, or zero if the request did not violate any quota."""
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """The error code, or 0 if there was no error."""
    topics: tuple[TopicPartitions, ...]
    """Each topic in the mirror."""

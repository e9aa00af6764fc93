"""Fetch v19: KIP-1279's `MirrorLeaderEpoch` tagged fields ("Protocol Changes" > Fetch).

Request `FetchPartition.mirror_leader_epoch` (int32, tag 2, default -1): the latest mirror
leader epoch a destination follower knows. Response `PartitionData.mirror_leader_epoch`
(int32, tag 3, default -1): the latest mirror leader epoch the destination leader knows. Tags
and version are the KIP's: v18's FetchPartition uses tags 0-1 and PartitionData tags 0-2.
Every other field is Fetch v18's (kio). Versions 0-18 stay kio's own classes
(`schemas(version)`).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.fetch.v18 import request as _v18_request
from kio.schema.fetch.v18 import response as _v18_response
from kio.static.primitive import i32

from kmirror.protocol.mirror.derive import ExtraField, derive

API_KEY = 1
VERSION = 19
NO_MIRROR_LEADER_EPOCH = -1

_TYPES = derive(
    [_v18_request, _v18_response], version=VERSION, module_name=__name__,
    extra={
        "FetchPartition": [ExtraField("mirror_leader_epoch", i32, field(
            metadata={"kafka_type": "int32", "tag": 2}, default=i32(NO_MIRROR_LEADER_EPOCH)))],
        "PartitionData": [ExtraField("mirror_leader_epoch", i32, field(
            metadata={"kafka_type": "int32", "tag": 3}, default=i32(NO_MIRROR_LEADER_EPOCH)))],
    })

ReplicaState: type[Any] = _TYPES["ReplicaState"]
FetchPartition: type[Any] = _TYPES["FetchPartition"]
FetchTopic: type[Any] = _TYPES["FetchTopic"]
ForgottenTopic: type[Any] = _TYPES["ForgottenTopic"]
FetchRequest: type[Any] = _TYPES["FetchRequest"]
EpochEndOffset: type[Any] = _TYPES["EpochEndOffset"]
LeaderIdAndEpoch: type[Any] = _TYPES["LeaderIdAndEpoch"]
SnapshotId: type[Any] = _TYPES["SnapshotId"]
AbortedTransaction: type[Any] = _TYPES["AbortedTransaction"]
PartitionData: type[Any] = _TYPES["PartitionData"]
FetchableTopicResponse: type[Any] = _TYPES["FetchableTopicResponse"]
NodeEndpoint: type[Any] = _TYPES["NodeEndpoint"]
FetchResponse: type[Any] = _TYPES["FetchResponse"]


def schemas(version: int) -> tuple[type[Any], type[Any]]:
    """`SchemaLookup` for Fetch v0-v19: kio's classes up to v18, the derived ones at v19."""
    if version == VERSION:
        return FetchRequest, FetchResponse
    return load_request_schema(API_KEY, version), load_response_schema(API_KEY, version)

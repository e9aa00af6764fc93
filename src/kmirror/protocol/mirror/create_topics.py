"""CreateTopics v8: KIP-1279's `MirrorInfo` ("Protocol Changes" > CreateTopic).

`CreatableTopic.mirror_info` is a nullable struct `MirrorInfo { TopicId: uuid }` in versions
8+ ("nullableVersions": "8+", not tagged: the KIP gives it no tag). Null means an ordinary
topic (random topic id); set, the controller creates the topic with the source's topic id.
It is appended after `configs`, the last field of v7's CreatableTopic. Every other field is
CreateTopics v7's (kio). Versions 2-7 stay kio's own classes (`schemas(version)`).
"""


import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.index import load_request_schema, load_response_schema
from kio.schema.create_topics.v7 import request as _v7_request
from kio.schema.create_topics.v7 import response as _v7_response
from kio.schema.request_header.v2.header import RequestHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16

from kmirror.protocol.mirror.derive import ExtraField, derive

API_KEY = 19
VERSION = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class MirrorInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(VERSION)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    """The topic ID from the source cluster."""


_TYPES = derive(
    [_v7_request, _v7_response], version=VERSION, module_name=__name__,
    extra={"CreatableTopic": [ExtraField("mirror_info", MirrorInfo | None, field(metadata={}, default=None))]})

CreatableReplicaAssignment: type[Any] = _TYPES["CreatableReplicaAssignment"]
CreatableTopicConfig: type[Any] = _TYPES["CreatableTopicConfig"]
CreatableTopic: type[Any] = _TYPES["CreatableTopic"]
CreateTopicsRequest: type[Any] = _TYPES["CreateTopicsRequest"]
CreatableTopicConfigs: type[Any] = _TYPES["CreatableTopicConfigs"]
CreatableTopicResult: type[Any] = _TYPES["CreatableTopicResult"]
CreateTopicsResponse: type[Any] = _TYPES["CreateTopicsResponse"]


def schemas(version: int) -> tuple[type[Any], type[Any]]:
    """`SchemaLookup` for CreateTopics v2-v8: kio's classes up to v7, the derived ones at v8."""
    if version == VERSION:
        return CreateTopicsRequest, CreateTopicsResponse
    return load_request_schema(API_KEY, version), load_response_schema(API_KEY, version)

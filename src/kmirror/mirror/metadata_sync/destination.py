"""Metadata writes of the topic sync, through the controller: CreatePartitions and
IncrementalAlterConfigs on the mirror topic, as any other admin write of this broker (run
by the local controller on a combined node, forwarded to the active controller by a
broker-only node). Outcomes are `ApiError` values; an unreachable controller raises."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from kmirror.client.protocol import request_schema
from kmirror.metadata.broker_service import BrokerMetadataService
from kmirror.metadata.controller.config_ops import AlterableConfig
from kmirror.metadata.controller.result import NONE, ApiError
from kmirror.metadata.controller.topics import CreatePartitionsTopic
from kmirror.metadata.controller_service import MetadataService
from kmirror.metadata.image import ConfigResource, ConfigResourceType
from kmirror.protocol.entities import build, nested

CREATE_PARTITIONS, CREATE_PARTITIONS_VERSION = 37, 3
INCREMENTAL_ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS_VERSION = 44, 1
FORWARD_TIMEOUT = datetime.timedelta(seconds=30)


class TopicMetadataWriter(Protocol):
    async def create_partitions(self, topic: str, count: int) -> ApiError: ...

    async def alter_configs(self, topic: str, ops: Sequence[AlterableConfig]) -> ApiError: ...


def _error(code: int, message: str | None) -> ApiError:
    return NONE if code == 0 else ApiError(ErrorCode(code), message)


class ControllerTopicMetadataWriter:
    def __init__(self, metadata: MetadataService | BrokerMetadataService) -> None:
        """The node's metadata service: the controller's own (writes run here) or the broker's
        replica of the metadata log (writes are forwarded)."""
        self.metadata = metadata

    async def create_partitions(self, topic: str, count: int) -> ApiError:
        metadata = self.metadata
        if not metadata.forwarding:
            (result, *_) = await metadata.create_partitions([CreatePartitionsTopic(topic, count)])
            return result.error
        rt = request_schema(CREATE_PARTITIONS, CREATE_PARTITIONS_VERSION)
        request = build(rt, topics=(build(nested(rt, "CreatePartitionsTopic"), name=topic, count=i32(count),
                                          assignments=None),),
                        timeout=FORWARD_TIMEOUT, validate_only=False)
        response = await metadata.forward(request)
        (result, *_) = response.results
        return _error(int(result.error_code), result.error_message)

    async def alter_configs(self, topic: str, ops: Sequence[AlterableConfig]) -> ApiError:
        metadata = self.metadata
        if not metadata.forwarding:
            (result, *_) = await metadata.incremental_alter_configs(
                [(ConfigResource(ConfigResourceType.TOPIC, topic), list(ops))])
            return result.error
        rt = request_schema(INCREMENTAL_ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS_VERSION)
        resource_cls = nested(rt, "AlterConfigsResource")
        config_cls = nested(resource_cls, "AlterableConfig")
        request = build(rt, resources=(build(
            resource_cls, resource_type=i8(ConfigResourceType.TOPIC), resource_name=topic,
            configs=tuple(build(config_cls, name=o.name, config_operation=i8(o.op), value=o.value) for o in ops)),),
            validate_only=False)
        response = await metadata.forward(request)
        (result, *_) = response.responses
        return _error(int(result.error_code), result.error_message)

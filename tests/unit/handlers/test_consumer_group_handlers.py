"""ConsumerGroupHeartbeat and ConsumerGroupDescribe handlers, every version, called with kio
requests against the coordinator service and an in-memory CoordinatorLog; every response is
encoded with kio to prove it is well-formed on the wire."""

from __future__ import annotations

import asyncio
import datetime
import inspect
import io
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kio.serial import entity_writer

from kmirror.broker.api import RequestContext
from kmirror.broker.handlers import consumer_group_describe, consumer_group_heartbeat
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.group.service import GroupCoordinatorService
from kmirror.metadata.image import ConfigResource, ConfigResourceType
from kmirror.ports import ManualClock
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.errors import ErrorCode as E
from kmirror.protocol.registry import kio_schemas
from kmirror.testing.groups import MemoryCoordinatorLog

TOPIC_ID = uuid.UUID(int=42)
KEYS = {consumer_group_heartbeat: 68, consumer_group_describe: 69}


async def started(configs: dict[Any, Any] | None = None) -> BrokerServices:
    clock = ManualClock()
    config = CoordinatorConfig(offsets_topic_num_partitions=1, offsets_topic_replication_factor=1)
    coordinator = GroupCoordinatorService(1, config, MemoryCoordinatorLog(), clock)
    image = SimpleNamespace(topics={"t": SimpleNamespace(topic_id=TOPIC_ID, partitions={0: None, 1: None, 2: None})},
                            configs=configs or {})
    services = BrokerServices(node_id=1, config=None, registry=None, clock=clock,
                              metadata=SimpleNamespace(image=image), group_coordinator=coordinator)
    await coordinator.start()
    coordinator.on_partitions_led({0})
    while coordinator.is_loading(0):
        await asyncio.sleep(0)
    return services


async def call(services: BrokerServices, module: Any, version: int, **fields: Any) -> Any:
    request_type, response_type = kio_schemas(KEYS[module])(version)
    ctx = RequestContext(RequestHeaderView(KEYS[module], version, 1, "client"), response_type, "127.0.0.1", 1)
    response = module.handle(services, ctx, request_type(**fields))
    if inspect.isawaitable(response):
        response = await response
    assert isinstance(response, response_type)
    entity_writer(response_type)(io.BytesIO(), response)
    return response


def join_fields(version: int, member_id: str) -> dict[str, Any]:
    fields: dict[str, Any] = dict(group_id="g", member_id=member_id, member_epoch=0,
                                  rebalance_timeout=datetime.timedelta(seconds=30),
                                  subscribed_topic_names=("t",), topic_partitions=())
    if version >= 1:
        fields["subscribed_topic_regex"] = None
    return fields


@pytest.mark.parametrize("version", [0, 1])
def test_join_describe_and_leave_across_versions(version: int) -> None:
    async def main() -> None:
        services = await started()
        member_id = "" if version == 0 else "client-made-id"
        joined = await call(services, consumer_group_heartbeat, version, **join_fields(version, member_id))
        assert joined.error_code == E.none
        assert joined.member_epoch == 1
        assert joined.heartbeat_interval == datetime.timedelta(seconds=5)
        assert joined.member_id and (version == 0 or joined.member_id == member_id)
        ((tp,),) = [joined.assignment.topic_partitions]
        assert (tp.topic_id, tuple(tp.partitions)) == (TOPIC_ID, (0, 1, 2))

        for describe_version in (0, 1):
            described = await call(services, consumer_group_describe, describe_version, group_ids=("g", "none"),
                                   include_authorized_operations=False)
            g, missing = described.groups
            assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
                E.none, "Stable", 1, 1, "uniform")
            (m,) = g.members
            assert (m.member_id, m.member_epoch, m.client_host) == (joined.member_id, 1, "/127.0.0.1")
            assert [(t.topic_name, tuple(t.partitions)) for t in m.assignment.topic_partitions] == [("t", (0, 1, 2))]
            assert missing.error_code == E.group_id_not_found

        left = await call(services, consumer_group_heartbeat, version, group_id="g", member_id=joined.member_id,
                          member_epoch=-1, topic_partitions=None)
        assert (left.error_code, left.member_epoch) == (E.none, -1)
        await services.groups.stop()

    asyncio.run(main())


def test_an_invalid_heartbeat_gets_its_error_and_message() -> None:
    async def main() -> None:
        services = await started()
        fields = join_fields(1, "")
        response = await call(services, consumer_group_heartbeat, 1, **fields)
        assert (response.error_code, response.error_message) == (E.invalid_request, "MemberId can't be empty.")
        fields = join_fields(1, "m") | {"server_assignor": "nope"}
        response = await call(services, consumer_group_heartbeat, 1, **fields)
        assert response.error_code == E.unsupported_assignor
        await services.groups.stop()

    asyncio.run(main())


def test_the_groups_heartbeat_interval_config_is_returned() -> None:
    async def main() -> None:
        configs = {ConfigResource(ConfigResourceType.GROUP, "g"): {"consumer.heartbeat.interval.ms": "7000"}}
        services = await started(configs)
        joined = await call(services, consumer_group_heartbeat, 1, **join_fields(1, "m"))
        assert joined.heartbeat_interval == datetime.timedelta(seconds=7)
        await services.groups.stop()

    asyncio.run(main())

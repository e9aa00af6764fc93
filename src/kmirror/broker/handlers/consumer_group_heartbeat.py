"""ConsumerGroupHeartbeat (key 68, v0-v1; KIP-848). v1 has the consumer generate its member
id and adds SubscribedTopicRegex. Topics travel by id; the coordinator is given the cluster's
topics (name -> id, partition count) from the metadata image at each heartbeat.

Authorization (Kafka's): READ on the group (checked before the handler, `api_authorization`)
and DESCRIBE on every subscribed topic name, else TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DESCRIBE, TOPIC
from kmirror.broker.handlers.join_group import client_host, millis
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.consumer_group.messages import HeartbeatRequest, HeartbeatResult
from kmirror.coordinator.consumer_group.ports import GroupConfig, TopicsView, topics_of
from kmirror.metadata.image import ConfigResource, ConfigResourceType
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


def topics_view(services: BrokerServices) -> TopicsView:
    return topics_of(getattr(services.metadata, "image", None))


def group_config(services: BrokerServices, group_id: str) -> GroupConfig:
    """The group's `consumer.session.timeout.ms` / `consumer.heartbeat.interval.ms` (GROUP
    resource configs, validated when altered), else the broker defaults."""
    image = getattr(services.metadata, "image", None)
    if image is None:
        return GroupConfig()
    configs = image.configs.get(ConfigResource(ConfigResourceType.GROUP, group_id), {})

    def value(name: str) -> int | None:
        raw = configs.get(name)
        return int(raw) if raw is not None and str(raw).lstrip("-").isdigit() else None

    return GroupConfig(value("consumer.session.timeout.ms"), value("consumer.heartbeat.interval.ms"))


def topics_refusal(services: BrokerServices, ctx: RequestContext, subscribed: tuple[str, ...] | None) -> Any:
    """The heartbeat's answer when a subscribed topic name may not be described, else None."""
    names = subscribed or ()
    if not names or services.authorization.filter(ctx, DESCRIBE, TOPIC, names).issuperset(names):
        return None
    return build(ctx.response_type, throttle_time=datetime.timedelta(0),
                 error_code=ErrorCode.topic_authorization_failed, error_message="Topic authorization failed.",
                 member_id=None, member_epoch=-1, heartbeat_interval=datetime.timedelta(0), assignment=None)


@api(68, "ConsumerGroupHeartbeat", 0, 1)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    owned = request.topic_partitions
    refusal = topics_refusal(services, ctx, request.subscribed_topic_names)
    if refusal is not None:
        return refusal
    result = await services.groups.consumer_group_heartbeat(
        HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=millis(request.rebalance_timeout),
            subscribed_topic_names=(tuple(request.subscribed_topic_names)
                                    if request.subscribed_topic_names is not None else None),
            subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
            server_assignor=request.server_assignor,
            owned=(None if owned is None
                   else {tp.topic_id: frozenset(int(p) for p in tp.partitions)
                         for tp in owned if tp.topic_id and tp.partitions}),
            client_id=ctx.header.client_id or "",
            client_host=client_host(ctx),
            version=ctx.api_version,
        ),
        topics_view(services),
        group_config(services, request.group_id),
    )
    return heartbeat_response(ctx.response_type, result)


def heartbeat_response(rt: type, result: HeartbeatResult) -> Any:
    """The ConsumerGroupHeartbeat / ShareGroupHeartbeat answer of `result` (the assignment
    only when it is sent)."""
    assignment = None
    if result.assignment is not None:
        Assignment = nested(rt, "Assignment")
        TopicPartitions = nested(rt, "TopicPartitions")
        assignment = build(Assignment, topic_partitions=tuple(
            build(TopicPartitions, topic_id=t, partitions=tuple(sorted(ps)))
            for t, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))
        ))
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        assignment=assignment,
    )

"""ShareGroupHeartbeat (key 76, v1; KIP-932). The member generates its member id; topics
travel by id; the coordinator is given the cluster's topics from the metadata image.

Authorization (Kafka's): READ on the group (checked before the handler, `api_authorization`)
and DESCRIBE on every subscribed topic name, else TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.consumer_group_heartbeat import heartbeat_response, topics_refusal, topics_view
from kmirror.broker.handlers.join_group import client_host
from kmirror.broker.services import BrokerServices
from kmirror.broker.share_partitions import group_configs
from kmirror.coordinator.consumer_group.ports import GroupConfig
from kmirror.coordinator.share_group.heartbeat import ShareHeartbeatRequest


def share_group_config(services: BrokerServices, group_id: str) -> GroupConfig:
    """The group's `share.session.timeout.ms` / `share.heartbeat.interval.ms` (GROUP resource
    configs, validated when altered), else the broker defaults."""
    configs = group_configs(services, group_id)
    session, interval = configs.get("share.session.timeout.ms"), configs.get("share.heartbeat.interval.ms")
    return GroupConfig(int(session) if session else None, int(interval) if interval else None)


@api(76, "ShareGroupHeartbeat", 1, 1)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    refusal = topics_refusal(services, ctx, request.subscribed_topic_names)
    if refusal is not None:
        return refusal
    result = await services.groups.share_group_heartbeat(
        ShareHeartbeatRequest(
            group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
            rack_id=request.rack_id,
            subscribed_topic_names=(tuple(request.subscribed_topic_names)
                                    if request.subscribed_topic_names is not None else None),
            client_id=ctx.header.client_id or "", client_host=client_host(ctx)),
        topics_view(services), share_group_config(services, request.group_id))
    return heartbeat_response(ctx.response_type, result)

"""PauseMirrorTopics (key 102): `mirror.name` gets `.paused` (`membership.pause_topic`)."""

from __future__ import annotations

from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.remove_topics_from_mirror import membership_change
from kmirror.broker.services import BrokerServices
from kmirror.kip1279.membership import pause_topic
from kmirror.protocol.mirror.registry import schemas


@api(102, "PauseMirrorTopics", 0, 0, schemas=schemas(102), planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return await membership_change(services, ctx, request, pause_topic)

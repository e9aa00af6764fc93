"""ResumeMirrorTopics (key 103): `.paused` is stripped from `mirror.name`
(`membership.resume_topic`); the leader resumes from its local log end."""

from __future__ import annotations

from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.remove_topics_from_mirror import membership_change
from kmirror.broker.services import BrokerServices
from kmirror.kip1279.membership import Rejected, SetMirrorName, resume_topic
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.protocol.mirror.registry import schemas


def _resume(current: str | None, mirror_name: str, _states: list[MirrorPartitionState]) -> SetMirrorName | Rejected:
    return resume_topic(current, mirror_name)


@api(103, "ResumeMirrorTopics", 0, 0, schemas=schemas(103), planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return await membership_change(services, ctx, request, _resume)

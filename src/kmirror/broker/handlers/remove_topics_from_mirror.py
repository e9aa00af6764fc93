"""RemoveTopicsFromMirror (key 96): failover. Each topic's `mirror.name` gets `.removed`
(`membership.remove_topic`, with the MirrorCoordinator's partition states); the partition
leaders then run STOPPING (data plane). `membership_change` serves Pause/Resume as well:
the three RPCs share one request/response shape. A broker-only node checks the partition
states itself and forwards what it accepts (`broker.mirror_validation`)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.mirror_authorization import authorized_topic_change
from kmirror.broker.mirror_validation import Decide, forward_validated, partition_states_to_check
from kmirror.broker.services import BrokerServices
from kmirror.kip1279.errors import MirrorError
from kmirror.kip1279.membership import MIRROR_NAME_CONFIG, Rejected, SetMirrorName, remove_topic
from kmirror.metadata.mirrors import (
    MIRRORING_DISABLED_MESSAGE,
    UNSUPPORTED_VERSION_CODE,
    mirror,
    mirroring_enabled,
)
from kmirror.protocol.entities import build, nested
from kmirror.protocol.mirror.registry import schemas


async def membership_change(services: BrokerServices, ctx: RequestContext, request: Any, decide: Decide) -> Any:
    """Alter on the mirror and Read on each topic (`mirror_authorization`), then `decide`."""

    async def change(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
        return await _membership_change(services, ctx, request, decide)

    return await authorized_topic_change(services, ctx, request, change)


async def _membership_change(services: BrokerServices, ctx: RequestContext, request: Any, decide: Decide) -> Any:
    rt = ctx.response_type
    image = services.metadata.image
    result_cls = nested(rt, "TopicResult")
    name = request.mirror_name

    def answer(code: int, message: str | None, per_topic: dict[str, int]) -> Any:
        return build(rt, throttle_time=datetime.timedelta(0), error_code=code, error_message=message,
                     mirror_name=name, topics=tuple(build(result_cls, name=t, error_code=c)
                                                    for t, c in per_topic.items()))

    if not mirroring_enabled(image):
        return answer(UNSUPPORTED_VERSION_CODE, MIRRORING_DISABLED_MESSAGE,
                      {t.topic_name: UNSUPPORTED_VERSION_CODE for t in request.topics})
    if services.metadata.forwarding:
        return await forward_validated(services, rt, request, decide)
    if mirror(image, name) is None:
        code = int(MirrorError.UNKNOWN_MIRROR)
        return answer(code, f"Mirror {name} does not exist", {t.topic_name: code for t in request.topics})
    decisions: dict[str, SetMirrorName | Rejected] = {}
    missing: dict[str, int] = {}
    for t in request.topics:
        topic = image.topics.get(t.topic_name)
        if topic is None or (t.topic_id is not None and t.topic_id.int != 0 and t.topic_id != topic.topic_id):
            missing[t.topic_name] = int(ErrorCode.unknown_topic_or_partition)
            continue
        states = await partition_states_to_check(services, name, topic.topic_id, len(topic.partitions))
        decisions[t.topic_name] = decide(image.topic_config(t.topic_name).get(MIRROR_NAME_CONFIG), name, states)
    results = await services.metadata.set_mirror_names(decisions) if decisions else {}
    per_topic = {t.topic_name: missing.get(t.topic_name, int(results[t.topic_name].code) if t.topic_name in results
                                           else int(ErrorCode.unknown_topic_or_partition))
                 for t in request.topics}
    return answer(0, None, per_topic)


@api(96, "RemoveTopicsFromMirror", 0, 0, schemas=schemas(96), planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return await membership_change(services, ctx, request, remove_topic)

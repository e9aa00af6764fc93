"""AddTopicsToMirror (key 95).

A topic that exists only at the source is created here with the SOURCE's topic id, partition
count and configs (minus `mirror.topic.properties.exclude`) and `mirror.name=<mirror>`; the
replication factor is the broker's `default.replication.factor` (the request has none). A
topic that exists here with the source's topic id (failback, restart) only gets
`mirror.name` (`membership.add_topic`: partitions must be UNKNOWN or STOPPED). A topic here
with another id than the source's is refused with INVALID_REQUEST: its offsets cannot be the
source's. The source cluster id is recorded on the mirror at first contact (ListMirrors).
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.mirror.config import InvalidMirrorConfig
from kmirror.mirror.errors import MirrorError
from kmirror.mirror.membership import MIRROR_NAME_CONFIG, Rejected, add_topic, refusal_error_code
from kmirror.mirror.metadata import (
    MIRRORING_DISABLED_MESSAGE,
    UNSUPPORTED_VERSION_CODE,
    mirror,
    mirroring_enabled,
)
from kmirror.mirror.protocol.registry import schemas
from kmirror.mirror.service import SourceTopic, topic_partition_states
from kmirror.protocol.entities import build, nested

log = logging.getLogger(__name__)


@api(95, "AddTopicsToMirror", 0, 0, schemas=schemas(95), planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    image = services.metadata.image
    result_cls = nested(rt, "TopicResult")
    name = request.mirror_name
    names = [t.topic_name for t in request.topics]

    def answer(code: int, message: str | None, per_topic: dict[str, int]) -> Any:
        return build(rt, throttle_time=datetime.timedelta(0), error_code=code, error_message=message,
                     mirror_name=name, topics=tuple(build(result_cls, name=t, error_code=c)
                                                    for t, c in per_topic.items()))

    if not mirroring_enabled(image):
        return answer(UNSUPPORTED_VERSION_CODE, MIRRORING_DISABLED_MESSAGE, dict.fromkeys(names, UNSUPPORTED_VERSION_CODE))
    if services.metadata.forwarding:
        return await services.metadata.forward(request)
    info = mirror(image, name)
    if info is None:
        code = int(MirrorError.UNKNOWN_MIRROR)
        return answer(code, f"Mirror {name} does not exist", dict.fromkeys(names, code))
    config = info.parsed()
    if isinstance(config, InvalidMirrorConfig):
        return answer(int(ErrorCode.invalid_config), config.message, dict.fromkeys(names, int(ErrorCode.invalid_config)))

    results: dict[str, int] = {}
    # Refuse what the destination alone can refuse before contacting the source.
    to_lookup: list[str] = []
    for topic in names:
        current = image.topic_config(topic).get(MIRROR_NAME_CONFIG) if topic in image.topics else None
        decision = add_topic(current, name, [])
        if isinstance(decision, Rejected):
            results[topic] = refusal_error_code(decision.refusal)
        else:
            to_lookup.append(topic)
    service = getattr(services, "mirror_coordinator", None)
    if to_lookup:
        if service is None:
            return answer(int(ErrorCode.coordinator_not_available), "The mirror coordinator is not running",
                          {t: results.get(t, int(ErrorCode.coordinator_not_available)) for t in names})
        try:
            source = await service.describe_source_topics(config, to_lookup)
        except Exception as e:  # the source is unreachable: an expected outcome at this edge
            log.warning("mirror %s: cannot describe topics at the source: %s", name, e)
            code = int(ErrorCode.network_exception)
            return answer(code, f"Cannot reach the source cluster: {e}", {t: results.get(t, code) for t in names})
        if source.cluster_id and source.cluster_id != info.source_cluster_id:
            await services.metadata.set_mirror_source_cluster_id(name, source.cluster_id)
        creations: list[CreatableTopic] = []
        memberships = {}
        for topic in to_lookup:
            src = source.topics.get(topic, int(ErrorCode.unknown_topic_or_partition))
            if not isinstance(src, SourceTopic):
                results[topic] = int(src)
                continue
            local = services.metadata.image.topics.get(topic)
            if local is None:
                configs = {**config.topic_configs_to_copy(src.configs), MIRROR_NAME_CONFIG: name}
                creations.append(CreatableTopic(topic, src.num_partitions, -1, configs=configs, topic_id=src.topic_id))
            elif local.topic_id != src.topic_id:
                results[topic] = int(ErrorCode.invalid_request)
            else:
                states = await topic_partition_states(service, name, local.topic_id, len(local.partitions))
                memberships[topic] = add_topic(
                    services.metadata.image.topic_config(topic).get(MIRROR_NAME_CONFIG), name, states)
        if creations:
            for created in await services.metadata.create_topics(creations):
                results[created.name] = int(created.error.code)
        if memberships:
            for topic, error in (await services.metadata.set_mirror_names(memberships)).items():
                results[topic] = int(error.code)
    return answer(0, None, {t: results[t] for t in names})

"""AddTopicsToMirror (key 95).

A topic that exists only at the source is created here with the SOURCE's topic id, partition
count and configs (minus `mirror.topic.properties.exclude`) and `mirror.name=<mirror>`; the
replication factor is the request's tagged `ReplicationFactor` (`--replication-factor`), -1 for
the broker's `default.replication.factor`, validated as CreateTopics validates it
(INVALID_REPLICATION_FACTOR for 0, below -1, or above the registered brokers). A
topic that exists here with the source's topic id (failback, restart) only gets
`mirror.name` (`membership.add_topic`: partitions must be UNKNOWN or STOPPED). A topic here
with another id than the source's is refused with INVALID_REQUEST: its offsets cannot be the
source's. The source cluster id is recorded on the mirror at first contact (ListMirrors).
A source that reports another cluster id than the recorded one, while the mirror still has
active or paused topics, is refused with INCONSISTENT_CLUSTER_ID: those topics are copies of
the recorded cluster, and recording the new id would lift the halt that protects them
(`SourceClusterIdGuard`). A mirror whose topics were all removed records the new id.

Split as the KIP's "Protocol Changes" > AddTopicsToMirror says: the broker validates the
partition states of topics that exist here (it reaches the MirrorCoordinator), refuses the
ones not UNKNOWN or STOPPED, then forwards the request with the remaining topics to the
controller. The controller, which has no MirrorCoordinator when it is not also a broker,
trusts that validation, describes the topics at the source and writes the records.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.mirror_authorization import authorized_topic_change
from kmirror.broker.services import BrokerServices
from kmirror.client.errors import KafkaAuthenticationError
from kmirror.config.mirror import InvalidMirrorConfig
from kmirror.kip1279.errors import MirrorError
from kmirror.kip1279.membership import MIRROR_NAME_CONFIG, Rejected, add_topic, refusal_error_code
from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.metadata.mirrors import (
    MIRRORING_DISABLED_MESSAGE,
    UNSUPPORTED_VERSION_CODE,
    mirror,
    mirror_topics,
    mirroring_enabled,
)
from kmirror.mirror.service import MirrorCoordinatorService, topic_partition_states
from kmirror.mirror.source_lookup import SourceTopic, admin_source_lookup
from kmirror.protocol.entities import build, nested
from kmirror.protocol.mirror.registry import schemas

log = logging.getLogger(__name__)


@api(95, "AddTopicsToMirror", 0, 0, schemas=schemas(95), planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return await authorized_topic_change(services, ctx, request, _add_topics)


async def _add_topics(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
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
    service = getattr(services, "mirror_coordinator", None)
    if services.metadata.forwarding:
        return await _validate_and_forward(services, request, service, answer)
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
    if to_lookup:
        lookup = admin_source_lookup if service is None else service.describe_source_topics
        try:
            source = await lookup(name, config, to_lookup)
        except Exception as e:  # the source is unreachable: an expected outcome at this edge
            log.warning("mirror %s: cannot describe topics at the source: %s", name, e)
            # a refused SASL exchange keeps its code (SASL_AUTHENTICATION_FAILED...); the rest is NETWORK_EXCEPTION
            code = int(e.error_code) if isinstance(e, KafkaAuthenticationError) else int(ErrorCode.network_exception)
            return answer(code, f"Cannot reach the source cluster: {e}", {t: results.get(t, code) for t in names})
        if source.cluster_id and source.cluster_id != info.source_cluster_id:
            if info.source_cluster_id and mirror_topics(image, name):
                code = int(ErrorCode.inconsistent_cluster_id)
                log.warning("mirror %s: refused to add %s: the source at %s reports cluster id %s, but the "
                            "mirror's topics come from cluster %s", name, ", ".join(to_lookup),
                            ",".join(config.bootstrap_servers), source.cluster_id, info.source_cluster_id)
                return answer(code, f"The source cluster id {source.cluster_id} is not the mirror's "
                              f"{info.source_cluster_id}: its topics are mirrored from that cluster. "
                              "Remove them first, or create another mirror for this source.",
                              {t: results.get(t, code) for t in names})
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
                creations.append(CreatableTopic(topic, src.num_partitions, int(request.replication_factor),
                                                configs=config.topic_configs_to_copy(src.configs),
                                                topic_id=src.topic_id, mirror_name=name))
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


async def _validate_and_forward(
    services: BrokerServices, request: Any, service: MirrorCoordinatorService | None,
    answer: Callable[[int, str | None, dict[str, int]], Any],
) -> Any:
    """A broker-only node: refuse the existing topics whose partitions are not UNKNOWN or
    STOPPED, forward the rest to the controller, merge the per-topic results in request order."""
    image = services.metadata.image
    refused: dict[str, int] = {}
    for t in request.topics:
        local = image.topics.get(t.topic_name)
        if local is None:
            continue
        states = await topic_partition_states(service, request.mirror_name, local.topic_id, len(local.partitions))
        decision = add_topic(image.topic_config(t.topic_name).get(MIRROR_NAME_CONFIG), request.mirror_name, states)
        if isinstance(decision, Rejected):
            refused[t.topic_name] = refusal_error_code(decision.refusal)
    if not refused:
        return await services.broker_metadata.forward(request)
    remaining = tuple(t for t in request.topics if t.topic_name not in refused)
    forwarded: dict[str, int] = {}
    if remaining:
        response = await services.broker_metadata.forward(dataclasses.replace(request, topics=remaining))
        if response.error_code:
            return response
        forwarded = {r.name: int(r.error_code) for r in response.topics}
    return answer(0, None, {t.topic_name: refused.get(t.topic_name, forwarded.get(t.topic_name, 0))
                            for t in request.topics})

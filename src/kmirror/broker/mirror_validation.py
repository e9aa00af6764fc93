"""Mirror membership changes on a broker-only node (KIP-1279 AddTopicsToMirror and
RemoveTopicsFromMirror: "The broker validates that all target topic partitions are in ...
state ... Once validated, the request is forwarded to the controller").

The partition states live in `__mirror_state`, which only brokers coordinate; a dedicated
controller cannot read them. A forwarding broker therefore decides every topic it knows with
the states its MirrorCoordinatorService reads, answers the refused topics itself and forwards
a request holding only the others. The controller applies the `mirror.name` rules and trusts
the forwarder for the states (`partition_states_to_check`)."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from typing import Any
from uuid import UUID

from kmirror.broker.services import BrokerServices
from kmirror.kip1279.membership import MIRROR_NAME_CONFIG, Rejected, SetMirrorName, refusal_error_code
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.mirror.service import topic_partition_states
from kmirror.protocol.entities import build, nested

Decide = Callable[[str | None, str, list[MirrorPartitionState]], SetMirrorName | Rejected]


async def partition_states_to_check(
    services: BrokerServices, mirror_name: str, topic_id: UUID, num_partitions: int
) -> list[MirrorPartitionState]:
    """The states a membership decision is made with on a node that does not forward: the
    coordinator's; none on a node without a mirror coordinator (a dedicated controller),
    whose requests were validated by the forwarding broker."""
    service = getattr(services, "mirror_coordinator", None)
    if service is None:
        return []
    return await topic_partition_states(service, mirror_name, topic_id, num_partitions)


async def forward_validated(services: BrokerServices, response_type: type[Any], request: Any, decide: Decide) -> Any:
    """Decide each known topic here with the coordinator's partition states; forward the
    accepted ones (and the ones this broker does not know, for the controller to answer)."""
    image = services.metadata.image
    service = getattr(services, "mirror_coordinator", None)
    refused: dict[str, int] = {}
    accepted: list[Any] = []
    for t in request.topics:
        topic = image.topics.get(t.topic_name)
        if topic is not None:
            states = await topic_partition_states(service, request.mirror_name, topic.topic_id, len(topic.partitions))
            decision = decide(image.topic_config(t.topic_name).get(MIRROR_NAME_CONFIG), request.mirror_name, states)
            if isinstance(decision, Rejected):
                refused[t.topic_name] = refusal_error_code(decision.refusal)
                continue
        accepted.append(t)
    if not refused:
        return await services.broker_metadata.forward(request)
    codes: dict[str, int] = dict(refused)
    error_code, error_message = 0, None
    if accepted:
        forwarded = await services.broker_metadata.forward(dataclasses.replace(request, topics=tuple(accepted)))
        error_code, error_message = int(forwarded.error_code), forwarded.error_message
        codes.update({r.name: int(r.error_code) for r in forwarded.topics})
    result_cls = nested(response_type, "TopicResult")
    return build(response_type, throttle_time=datetime.timedelta(0), error_code=error_code,
                 error_message=error_message, mirror_name=request.mirror_name,
                 topics=tuple(build(result_cls, name=t.topic_name, error_code=codes.get(t.topic_name, error_code))
                              for t in request.topics))

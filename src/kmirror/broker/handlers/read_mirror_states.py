"""ReadMirrorStates (key 100, inter-broker): a mirror partition leader reads states and LMEs
from the MirrorCoordinator of this broker (KIP-1279). Answered from this broker's loaded
`__mirror_state` partitions only (NOT_COORDINATOR for keys it does not coordinate; the
caller finds the leader again). Topics are named on the wire and resolved to the topic ids
the coordinator keys use (UNKNOWN_TOPIC_OR_PARTITION when this cluster lacks the topic)."""

from __future__ import annotations

from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.mirror_states import refusal, states_response
from kmirror.broker.services import BrokerServices
from kmirror.mirror.coordinator.records import MirrorPartitionKey
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.mirror.registry import schemas


@api(100, "ReadMirrorStates", 0, 0, schemas=schemas(100))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    part_cls = nested(rt, "PartitionResult")
    refused = refusal(services, rt)
    service = services.mirror_coordinator
    if refused is not None or service is None:  # refusal() answers a node without a coordinator
        return refused
    results: dict[str, list[Any]] = {}
    keys: list[tuple[str, MirrorPartitionKey]] = []
    for topic in request.topics:
        image = services.metadata.image.topics.get(topic.name)
        results.setdefault(topic.name, [])
        for p in topic.partitions:
            if image is None:
                results[topic.name].append(build(part_cls, partition_index=p.partition_index, state=0,
                                                 error_code=int(ErrorCode.unknown_topic_or_partition)))
            else:
                keys.append((topic.name, MirrorPartitionKey(request.mirror_name, image.topic_id,
                                                            int(p.partition_index))))
    read = await service.local_read([k for _, k in keys])
    for (name, key), r in zip(keys, read.partitions, strict=True):
        results[name].append(build(part_cls, partition_index=key.partition, last_mirror_epoch=r.last_mirrored_epoch,
                                   state=int(r.state), error_code=int(r.error)))
    return states_response(rt, results)

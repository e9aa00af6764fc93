"""WriteMirrorStates (key 101, inter-broker): a mirror partition leader persists state
transitions and LMEs through the MirrorCoordinator of this broker (KIP-1279). Each write is
answered after its `__mirror_state` append; an illegal transition is INVALID_REQUEST for
that partition. `removed_topics` tombstones those topics' states held here."""

from __future__ import annotations

from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.mirror_states import refusal, states_response
from kmirror.broker.services import BrokerServices
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.mirror.coordinator.coordinator import StateWrite
from kmirror.mirror.coordinator.records import MirrorPartitionKey
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.mirror.registry import schemas


@api(101, "WriteMirrorStates", 0, 0, schemas=schemas(101))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    part_cls = nested(rt, "PartitionResult")
    refused = refusal(services, rt)
    service = services.mirror_coordinator
    if refused is not None or service is None:  # refusal() answers a node without a coordinator
        return refused
    image = services.metadata.image
    results: dict[str, list[Any]] = {}
    writes: list[tuple[str, StateWrite]] = []
    for topic in request.topics:
        topic_image = image.topics.get(topic.name)
        results.setdefault(topic.name, [])
        for p in topic.partitions:
            error = ErrorCode.unknown_topic_or_partition if topic_image is None else _invalid(int(p.state))
            if error is not None:
                results[topic.name].append(build(part_cls, partition_index=p.partition_index, error_code=int(error)))
                continue
            assert topic_image is not None
            key = MirrorPartitionKey(request.mirror_name, topic_image.topic_id, int(p.partition_index))
            writes.append((topic.name, StateWrite(key, topic.name, MirrorPartitionState.from_code(int(p.state)),
                                                  int(p.last_mirror_epoch))))
    if writes:
        written = await service.local_write([w for _, w in writes])
        for (name, write), r in zip(writes, written.partitions, strict=True):
            results[name].append(build(part_cls, partition_index=write.key.partition, error_code=int(r.error)))
    removed_ids = [image.topics[n].topic_id for n in request.removed_topics if n in image.topics]
    if removed_ids:
        await service.remove_topics(request.mirror_name, removed_ids)
    return states_response(rt, results)


def _invalid(state: int) -> ErrorCode | None:
    try:
        MirrorPartitionState(state)
    except ValueError:
        return ErrorCode.invalid_request
    return None

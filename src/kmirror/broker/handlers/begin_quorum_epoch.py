"""BeginQuorumEpoch (key 53, v0; KIP-595), controller plane: the newly elected leader tells
this voter, which follows it from now on (`Quorum.handle_begin_epoch`); an older epoch is
refused with FENCED_LEADER_EPOCH."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.quorum_requests import answer, quorum_partition, refusal
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.quorum.state import BeginQuorumEpoch


@api(53, "BeginQuorumEpoch", 0, 0, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    controller = services.controller_metadata
    found = quorum_partition(request)
    error = refusal(controller, request.cluster_id, found)
    quorum = controller.quorum
    if error is not None or quorum is None or found is None:
        return build(rt, error_code=error or ErrorCode.inconsistent_voter_set, topics=())
    if not controller.is_voter(int(found.leader_id)):
        code = ErrorCode.inconsistent_voter_set
    else:
        accepted, actions = quorum.handle_begin_epoch(
            BeginQuorumEpoch(int(found.leader_epoch), int(found.leader_id)), services.clock.monotonic_ms())
        controller.execute(actions)
        code = ErrorCode.none if accepted else ErrorCode.fenced_leader_epoch
    partition = build(nested(rt, "PartitionData"), partition_index=0, error_code=code, leader_id=quorum.leader_id,
                      leader_epoch=quorum.epoch)
    return answer(rt, partition)

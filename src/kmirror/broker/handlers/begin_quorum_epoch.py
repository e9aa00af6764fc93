"""BeginQuorumEpoch (key 53, v0; KIP-595), controller plane: the newly elected leader tells
this voter, which follows it from now on (`Quorum.handle_begin_epoch`); an older epoch is
refused with FENCED_LEADER_EPOCH, a leader that is no voter with INCONSISTENT_VOTER_SET."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.quorum_requests import QuorumRequest, accept, answer
from kmirror.broker.services import BrokerServices
from kmirror.quorum.state import BeginQuorumEpoch


@api(53, "BeginQuorumEpoch", 0, 0, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    accepted = accept(services.controller_metadata, ctx.response_type, request)
    if not isinstance(accepted, QuorumRequest):
        return accepted
    controller, quorum, p = accepted
    if not controller.is_voter(int(p.leader_id)):
        code = ErrorCode.inconsistent_voter_set
    else:
        begun, actions = quorum.handle_begin_epoch(BeginQuorumEpoch(int(p.leader_epoch), int(p.leader_id)),
                                                   services.clock.monotonic_ms())
        controller.execute(actions)
        code = ErrorCode.none if begun else ErrorCode.fenced_leader_epoch
    return answer(ctx.response_type, error_code=code, leader_id=quorum.leader_id, leader_epoch=quorum.epoch)

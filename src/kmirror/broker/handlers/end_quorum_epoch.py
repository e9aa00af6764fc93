"""EndQuorumEpoch (key 54, v0; KIP-595), controller plane: the leader resigns (it shuts down);
its preferred successors stand for election first (`Quorum.handle_end_epoch`)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.quorum_requests import QuorumRequest, accept, answer
from kmirror.broker.services import BrokerServices
from kmirror.quorum.state import EndQuorumEpoch


@api(54, "EndQuorumEpoch", 0, 0, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    accepted = accept(services.controller_metadata, ctx.response_type, request)
    if not isinstance(accepted, QuorumRequest):
        return accepted
    controller, quorum, p = accepted
    controller.execute(quorum.handle_end_epoch(
        EndQuorumEpoch(int(p.leader_epoch), int(p.leader_id), tuple(int(v) for v in p.preferred_successors)),
        services.clock.monotonic_ms()))
    return answer(ctx.response_type, error_code=ErrorCode.none, leader_id=quorum.leader_id, leader_epoch=quorum.epoch)

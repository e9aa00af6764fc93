"""EndQuorumEpoch (key 54, v0; KIP-595), controller plane: the leader resigns (it shuts down);
its preferred successors stand for election first (`Quorum.handle_end_epoch`)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.quorum_requests import answer, quorum_partition, refusal
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.quorum.state import EndQuorumEpoch


@api(54, "EndQuorumEpoch", 0, 0, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    controller = services.controller_metadata
    found = quorum_partition(request)
    error = refusal(controller, request.cluster_id, found)
    quorum = controller.quorum
    if error is not None or quorum is None or found is None:
        return build(rt, error_code=error or ErrorCode.inconsistent_voter_set, topics=())
    controller.execute(quorum.handle_end_epoch(
        EndQuorumEpoch(int(found.leader_epoch), int(found.leader_id),
                       tuple(int(v) for v in found.preferred_successors)), services.clock.monotonic_ms()))
    partition = build(nested(rt, "PartitionData"), partition_index=0, error_code=ErrorCode.none,
                      leader_id=quorum.leader_id, leader_epoch=quorum.epoch)
    return answer(rt, partition)

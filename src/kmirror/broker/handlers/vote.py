"""Vote (key 52, v0; KIP-595), controller plane: a candidate asks this voter for its vote.

Granted once per epoch, to a voter whose log is at least as up to date as this one's (its last
epoch, then its end offset), and only by a voter that knows no leader of that epoch
(`quorum.state.Quorum.handle_vote`). An older epoch is refused with FENCED_LEADER_EPOCH; a
node that is not a voter, or a candidate that is not one, gets INCONSISTENT_VOTER_SET; another
cluster's candidate INCONSISTENT_CLUSTER_ID.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.quorum_requests import answer, quorum_partition, refusal
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.quorum.state import VoteRequest


@api(52, "Vote", 0, 0, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    controller = services.controller_metadata
    found = quorum_partition(request)
    error = refusal(controller, request.cluster_id, found)
    quorum = controller.quorum
    if error is not None or quorum is None or found is None:
        return build(rt, error_code=error or ErrorCode.inconsistent_voter_set, topics=())
    if not controller.is_voter(int(found.replica_id)):
        return _answer(rt, ErrorCode.inconsistent_voter_set, quorum.leader_id, quorum.epoch, False)
    vote, actions = quorum.handle_vote(
        VoteRequest(int(found.replica_epoch), int(found.replica_id), int(found.last_offset_epoch),
                    int(found.last_offset)), services.clock.monotonic_ms())
    controller.execute(actions)
    error = ErrorCode.fenced_leader_epoch if vote.fenced else ErrorCode.none
    return _answer(rt, error, vote.leader_id, vote.epoch, vote.granted)


def _answer(rt: type[Any], error: ErrorCode, leader_id: int, epoch: int, granted: bool) -> Any:
    return answer(rt, build(nested(rt, "PartitionData"), partition_index=0, error_code=error, leader_id=leader_id,
                            leader_epoch=epoch, vote_granted=granted))

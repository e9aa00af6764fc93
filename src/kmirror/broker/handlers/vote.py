"""Vote (key 52, v0-2; KIP-595, KIP-996), controller plane: a candidate asks this voter for its
vote, or a prospective voter whether it would get it (v2's pre-vote, which changes nothing here).

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
from kmirror.broker.handlers.quorum_requests import QuorumRequest, accept, answer
from kmirror.broker.services import BrokerServices
from kmirror.quorum.state import VoteRequest


@api(52, "Vote", 0, 2, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    accepted = accept(services.controller_metadata, ctx.response_type, request)
    if not isinstance(accepted, QuorumRequest):
        return accepted
    controller, quorum, p = accepted
    if not controller.is_voter(int(p.replica_id)):
        return answer(ctx.response_type, error_code=ErrorCode.inconsistent_voter_set, leader_id=quorum.leader_id,
                      leader_epoch=quorum.epoch, vote_granted=False)
    vote, actions = quorum.handle_vote(
        VoteRequest(int(p.replica_epoch), int(p.replica_id), int(p.last_offset_epoch), int(p.last_offset),
                    pre_vote=bool(getattr(p, "pre_vote", False))),
        services.clock.monotonic_ms())
    controller.execute(actions)
    return answer(ctx.response_type, error_code=ErrorCode.fenced_leader_epoch if vote.fenced else ErrorCode.none,
                  leader_id=vote.leader_id, leader_epoch=vote.epoch, vote_granted=vote.granted)

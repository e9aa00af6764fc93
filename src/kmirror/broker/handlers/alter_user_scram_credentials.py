"""AlterUserScramCredentials (key 51, v0; KIP-554): upsert and delete users' SCRAM credentials.
The controller validates and writes the metadata records (kmirror.metadata.controller.scram)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.scram import ScramDeletion, ScramUpsertion
from kmirror.protocol.entities import build, nested


@api(51, "AlterUserScramCredentials", 0, 0, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not services.authorization.authorize_cluster(ctx, ALTER):  # Kafka: ALTER on the cluster, per user
        cls = nested(ctx.response_type, "AlterUserScramCredentialsResult")
        users = dict.fromkeys([*(d.name for d in request.deletions), *(u.name for u in request.upsertions)])
        return build(ctx.response_type, throttle_time=datetime.timedelta(0), results=tuple(
            build(cls, user=user, error_code=ErrorCode.cluster_authorization_failed,
                  error_message="Cluster authorization failed.") for user in users))
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        return await services.metadata.forward(request)
    rt = ctx.response_type
    deletions = [ScramDeletion(d.name, int(d.mechanism)) for d in request.deletions]
    upsertions = [ScramUpsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
                  for u in request.upsertions]
    results = await services.controller_metadata.alter_user_scram_credentials(deletions, upsertions)
    cls = nested(rt, "AlterUserScramCredentialsResult")
    return build(rt, throttle_time=datetime.timedelta(0), results=tuple(
        build(cls, user=r.user, error_code=r.error.code,
              error_message=r.error.message if r.error.code != ErrorCode.none else None)
        for r in results))

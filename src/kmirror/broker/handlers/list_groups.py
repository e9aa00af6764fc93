"""ListGroups (key 16, v0-v5: states filter from v4, types filter from v5). Lists every group
to a principal with DESCRIBE on the cluster, else the groups it may DESCRIBE (Kafka's)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DESCRIBE, GROUP
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested


@api(16, "ListGroups", 0, 5)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    result = services.groups.list_groups(
        list(getattr(request, "states_filter", ())), list(getattr(request, "types_filter", ()))
    )
    authorization = services.authorization
    groups = result.groups
    # Kafka: a listing leaves out what it may not show; neither denial is a refusal
    if not authorization.authorize_cluster(ctx, DESCRIBE, log_if_denied=False):
        describable = authorization.filter(ctx, DESCRIBE, GROUP, (g.group_id for g in groups), log_if_denied=False)
        groups = tuple(g for g in groups if g.group_id in describable)
    rt = ctx.response_type
    Listed = nested(rt, "ListedGroup")
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        error_code=result.error,
        groups=tuple(
            build(Listed, group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
                  group_type=g.group_type)
            for g in groups
        ),
    )

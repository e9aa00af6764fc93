"""UpdateFeatures (key 57, v0-1): finalized feature levels (`metadata.version`,
`mirror.version`), validated against this node's supported ranges (ApiVersions).

Broker-only nodes forward to the controller. v0 carries `allow_downgrade` instead of
`upgrade_type` (true = safe downgrade).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.api_versions import SUPPORTED_FEATURES
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.mirrors import SAFE_DOWNGRADE, UPGRADE, FeatureUpdate
from kmirror.protocol.entities import build, nested


@api(57, "UpdateFeatures", 0, 1, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if services.metadata.forwarding:
        return await services.metadata.forward(request)
    updates = []
    for u in request.feature_updates:
        upgrade_type = getattr(u, "upgrade_type", None)
        if upgrade_type is None:
            upgrade_type = SAFE_DOWNGRADE if getattr(u, "allow_downgrade", False) else UPGRADE
        updates.append(FeatureUpdate(u.feature, int(u.max_version_level), int(upgrade_type)))
    names = [u.feature for u in updates]
    rt = ctx.response_type
    if len(set(names)) != len(names):
        return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.invalid_request,
                     error_message="Duplicate feature in the request", results=())
    results = await services.metadata.update_features(
        updates, SUPPORTED_FEATURES, validate_only=bool(getattr(request, "validate_only", False)))
    result_cls = nested(rt, "UpdatableFeatureResult")
    return build(
        rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None,
        results=tuple(build(result_cls, feature=u.feature, error_code=r.code, error_message=r.message)
                      for u, r in zip(updates, results, strict=True)),
    )

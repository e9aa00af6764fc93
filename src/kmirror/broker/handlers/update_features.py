"""UpdateFeatures (key 57, v0-2): finalized feature levels (`metadata.version`,
`mirror.version`), validated against this node's supported ranges (ApiVersions).

All or nothing, as Kafka's controller: the first update that fails is the top-level error
and nothing is applied; on success every feature is answered NONE (v0-1; v2 answers with
the top-level error alone). Broker-only nodes forward to the controller. v0 carries
`allow_downgrade` instead of `upgrade_type` (true = safe downgrade).
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


@api(57, "UpdateFeatures", 0, 2, planes=("broker", "controller"))
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
    error = await services.metadata.update_features(
        updates, SUPPORTED_FEATURES, validate_only=bool(getattr(request, "validate_only", False)))
    results: tuple[Any, ...] = ()
    if error.code == ErrorCode.none and ctx.api_version < 2:
        result_cls = nested(rt, "UpdatableFeatureResult")
        results = tuple(build(result_cls, feature=u.feature, error_code=ErrorCode.none, error_message=None)
                        for u in updates)
    return build(rt, throttle_time=datetime.timedelta(0), error_code=error.code, error_message=error.message,
                 results=results)

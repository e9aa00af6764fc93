"""ListMirrors (key 98): the mirrors of this cluster, from the local metadata image."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.mirror_authorization import describable_mirrors
from kmirror.broker.services import BrokerServices
from kmirror.metadata.mirrors import (
    MIRRORING_DISABLED_MESSAGE,
    UNSUPPORTED_VERSION_CODE,
    mirror_topics,
    mirroring_enabled,
    mirrors,
)
from kmirror.protocol.entities import build, nested
from kmirror.protocol.mirror.registry import schemas


@api(98, "ListMirrors", 0, 0, schemas=schemas(98))
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    image = services.metadata.image
    if not mirroring_enabled(image):
        return build(rt, throttle_time=datetime.timedelta(0), error_code=UNSUPPORTED_VERSION_CODE,
                     error_message=MIRRORING_DISABLED_MESSAGE, mirrors=())
    listed = nested(rt, "ListedMirror")
    configured = mirrors(image)
    visible = describable_mirrors(services, ctx, list(configured), listing=True)  # KIP-1279: Describe on the ClusterMirror
    out = tuple(
        build(listed, mirror_name=m.name, source_bootstrap=m.source_bootstrap,
              source_cluster_id=m.source_cluster_id, topic_count=len(mirror_topics(image, m.name)))
        for m in configured.values() if m.name in visible
    )
    return build(rt, throttle_time=datetime.timedelta(0), error_code=0, error_message=None, mirrors=out)

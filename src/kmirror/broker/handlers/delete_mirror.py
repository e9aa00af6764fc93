"""DeleteMirror (key 104): refused with MIRROR_NOT_EMPTY while topics remain attached
(`membership.delete_mirror`); partition states come from the MirrorCoordinator. A broker-only node reads them and refuses
before forwarding; a dedicated controller (no coordinator) trusts the forwarding broker."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER
from kmirror.broker.mirror_authorization import mirror_refusal
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller import mirrors as mirror_ops
from kmirror.metadata.mirrors import (
    MIRRORING_DISABLED_MESSAGE,
    UNSUPPORTED_VERSION_CODE,
    mirror_topics,
    mirroring_enabled,
)
from kmirror.mirror.service import topic_partition_states
from kmirror.protocol.entities import build
from kmirror.protocol.mirror.registry import schemas


@api(104, "DeleteMirror", 0, 0, schemas=schemas(104), planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    refused = mirror_refusal(services, ctx, ALTER, request.mirror_name)  # KIP-1279: Alter on the ClusterMirror
    if refused is not None:
        return refused
    image = services.metadata.image
    if not mirroring_enabled(image):
        return build(rt, throttle_time=datetime.timedelta(0), error_code=UNSUPPORTED_VERSION_CODE,
                     error_message=MIRRORING_DISABLED_MESSAGE)
    name = request.mirror_name
    states = {}
    for topic in mirror_topics(image, name, include_removed=True):
        t = image.topics[topic]
        states[topic] = await topic_partition_states(
            getattr(services, "mirror_coordinator", None), name, t.topic_id, len(t.partitions))
    if services.metadata.forwarding:
        # The states are read here (a dedicated controller cannot): refuse here, else forward.
        refusal = mirror_ops.delete_mirror(image, name, states).response
        if refusal is not None and refusal.code != ErrorCode.none:
            return build(rt, throttle_time=datetime.timedelta(0), error_code=int(refusal.code),
                         error_message=refusal.message)
        return await services.metadata.forward(request)
    error = await services.metadata.delete_mirror(name, states)
    return build(rt, throttle_time=datetime.timedelta(0), error_code=int(error.code), error_message=error.message)

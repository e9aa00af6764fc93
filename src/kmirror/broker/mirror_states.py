"""What ReadMirrorStates and WriteMirrorStates (KIP-1279 keys 100/101) share: the response
shape (per-topic partition results) and the gate every mirror-state RPC passes first
(UNSUPPORTED_VERSION while `mirror.version` is 0, COORDINATOR_NOT_AVAILABLE without a local
MirrorCoordinator)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.services import BrokerServices
from kmirror.metadata.mirrors import MIRRORING_DISABLED_MESSAGE, UNSUPPORTED_VERSION_CODE, mirroring_enabled
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


def states_response(rt: type, results: dict[str, list[Any]], error: int = 0, message: str | None = None) -> Any:
    topic_cls = nested(rt, "TopicResult")
    return build(rt, throttle_time=datetime.timedelta(0), error_code=error, error_message=message,
                 topics=tuple(build(topic_cls, name=n, partitions=tuple(ps)) for n, ps in results.items()))


def refusal(services: BrokerServices, rt: type) -> Any | None:
    """The whole-request refusal, or None when the request may be served."""
    if not mirroring_enabled(services.metadata.image):
        return states_response(rt, {}, UNSUPPORTED_VERSION_CODE, MIRRORING_DISABLED_MESSAGE)
    if services.mirror_coordinator is None:
        return states_response(rt, {}, int(ErrorCode.coordinator_not_available))
    return None

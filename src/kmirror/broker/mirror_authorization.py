"""KIP-1279 "Security Control" for the mirror RPCs of the destination cluster.

- CreateMirror: Create on the ClusterMirror; DeleteMirror: Alter on it. Refused as a whole
  with MIRROR_AUTHORIZATION_FAILED.
- AddTopicsToMirror, RemoveTopicsFromMirror, PauseMirrorTopics, ResumeMirrorTopics: Alter on
  the ClusterMirror (else the request and each of its topics get MIRROR_AUTHORIZATION_FAILED)
  and Read on each Topic (a topic without it gets TOPIC_AUTHORIZATION_FAILED; the others
  are handled).
- ListMirrors and DescribeMirrors: Describe on the ClusterMirror, listing only the mirrors
  the principal may describe; a mirror named in DescribeMirrors without it gets
  MIRROR_AUTHORIZATION_FAILED, whether it exists or not. Read on the Cluster (the
  source-side permission the KIP gives a failing-back MirrorCoordinator for
  DescribeMirrors) describes every mirror.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Awaitable, Callable
from typing import Any

from kmirror.broker.api import RequestContext
from kmirror.broker.authorization import ALTER, CLUSTER_MIRROR, DESCRIBE, READ, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.kip1279.errors import MirrorError
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode

MIRROR_AUTHORIZATION_FAILED = int(MirrorError.MIRROR_AUTHORIZATION_FAILED)
TOPIC_AUTHORIZATION_FAILED = int(ErrorCode.topic_authorization_failed)


def mirror_refusal(services: BrokerServices, ctx: RequestContext, operation: int, mirror_name: str) -> Any | None:
    """The MIRROR_AUTHORIZATION_FAILED response of a CreateMirror/DeleteMirror the principal may
    not run, else None."""
    if services.authorization.authorize(ctx, operation, CLUSTER_MIRROR, mirror_name):
        return None
    return build(ctx.response_type, throttle_time=datetime.timedelta(0), error_code=MIRROR_AUTHORIZATION_FAILED,
                 error_message=f"Not authorized to access mirror {mirror_name}")


Inner = Callable[[BrokerServices, RequestContext, Any], Awaitable[Any]]


async def authorized_topic_change(services: BrokerServices, ctx: RequestContext, request: Any, inner: Inner) -> Any:
    """Run `inner` (an Add/Remove/Pause/Resume handler) on the topics the principal may change."""
    authorization = services.authorization
    if authorization.unrestricted(ctx):
        return await inner(services, ctx, request)
    rt = ctx.response_type
    result_cls = nested(rt, "TopicResult")
    names = [t.topic_name for t in request.topics]

    def answer(code: int, message: str | None, per_topic: dict[str, int]) -> Any:
        return build(rt, throttle_time=datetime.timedelta(0), error_code=code, error_message=message,
                     mirror_name=request.mirror_name,
                     topics=tuple(build(result_cls, name=t, error_code=per_topic[t]) for t in names))

    if not authorization.authorize(ctx, ALTER, CLUSTER_MIRROR, request.mirror_name):
        return answer(MIRROR_AUTHORIZATION_FAILED, f"Not authorized to alter mirror {request.mirror_name}",
                      dict.fromkeys(names, MIRROR_AUTHORIZATION_FAILED))
    readable = authorization.filter(ctx, READ, TOPIC, names)
    if readable.issuperset(names):
        return await inner(services, ctx, request)
    remaining = tuple(t for t in request.topics if t.topic_name in readable)
    per_topic = dict.fromkeys(names, TOPIC_AUTHORIZATION_FAILED)
    code, message = 0, None
    if remaining:
        response = await inner(services, ctx, dataclasses.replace(request, topics=remaining))
        code, message = int(response.error_code), response.error_message
        per_topic.update({r.name: int(r.error_code) for r in response.topics if r.name in readable})
    return answer(code, message, per_topic)


def describable_mirrors(services: BrokerServices, ctx: RequestContext, names: list[str], *,
                        listing: bool = False) -> set[str]:
    """The mirrors of `names` the principal may list or describe. READ on the cluster is a
    probe, and so is every name of a `listing` (it leaves out what it may not show): their
    denials are not audit-logged at INFO, as ListGroups' in Kafka."""
    authorization = services.authorization
    if authorization.unrestricted(ctx) or authorization.authorize_cluster(ctx, READ, log_if_denied=False):
        return set(names)
    return authorization.filter(ctx, DESCRIBE, CLUSTER_MIRROR, names, log_if_denied=not listing)

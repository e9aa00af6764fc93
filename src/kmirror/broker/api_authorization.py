"""Which authorization each API gets, checked in one place before its handler runs.

Every registered API is wrapped by `guarded` (`kmirror.broker.api`). For a request that is not
unrestricted (`RequestAuthorizer.unrestricted`: no authorizer, a cluster listener, a super
user), its API's entry in `POLICIES` says:
- `UNCHECKED`: nothing to authorize (ApiVersions and the SASL exchange; DescribeCluster, which
  Kafka answers to every principal);
- `ClusterOperation(op)`: the operation on the CLUSTER resource, checked here; refused with
  CLUSTER_AUTHORIZATION_FAILED in every error code of the response (those APIs answer with
  one top-level error code, as Kafka's);
- `PER_RESOURCE`: the handler authorizes each resource itself, as Kafka's KafkaApis does,
  answering per topic, group, transactional id or mirror (docs/design/security.md lists
  the operation and error of each);
- no entry: the API is not authorized yet, so it is refused for everyone but the
  unrestricted (fail closed) with CLUSTER_AUTHORIZATION_FAILED. A test keeps the list of
  such APIs equal to the one in docs/design/security.md.
Controller-plane APIs are served on controller listeners only, which are unrestricted.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from kmirror.broker.authorization import (
    ALTER,
    CLUSTER_ACTION,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    denied_response,
)
from kmirror.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kmirror.broker.api import RequestContext


@dataclass(frozen=True, slots=True)
class ClusterOperation:
    operation: int


UNCHECKED: Final = "unchecked"
PER_RESOURCE: Final = "per-resource"
Policy = ClusterOperation | str

POLICIES: dict[int, Policy] = {
    0: PER_RESOURCE,  # Produce
    1: PER_RESOURCE,  # Fetch
    2: PER_RESOURCE,  # ListOffsets
    3: PER_RESOURCE,  # Metadata
    17: UNCHECKED,  # SaslHandshake
    18: UNCHECKED,  # ApiVersions
    23: PER_RESOURCE,  # OffsetForLeaderEpoch
    29: ClusterOperation(DESCRIBE),  # DescribeAcls
    35: ClusterOperation(DESCRIBE),  # DescribeLogDirs
    36: UNCHECKED,  # SaslAuthenticate
    45: ClusterOperation(ALTER),  # AlterPartitionReassignments
    46: ClusterOperation(DESCRIBE),  # ListPartitionReassignments
    48: ClusterOperation(DESCRIBE_CONFIGS),  # DescribeClientQuotas
    50: ClusterOperation(DESCRIBE),  # DescribeUserScramCredentials
    56: ClusterOperation(CLUSTER_ACTION),  # AlterPartition (controller plane)
    57: ClusterOperation(ALTER),  # UpdateFeatures
    60: UNCHECKED,  # DescribeCluster
    62: ClusterOperation(CLUSTER_ACTION),  # BrokerRegistration (controller plane)
    63: ClusterOperation(CLUSTER_ACTION),  # BrokerHeartbeat (controller plane)
    67: ClusterOperation(CLUSTER_ACTION),  # AllocateProducerIds (controller plane)
    94: PER_RESOURCE,  # CreateMirror
    95: PER_RESOURCE,  # AddTopicsToMirror
    96: PER_RESOURCE,  # RemoveTopicsFromMirror
    98: PER_RESOURCE,  # ListMirrors
    99: PER_RESOURCE,  # DescribeMirrors
    100: ClusterOperation(CLUSTER_ACTION),  # ReadMirrorStates
    101: ClusterOperation(CLUSTER_ACTION),  # WriteMirrorStates
    102: PER_RESOURCE,  # PauseMirrorTopics
    103: PER_RESOURCE,  # ResumeMirrorTopics
    104: PER_RESOURCE,  # DeleteMirror
    105: ClusterOperation(CLUSTER_ACTION),  # BumpLeaderEpochs
}

Handler = Callable[[Any, "RequestContext", Any], Any]


def guarded(api_key: int, plane: str, handler: Handler) -> Handler:
    """`handler` behind its API's policy (see the module docstring)."""
    policy = POLICIES.get(api_key) if plane == "broker" else ClusterOperation(CLUSTER_ACTION)
    if policy in (UNCHECKED, PER_RESOURCE):
        return handler

    @functools.wraps(handler)
    def run(services: Any, ctx: RequestContext, request: Any) -> Any:
        authorization = services.authorization
        if not authorization.unrestricted(ctx):
            allowed = isinstance(policy, ClusterOperation) and authorization.authorize_cluster(ctx, policy.operation)
            if not allowed:
                return denied_response(ctx.response_type, ErrorCode.cluster_authorization_failed,
                                       "Cluster authorization failed.")
        return handler(services, ctx, request)

    if inspect.iscoroutinefunction(handler):
        @functools.wraps(handler)
        async def run_async(services: Any, ctx: RequestContext, request: Any) -> Any:
            result = run(services, ctx, request)
            return await result if inspect.isawaitable(result) else result

        return run_async
    return run

"""Which authorization each API gets, checked in one place before its handler runs.

Every registered API is wrapped by `guarded` (`kmirror.broker.api`). For a request that is not
unrestricted (`RequestAuthorizer.unrestricted`: no authorizer, or a cluster listener), its
API's entry in `POLICIES` says (a super user passes every check, by the authorizer's SuperUser
rule):
- `UNCHECKED`: nothing to authorize (ApiVersions and the SASL exchange; DescribeCluster, which
  Kafka answers to every principal);
- `checks(...)`: operations on resources the request names once, checked here in order
  (`Check`: the operation, the resource type, the request field naming the resource (the
  cluster when none) and the error). The first refused check answers the request with its
  error in every error code of the response and empty lists (those APIs answer with one
  top-level error code, as Kafka's);
- `PER_RESOURCE`: the handler authorizes each resource itself, as Kafka's KafkaApis does,
  answering per topic, group, transactional id or mirror (docs/design/security.md lists
  the operation and error of each);
- no entry: the API is not authorized yet, so it is refused for everyone but the
  unrestricted and super users (fail closed) with CLUSTER_AUTHORIZATION_FAILED. A test keeps the list of
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
    CLUSTER,
    CLUSTER_ACTION,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    READ,
    TRANSACTIONAL_ID,
    WRITE,
    denied_response,
)
from kmirror.metadata.controller.acls import CLUSTER_NAME
from kmirror.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kmirror.broker.api import RequestContext


@dataclass(frozen=True, slots=True)
class Check:
    operation: int
    resource_type: int = CLUSTER
    field: str | None = None
    error: ErrorCode = ErrorCode.cluster_authorization_failed

    def resource_name(self, request: Any) -> str:
        return CLUSTER_NAME if self.field is None else str(getattr(request, self.field))


def checks(*items: Check) -> tuple[Check, ...]:
    return items


def cluster(operation: int) -> tuple[Check, ...]:
    return (Check(operation),)


def group(operation: int, field: str = "group_id") -> Check:
    return Check(operation, GROUP, field, ErrorCode.group_authorization_failed)


def transactional_id(operation: int) -> Check:
    return Check(operation, TRANSACTIONAL_ID, "transactional_id", ErrorCode.transactional_id_authorization_failed)


UNCHECKED: Final = "unchecked"
PER_RESOURCE: Final = "per-resource"
Policy = tuple[Check, ...] | str

POLICIES: dict[int, Policy] = {
    0: PER_RESOURCE,  # Produce
    1: PER_RESOURCE,  # Fetch
    2: PER_RESOURCE,  # ListOffsets
    3: PER_RESOURCE,  # Metadata
    8: PER_RESOURCE,  # OffsetCommit
    9: PER_RESOURCE,  # OffsetFetch
    10: PER_RESOURCE,  # FindCoordinator
    11: checks(group(READ)),  # JoinGroup
    12: checks(group(READ)),  # Heartbeat
    13: checks(group(READ)),  # LeaveGroup
    14: checks(group(READ)),  # SyncGroup
    15: PER_RESOURCE,  # DescribeGroups
    16: PER_RESOURCE,  # ListGroups
    17: UNCHECKED,  # SaslHandshake
    18: UNCHECKED,  # ApiVersions
    19: PER_RESOURCE,  # CreateTopics
    20: PER_RESOURCE,  # DeleteTopics
    21: PER_RESOURCE,  # DeleteRecords
    22: PER_RESOURCE,  # InitProducerId
    23: PER_RESOURCE,  # OffsetForLeaderEpoch
    24: PER_RESOURCE,  # AddPartitionsToTxn
    25: checks(transactional_id(WRITE), group(READ)),  # AddOffsetsToTxn
    26: checks(transactional_id(WRITE)),  # EndTxn
    27: PER_RESOURCE,  # WriteTxnMarkers
    28: PER_RESOURCE,  # TxnOffsetCommit
    29: cluster(DESCRIBE),  # DescribeAcls
    30: PER_RESOURCE,  # CreateAcls
    31: PER_RESOURCE,  # DeleteAcls
    32: PER_RESOURCE,  # DescribeConfigs
    33: PER_RESOURCE,  # AlterConfigs
    34: cluster(ALTER),  # AlterReplicaLogDirs
    35: cluster(DESCRIBE),  # DescribeLogDirs
    36: UNCHECKED,  # SaslAuthenticate
    37: PER_RESOURCE,  # CreatePartitions
    38: PER_RESOURCE,  # CreateDelegationToken
    39: PER_RESOURCE,  # RenewDelegationToken
    40: PER_RESOURCE,  # ExpireDelegationToken
    41: PER_RESOURCE,  # DescribeDelegationToken
    42: PER_RESOURCE,  # DeleteGroups
    43: PER_RESOURCE,  # ElectLeaders
    44: PER_RESOURCE,  # IncrementalAlterConfigs
    45: cluster(ALTER),  # AlterPartitionReassignments
    46: cluster(DESCRIBE),  # ListPartitionReassignments
    47: checks(group(DELETE)),  # OffsetDelete (and READ on each topic in the handler)
    48: cluster(DESCRIBE_CONFIGS),  # DescribeClientQuotas
    49: PER_RESOURCE,  # AlterClientQuotas
    50: cluster(DESCRIBE),  # DescribeUserScramCredentials
    51: PER_RESOURCE,  # AlterUserScramCredentials
    52: cluster(CLUSTER_ACTION),  # Vote (controller plane)
    53: cluster(CLUSTER_ACTION),  # BeginQuorumEpoch (controller plane)
    54: cluster(CLUSTER_ACTION),  # EndQuorumEpoch (controller plane)
    55: cluster(DESCRIBE),  # DescribeQuorum (a broker forwards it to the controller)
    56: cluster(CLUSTER_ACTION),  # AlterPartition (controller plane)
    57: cluster(ALTER),  # UpdateFeatures
    58: cluster(CLUSTER_ACTION),  # Envelope (controller plane)
    59: cluster(CLUSTER_ACTION),  # FetchSnapshot (controller plane)
    60: UNCHECKED,  # DescribeCluster
    61: PER_RESOURCE,  # DescribeProducers
    62: cluster(CLUSTER_ACTION),  # BrokerRegistration (controller plane)
    63: cluster(CLUSTER_ACTION),  # BrokerHeartbeat (controller plane)
    64: cluster(ALTER),  # UnregisterBroker (a broker forwards it to the controller)
    65: PER_RESOURCE,  # DescribeTransactions
    66: PER_RESOURCE,  # ListTransactions
    67: cluster(CLUSTER_ACTION),  # AllocateProducerIds (controller plane)
    68: checks(group(READ)),  # ConsumerGroupHeartbeat (and DESCRIBE on subscribed topics in the handler)
    69: PER_RESOURCE,  # ConsumerGroupDescribe
    73: cluster(CLUSTER_ACTION),  # AssignReplicasToDirs (controller plane)
    74: cluster(DESCRIBE_CONFIGS),  # ListConfigResources
    75: PER_RESOURCE,  # DescribeTopicPartitions
    76: checks(group(READ)),  # ShareGroupHeartbeat (and DESCRIBE on subscribed topics in the handler)
    77: PER_RESOURCE,  # ShareGroupDescribe
    78: checks(group(READ)),  # ShareFetch (and READ on each topic in the handler)
    79: checks(group(READ)),  # ShareAcknowledge (and READ on each topic in the handler)
    84: cluster(CLUSTER_ACTION),  # ReadShareGroupState (share partition leaders)
    85: cluster(CLUSTER_ACTION),  # WriteShareGroupState (share partition leaders)
    90: PER_RESOURCE,  # DescribeShareGroupOffsets
    91: checks(group(READ)),  # AlterShareGroupOffsets (and READ on each topic in the handler)
    92: checks(group(DELETE)),  # DeleteShareGroupOffsets (and READ on each topic in the handler)
    94: PER_RESOURCE,  # CreateMirror
    95: PER_RESOURCE,  # AddTopicsToMirror
    96: PER_RESOURCE,  # RemoveTopicsFromMirror
    98: PER_RESOURCE,  # ListMirrors
    99: PER_RESOURCE,  # DescribeMirrors
    100: cluster(CLUSTER_ACTION),  # ReadMirrorStates
    101: cluster(CLUSTER_ACTION),  # WriteMirrorStates
    102: PER_RESOURCE,  # PauseMirrorTopics
    103: PER_RESOURCE,  # ResumeMirrorTopics
    104: PER_RESOURCE,  # DeleteMirror
    105: cluster(CLUSTER_ACTION),  # BumpLeaderEpochs
}

_MESSAGES = {
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
}

def _refusal(authorization: Any, ctx: RequestContext, request: Any,
             required: tuple[Check, ...] | None) -> ErrorCode | None:
    if required is None:
        return None if authorization.is_super_user(ctx) else ErrorCode.cluster_authorization_failed
    for check in required:
        if not authorization.authorize(ctx, check.operation, check.resource_type, check.resource_name(request)):
            return check.error
    return None


Handler = Callable[[Any, "RequestContext", Any], Any]


def guarded(api_key: int, plane: str, handler: Handler) -> Handler:
    """`handler` behind its API's policy (see the module docstring)."""
    policy = POLICIES.get(api_key) if plane == "broker" else cluster(CLUSTER_ACTION)
    if policy in (UNCHECKED, PER_RESOURCE):
        return handler
    required = policy if isinstance(policy, tuple) else None  # None: not authorized yet, fail closed

    @functools.wraps(handler)
    def run(services: Any, ctx: RequestContext, request: Any) -> Any:
        authorization = services.authorization
        if not authorization.unrestricted(ctx):
            refused = _refusal(authorization, ctx, request, required)
            if refused is not None:
                return denied_response(ctx.response_type, refused, _MESSAGES[refused])
        return handler(services, ctx, request)

    if inspect.iscoroutinefunction(handler):
        @functools.wraps(handler)
        async def run_async(services: Any, ctx: RequestContext, request: Any) -> Any:
            result = run(services, ctx, request)
            return await result if inspect.isawaitable(result) else result

        return run_async
    return run

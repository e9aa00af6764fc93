"""What the quorum's requests (Vote, BeginQuorumEpoch, EndQuorumEpoch) share: the one
partition they name and the checks before the quorum sees them."""

from __future__ import annotations

from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from kmirror.broker.handlers.controller_metadata_fetch import METADATA_TOPIC
from kmirror.metadata.controller_service import MetadataService
from kmirror.protocol.entities import build, nested
from kmirror.quorum.state import Quorum


class QuorumRequest(NamedTuple):
    controller: MetadataService
    quorum: Quorum
    partition: Any
    """The request's entry for `__cluster_metadata-0`."""


def accept(controller: MetadataService, rt: type[Any], request: Any) -> QuorumRequest | Any:
    """The request to hand to the quorum, or the response refusing it at the top level:
    INCONSISTENT_CLUSTER_ID (another cluster), INCONSISTENT_VOTER_SET (this node is no voter of
    several), UNKNOWN_TOPIC_OR_PARTITION (not exactly `__cluster_metadata-0`)."""
    own = controller.image.cluster_id
    items = [(t.topic_name, p) for t in request.topics for p in t.partitions]
    if request.cluster_id is not None and own is not None and request.cluster_id != own:
        error = ErrorCode.inconsistent_cluster_id
    elif controller.quorum is None:
        error = ErrorCode.inconsistent_voter_set
    elif len(items) != 1 or items[0][0] != METADATA_TOPIC or int(items[0][1].partition_index) != 0:
        error = ErrorCode.unknown_topic_or_partition
    else:
        return QuorumRequest(controller, controller.quorum, items[0][1])
    return build(rt, error_code=error, topics=())


def answer(rt: type[Any], **partition: Any) -> Any:
    """The response for `__cluster_metadata-0` with these partition fields."""
    data = build(nested(rt, "PartitionData"), partition_index=0, **partition)
    return build(rt, error_code=ErrorCode.none,
                 topics=(build(nested(rt, "TopicData"), topic_name=METADATA_TOPIC, partitions=(data,)),))

"""What the quorum's requests (Vote, BeginQuorumEpoch, EndQuorumEpoch) share: the one
partition they name and the checks before the quorum sees them."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.handlers.controller_metadata_fetch import METADATA_TOPIC
from kmirror.metadata.controller_service import MetadataService
from kmirror.protocol.entities import build, nested


def quorum_partition(request: Any) -> Any | None:
    """The request's one partition entry, if it is `__cluster_metadata-0`; else None."""
    items = [(t.topic_name, p) for t in request.topics for p in t.partitions]
    if len(items) != 1 or items[0][0] != METADATA_TOPIC or int(items[0][1].partition_index) != 0:
        return None
    return items[0][1]


def answer(rt: type[Any], partition: Any) -> Any:
    """The response holding `partition`, the answer for `__cluster_metadata-0`."""
    return build(rt, error_code=ErrorCode.none,
                 topics=(build(nested(rt, "TopicData"), topic_name=METADATA_TOPIC, partitions=(partition,)),))


def refusal(controller: MetadataService, cluster_id: str | None, found: Any | None) -> ErrorCode | None:
    """The top-level error: another cluster, a node without a quorum, or another partition."""
    own = controller.image.cluster_id
    if cluster_id is not None and own is not None and cluster_id != own:
        return ErrorCode.inconsistent_cluster_id
    if controller.quorum is None:
        return ErrorCode.inconsistent_voter_set
    if found is None:
        return ErrorCode.unknown_topic_or_partition
    return None

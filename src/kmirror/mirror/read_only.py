"""KIP-1279 "Mirror topics are read-only": the `WriteGuard` the node gives its ReplicaManager,
so every client write path (Produce, DeleteRecords) is refused while a partition is attached
to a mirror and not yet STOPPED: READ_ONLY_TOPIC for a mirror topic, NOT_LEADER_OR_FOLLOWER
(retriable) for a failed-over partition on its way to STOPPED or whose state is not known
yet (`kmirror.kip1279.membership.WriteRefusal`)."""

from __future__ import annotations

from collections.abc import Callable

from kmirror.kip1279.errors import MirrorError, kio_error_code
from kmirror.kip1279.membership import WriteRefusal
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.mirrors import CachedStateView, PartitionLeaderView, topic_partition_write_refusal
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import PartitionError
from kmirror.types import TopicPartition

NOT_YET_WRITABLE_MESSAGE = "the topic was failed over from its mirror and is not writable yet (retry)"


class MirrorWriteGuard:
    def __init__(self, image: Callable[[], MetadataImage | None], coordinator: CachedStateView | None,
                 leader: PartitionLeaderView | None) -> None:
        self._image = image
        self._coordinator = coordinator
        self._leader = leader

    def write_refusal(self, tp: TopicPartition) -> PartitionError | None:
        refusal = topic_partition_write_refusal(self._image(), tp.topic, tp.partition, self._coordinator, self._leader)
        if refusal is WriteRefusal.READ_ONLY:
            return PartitionError(kio_error_code(int(MirrorError.READ_ONLY_TOPIC)), MirrorError.READ_ONLY_TOPIC.message)
        if refusal is WriteRefusal.NOT_YET_WRITABLE:
            return PartitionError(ErrorCode.not_leader_or_follower, NOT_YET_WRITABLE_MESSAGE)
        return None

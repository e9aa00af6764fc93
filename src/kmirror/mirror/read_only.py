"""KIP-1279 "Mirror topics are read-only": the `WriteGuard` the node gives its ReplicaManager,
so every client write path (Produce, DeleteRecords) is refused with READ_ONLY_TOPIC while a
partition is attached to a mirror and not yet STOPPED."""

from __future__ import annotations

from collections.abc import Callable

from kmirror.kip1279.errors import MirrorError, kio_error_code
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.mirrors import CachedStateView, PartitionLeaderView, is_topic_partition_read_only
from kmirror.replication.outcomes import PartitionError
from kmirror.types import TopicPartition


class MirrorWriteGuard:
    def __init__(self, image: Callable[[], MetadataImage | None], coordinator: CachedStateView | None,
                 leader: PartitionLeaderView | None) -> None:
        self._image = image
        self._coordinator = coordinator
        self._leader = leader

    def write_refusal(self, tp: TopicPartition) -> PartitionError | None:
        if is_topic_partition_read_only(self._image(), tp.topic, tp.partition, self._coordinator, self._leader):
            return PartitionError(kio_error_code(int(MirrorError.READ_ONLY_TOPIC)), MirrorError.READ_ONLY_TOPIC.message)
        return None

"""Which broker syncs a mirror's metadata, and what it syncs.

KIP-1279: metadata sync is per mirror, done by one broker of the destination cluster, the
coordinator of the mirror: the leader of `__mirror_state` partition
`Utils.abs(mirrorName.hashCode()) % numPartitions` (docs/design/mirroring.md
"Partitioning"). No `__mirror_state` topic or no leader: nobody syncs yet.

Groups and ACLs follow the topics that are ACTIVE members of the mirror: a PAUSED topic's
sync halts (KIP "Pause Mirror Topics"), a REMOVED one (failover, RemoveTopicsFromMirror)
belongs to the destination's own clients.
"""

from __future__ import annotations

from collections.abc import Mapping

from kmirror.config.mirror import MIRROR_STATE_TOPIC
from kmirror.kip1279.membership import MembershipStatus
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.mirrors import MirrorInfo, mirror_topics, mirrors
from kmirror.mirror.coordinator.partitioner import metadata_partition_for


def sync_coordinator(image: MetadataImage, mirror_name: str) -> int | None:
    """The broker that syncs `mirror_name`'s metadata, None while there is none."""
    topic = image.topics.get(MIRROR_STATE_TOPIC)
    if topic is None or not topic.partitions:
        return None
    registration = topic.partitions.get(metadata_partition_for(mirror_name, len(topic.partitions)))
    if registration is None or registration.leader < 0:
        return None
    return registration.leader


def coordinated_mirrors(image: MetadataImage | None, broker_id: int) -> list[MirrorInfo]:
    """The mirrors whose metadata this broker syncs, by name."""
    if image is None:
        return []
    return [m for name, m in mirrors(image).items() if sync_coordinator(image, name) == broker_id]


def active_topic_partitions(image: MetadataImage, mirror_name: str) -> Mapping[str, int]:
    """ACTIVE member topics of the mirror -> their partition count at the destination."""
    out: dict[str, int] = {}
    for topic, membership in mirror_topics(image, mirror_name).items():
        if membership.status is MembershipStatus.ACTIVE:
            out[topic] = len(image.topics[topic].partitions)
    return out

"""Mirrors as the metadata image describes them (KIP-1279): the `mirror.version` gate, each
mirror's configs (ConfigRecords of resource type MIRROR), and topic membership (`mirror.name`).

Pure reads of a `MetadataImage`; every broker answers from its own image.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from kmirror.config.mirror import BOOTSTRAP_SERVERS, InvalidMirrorConfig, MirrorConfig, parse_mirror_config
from kmirror.kip1279.errors import MIRRORING_DISABLED_MESSAGE as MIRRORING_DISABLED_MESSAGE
from kmirror.kip1279.membership import (
    MIRROR_NAME_CONFIG,
    Membership,
    MembershipStatus,
    WriteRefusal,
    parse_mirror_name_config,
    write_refusal,
)
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.metadata.controller.mirrors import SOURCE_CLUSTER_ID_KEY
from kmirror.metadata.image import ConfigResource, ConfigResourceType, MetadataImage
from kmirror.metadata.mirror_records import (
    MIRROR_CONFIG_RESOURCE_TYPE,
    MIRROR_VERSION_DISABLED,
    MIRROR_VERSION_FEATURE,
)

# Keys the controller stores for a mirror that are not operator configs.
INTERNAL_MIRROR_KEYS = frozenset({SOURCE_CLUSTER_ID_KEY})


def mirror_version(image: MetadataImage) -> int:
    return int(image.features.get(MIRROR_VERSION_FEATURE, MIRROR_VERSION_DISABLED))


def mirroring_enabled(image: MetadataImage) -> bool:
    """False while `mirror.version` is 0: every mirror RPC answers UNSUPPORTED_VERSION."""
    return mirror_version(image) > MIRROR_VERSION_DISABLED


@dataclass(frozen=True, slots=True)
class MirrorInfo:
    name: str
    configs: Mapping[str, str]
    """The operator's configs (without internal keys)."""
    source_cluster_id: str

    @property
    def source_bootstrap(self) -> str:
        return self.configs.get(BOOTSTRAP_SERVERS, "")

    def parsed(self) -> MirrorConfig | InvalidMirrorConfig:
        return parse_mirror_config(self.configs)


def mirrors(image: MetadataImage) -> dict[str, MirrorInfo]:
    """Every mirror of this cluster, by name."""
    out: dict[str, MirrorInfo] = {}
    for resource, values in image.configs.items():
        if resource.type != MIRROR_CONFIG_RESOURCE_TYPE or not values:
            continue
        configs = {k: v for k, v in values.items() if k not in INTERNAL_MIRROR_KEYS}
        out[resource.name] = MirrorInfo(resource.name, configs, values.get(SOURCE_CLUSTER_ID_KEY, ""))
    return dict(sorted(out.items()))


def mirror(image: MetadataImage, name: str) -> MirrorInfo | None:
    values = image.configs.get(ConfigResource(MIRROR_CONFIG_RESOURCE_TYPE, name))
    if not values:
        return None
    configs = {k: v for k, v in values.items() if k not in INTERNAL_MIRROR_KEYS}
    return MirrorInfo(name, configs, values.get(SOURCE_CLUSTER_ID_KEY, ""))


def topic_membership(image: MetadataImage, topic: str) -> Membership | None:
    """The topic's membership from its `mirror.name` config; None when not in any mirror."""
    return parse_mirror_name_config(image.topic_config(topic).get(MIRROR_NAME_CONFIG))


def mirror_topics(image: MetadataImage, name: str, *, include_removed: bool = False) -> dict[str, Membership]:
    """Topics attached to mirror `name` (active or paused; removed ones on request), by name."""
    out: dict[str, Membership] = {}
    for resource, values in image.configs.items():
        if resource.type != ConfigResourceType.TOPIC or resource.name not in image.topics:
            continue
        membership = parse_mirror_name_config(values.get(MIRROR_NAME_CONFIG))
        if membership is None or membership.mirror_name != name:
            continue
        if membership.status is MembershipStatus.REMOVED and not include_removed:
            continue
        out[resource.name] = membership
    return dict(sorted(out.items()))


UNSUPPORTED_VERSION_CODE = 35


class CachedStateView(Protocol):
    """A cached answer to "which state is this mirrored partition in" (the partition leader's
    `MirrorManager`, the local `MirrorCoordinatorService`)."""

    def cached_state(self, mirror_name: str, topic_id: UUID, partition: int) -> MirrorPartitionState | None: ...


class PartitionLeaderView(CachedStateView, Protocol):
    """What the partition leader's `MirrorManager` tells about a partition it leads."""

    def source_topic_deleted(self, mirror_name: str, topic_id: UUID, partition: int) -> bool: ...


def topic_partition_write_refusal(
    image: MetadataImage | None, topic: str, partition: int, coordinator: CachedStateView | None,
    leader: PartitionLeaderView | None = None,
) -> WriteRefusal | None:
    """Whether Produce / DeleteRecords are refused, and why (`membership.write_refusal`). The
    partition state is the partition leader's (`MirrorManager.cached_state`: what it
    persisted through the coordinator), else the local MirrorCoordinatorService's cached
    answer (the key may be coordinated by another broker), None while unknown (an attached
    topic is then refused: the safe side). No image: no mirrors."""
    if image is None:
        return None
    membership = topic_membership(image, topic)
    if membership is None:
        return None
    state = None
    deleted = False
    topic_image = image.topics.get(topic)
    if topic_image is not None:
        for view in (leader, coordinator):
            if view is not None and state is None:
                state = view.cached_state(membership.mirror_name, topic_image.topic_id, partition)
        deleted = leader is not None and leader.source_topic_deleted(membership.mirror_name, topic_image.topic_id,
                                                                     partition)
    return write_refusal(membership, state, source_topic_deleted=deleted)

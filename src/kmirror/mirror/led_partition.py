"""Which mirrored partitions a destination broker leads, what it keeps about each (the cached
persisted state and why it stopped or failed), and what DescribeMirrors reports of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from uuid import UUID

from kmirror.kip1279.membership import MIRROR_NAME_CONFIG, MembershipStatus, parse_mirror_name_config
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.metadata.image import MetadataImage
from kmirror.mirror.lifecycle_ports import PartitionKey
from kmirror.types import TopicPartition

S = MirrorPartitionState


@dataclass(slots=True)
class MirroredPartitionState:
    key: PartitionKey
    state: MirrorPartitionState = S.UNKNOWN
    last_mirrored_epoch: int = -1
    source_supports_last_mirrored_epoch: bool = True
    """False when the source answered the LME query as a cluster without DescribeMirrors
    (KIP: copy from scratch, as for -1); `last_mirrored_epoch` is then -1, never a marker."""
    truncation_offset: int | None = None
    failure: str | None = None
    source_topic_gone: str | None = None
    """Why the source topic is no longer the mirror's (deleted, or re-created under another
    topic id), as this leader last saw it; None while the source lists the mirror's id."""
    waiting: str | None = None
    """What the partition's plan waits for, as its leader last tried it (replicas still
    truncating, the coordinator, the source); None once a plan ran to its end."""


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    source_offset: int
    destination_offset: int
    lag: int
    state: MirrorPartitionState
    last_mirror_epoch: int
    reason: str | None = None


def describe_partition(mp: MirroredPartitionState, destination_offset: int,
                       source_high_watermark: int) -> PartitionDescription:
    """DescribeMirrors' view of one partition (-1: unknown offset); the reason of a stopped or
    failed partition: its source topic gone, else its failure; of a partition on its way to
    MIRRORING or STOPPED, what it waits for."""
    lag = (max(0, source_high_watermark - destination_offset)
           if source_high_watermark >= 0 and destination_offset >= 0 else -1)
    done = (MirrorPartitionState.STOPPING, MirrorPartitionState.STOPPED, MirrorPartitionState.FAILED)
    reason = mp.source_topic_gone if mp.state in done else None
    failure = mp.failure if mp.state is MirrorPartitionState.FAILED else None
    waiting = mp.waiting if mp.state in (MirrorPartitionState.PREPARING, MirrorPartitionState.STOPPING) else None
    return PartitionDescription(source_high_watermark, destination_offset, lag, mp.state, mp.last_mirrored_epoch,
                                reason or failure or waiting)


def led_mirror_partitions(image: MetadataImage, broker_id: int) -> dict[TopicPartition, tuple[str, UUID]]:
    """The partitions `broker_id` leads whose topic carries a valid `mirror.name`: its value
    and the topic id."""
    out: dict[TopicPartition, tuple[str, UUID]] = {}
    for name, topic in image.topics.items():
        value = image.topic_config(name).get(MIRROR_NAME_CONFIG)
        if value is None or parse_mirror_name_config(value) is None:
            continue
        for p, reg in topic.partitions.items():
            if reg.leader == broker_id:
                out[TopicPartition(name, p)] = (value, topic.topic_id)
    return out


def removed_not_stopped(led: Mapping[TopicPartition, tuple[str, UUID]],
                        partitions: Mapping[TopicPartition, MirroredPartitionState]) -> bool:
    """Whether a led partition (`led_mirror_partitions`) is removed from its mirror (a
    failover) and not known STOPPED in `partitions`."""
    values = {value for value, _ in led.values()}  # one parse per distinct mirror.name value
    removed = {v for v in values
               if (m := parse_mirror_name_config(v)) is not None and m.status is MembershipStatus.REMOVED}
    return bool(removed) and any(
        value in removed and ((mp := partitions.get(tp)) is None or mp.state is not MirrorPartitionState.STOPPED)
        for tp, (value, _) in led.items())

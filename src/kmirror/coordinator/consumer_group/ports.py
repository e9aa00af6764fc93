"""What the consumer and share group logic needs from the group coordinator core, named as a
`typing.Protocol` so the core (which also serves classic groups) can be passed in."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.group.group import ClassicGroup
from kmirror.coordinator.group.sensors import GroupCoordinatorSensors
from kmirror.coordinator.results import GroupOutput
from kmirror.coordinator.share_group.group import ShareGroup
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.metadata.image import MetadataImage
from kmirror.ports import Clock
from kmirror.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: uuid.UUID
    partitions: int


# The cluster's topics as the coordinator sees them at a heartbeat: name -> id, partitions.
TopicsView = Mapping[str, TopicInfo]


def topics_of(image: MetadataImage | None) -> TopicsView:
    """The topics of a metadata image as the group coordinator uses them."""
    if image is None:
        return {}
    return {name: TopicInfo(t.topic_id, len(t.partitions)) for name, t in image.topics.items()}


def topic_names(topics: TopicsView) -> dict[uuid.UUID, str]:
    return {info.topic_id: name for name, info in topics.items()}


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A group's dynamic GROUP-resource configs (Kafka `GroupConfig`); None: the broker's
    `group.consumer.*` default."""

    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None


BROKER_DEFAULTS = GroupConfig()


class GroupsCore(Protocol):
    config: CoordinatorConfig
    clock: Clock
    sensors: GroupCoordinatorSensors

    @property
    def groups(self) -> dict[str, ClassicGroup]: ...

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]: ...

    @property
    def share_groups(self) -> dict[str, ShareGroup]: ...

    @property
    def share_states(self) -> dict[ShareStateKey, ShareSnapshot]: ...

    def coordinator_error(self, group_id: str) -> ErrorCode | None: ...

    def new_uuid(self) -> str: ...

    def topics(self) -> TopicsView:
        """The cluster's topics now (Kafka `GroupMetadataManager`'s metadata image)."""
        ...

    def fail_classic_waiters(self, group: ClassicGroup, error: ErrorCode) -> GroupOutput:
        """Answer the classic group's waiting JoinGroup and SyncGroup requests with `error`."""
        ...

    def prepare_rebalance(self, group: ClassicGroup, out: GroupOutput, new_member: bool = False) -> None: ...

    def append(
        self,
        group_id: str,
        records: list[tuple[bytes, bytes | None]],
        on_success: Callable[[], GroupOutput],
        on_failure: Callable[[ErrorCode], GroupOutput],
    ) -> GroupOutput: ...

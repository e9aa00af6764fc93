"""A KIP-932 share group and its members, as the group coordinator keeps them (Kafka
`ShareGroup`, `ShareGroupMember`).

A share group's state is derived, never set: Empty without members, else Stable. There is
no reconciliation: partitions are shared, so a member is given its target assignment at
once and its member epoch is the group's assignment epoch.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from enum import Enum

from kmirror.coordinator.consumer_group.member import TopicPartitions  # topic id -> partitions


class ShareGroupState(Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: TopicPartitions = field(default_factory=dict)

    def with_changes(self, **changes: object) -> ShareGroupMember:
        return replace(self, **changes)  # type: ignore[arg-type]  # dataclass fields by name


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    # member id -> monotonic ms its session ends unless it heartbeats again
    session_deadline_ms: dict[str, int] = field(default_factory=dict)
    # the subscribed topics' (id, partitions) the target assignment was computed for
    subscribed_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    # member id -> its partitions at `assignment_epoch`
    target: dict[str, TopicPartitions] = field(default_factory=dict)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

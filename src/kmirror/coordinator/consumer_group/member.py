"""A member of a KIP-848 consumer group (Kafka `ConsumerGroupMember`): its subscription,
its epochs and its current assignment. A value the group core replaces, never shares."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from kmirror.coordinator.consumer_group.state import MemberState

# topic id -> partitions
TopicPartitions = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: TopicPartitions = field(default_factory=dict)
    pending_revocation: TopicPartitions = field(default_factory=dict)

    def with_changes(self, **changes: object) -> ConsumerGroupMember:
        return replace(self, **changes)  # type: ignore[arg-type]

    def owned(self) -> set[tuple[uuid.UUID, int]]:
        """Partitions the group counts as this member's: assigned or still being revoked."""
        return {(t, p) for tps in (self.assigned, self.pending_revocation) for t, ps in tps.items() for p in ps}

    def subscription_key(self) -> tuple[object, ...]:
        """What, when it changes, bumps the group epoch (Kafka `hasMemberSubscriptionChanged`)."""
        return (self.subscribed_topic_names, self.subscribed_topic_regex, self.server_assignor, self.rack_id)

"""A member of a KIP-848 consumer group (Kafka `ConsumerGroupMember`): its subscription,
its epochs and its current assignment. A value the group core replaces, never shares.

A member that joined through JoinGroup (a classic consumer in a consumer group, online
migration) carries `classic`: its session timeout and the protocols it offered, as Kafka's
`ConsumerGroupMemberMetadataValue.ClassicMemberMetadata`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from kmirror.coordinator.consumer_group.state import MemberState
from kmirror.coordinator.group.member import Protocol

# topic id -> partitions
TopicPartitions = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    session_timeout_ms: int
    # the JoinGroup protocols in the member's order of preference; all carry the same
    # `consumer` subscription (Kafka reads the first)
    supported_protocols: tuple[Protocol, ...]

    @property
    def protocol_name(self) -> str:
        """The name a classic member's JoinGroup and SyncGroup answers carry (Kafka: its first)."""
        return self.supported_protocols[0].name if self.supported_protocols else ""

    @property
    def metadata(self) -> bytes:
        return self.supported_protocols[0].metadata if self.supported_protocols else b""

    def protocol_names(self) -> set[str]:
        return {p.name for p in self.supported_protocols}


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
    # None for a member of the consumer protocol (ConsumerGroupHeartbeat)
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def with_changes(self, **changes: object) -> ConsumerGroupMember:
        return replace(self, **changes)  # type: ignore[arg-type]

    def owned(self) -> set[tuple[uuid.UUID, int]]:
        """Partitions the group counts as this member's: assigned or still being revoked."""
        return {(t, p) for tps in (self.assigned, self.pending_revocation) for t, ps in tps.items() for p in ps}

    def subscription_key(self) -> tuple[object, ...]:
        """What, when it changes, bumps the group epoch (Kafka `hasMemberSubscriptionChanged`)."""
        return (self.subscribed_topic_names, self.subscribed_topic_regex, self.server_assignor, self.rack_id)

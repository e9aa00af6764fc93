"""A classic group's metadata (Kafka `ClassicGroup`): members, generation, protocol, offsets.

The group is a value the coordinator core mutates; it owns no timers or persistence.
Deadlines are plain monotonic-millisecond numbers the core compares with `now_ms`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from kmirror.coordinator.group.member import MemberMetadata, Protocol
from kmirror.coordinator.group.state import GroupState, transition
from kmirror.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from kmirror.types import TopicPartition


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    # an OffsetCommit v2-v4 that named a retention time: the offset expires at this wall
    # time instead of by `offsets.retention.minutes` (Kafka `OffsetAndMetadata.expireTimestampMs`)
    expire_timestamp_ms: int | None = None


@dataclass
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    # wall time of the last state change (Kafka `currentStateTimestamp`); -1: unknown (loaded
    # from a group metadata value before v2). An Empty group's offsets expire from it.
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    # group.instance.id -> member id of the static members (KIP-345).
    static_members: dict[str, str] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED, not yet rejoined (KIP-394); value: deadline.
    pending_members: dict[str, int] = field(default_factory=dict)
    # Members of the current generation that have not yet sent SyncGroup.
    pending_sync_members: set[str] = field(default_factory=set)
    # member id -> monotonic deadline after which its session has expired.
    heartbeat_deadline_ms: dict[str, int] = field(default_factory=dict)
    # The delayed join: when it expires the rebalance completes with whoever rejoined.
    join_deadline_ms: int | None = None
    # `group.initial.rebalance.delay.ms` of a new group: each new member pushes the join
    # deadline out by the delay, never past this limit (Kafka `InitialDelayedJoin`).
    initial_delay_limit_ms: int | None = None
    sync_deadline_ms: int | None = None
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        self.state = transition(self.state, target)
        self.state_timestamp_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return not self.members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def add_member(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove_member(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        self.heartbeat_deadline_ms.pop(member_id, None)
        self.pending_sync_members.discard(member_id)
        if member is not None and member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if member_id == self.leader_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        """Every known member rejoined and no MEMBER_ID_REQUIRED handshake is outstanding."""
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def supports_protocols(self, protocol_type: str, protocols: tuple[Protocol, ...]) -> bool:
        """Kafka `supportsProtocols`: an empty group takes any non-empty offer; otherwise the
        type must match and one offered protocol must be supported by every member."""
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        offered = {p.name for p in protocols}
        return bool(offered & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def select_protocol(self) -> str:
        """Kafka `selectProtocol`: each member votes for its preferred common protocol."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id} has no protocol common to all members")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        # Ties go to the leader's preference order, for a deterministic choice.
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        for name in leader.protocol_names():
            if votes.get(name) == best:
                return name
        return sorted(n for n, c in votes.items() if c == best)[0]

    def init_next_generation(self, now_ms: int) -> None:
        """Kafka `initNextGeneration`: bump the generation; CompletingRebalance with members,
        Empty without."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)


def group_subscribed_topics(group: ClassicGroup) -> set[str] | None:
    """Every member's subscribed topics, or None when the group is not a consumer group."""
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        topics |= subscribed_topics(member.metadata_for(group.protocol_name))
    return topics

"""A KIP-848 consumer group (Kafka `ConsumerGroup`): members, the group epoch, the target
assignment and its epoch, who owns which partition, and the group's committed offsets.

A value the core mutates; it owns no timers or persistence. Deadlines are monotonic ms.
Invariants:
- `assignment_epoch <= group_epoch`; every member's epoch <= `assignment_epoch`;
- `owners` maps each partition some member owns (assigned or pending revocation) to it,
  and a partition has at most one owner.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kmirror.coordinator.consumer_group.assignors import Assignment
from kmirror.coordinator.consumer_group.member import ConsumerGroupMember
from kmirror.coordinator.consumer_group.state import ConsumerGroupState, MemberState
from kmirror.coordinator.group.group import OffsetAndMetadata
from kmirror.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from kmirror.types import TopicPartition


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    target: Assignment = field(default_factory=dict)
    # group.instance.id -> member id
    static_members: dict[str, str] = field(default_factory=dict)
    owners: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # topic id -> partition count of the subscribed topics the target assignment was built
    # from; None after a load (it is not stored) until the first heartbeat
    subscribed_metadata: dict[uuid.UUID, int] | None = field(default_factory=dict)
    # member id -> monotonic deadline of its session, and of its revocation (rebalance timeout)
    session_deadline_ms: dict[str, int] = field(default_factory=dict)
    revocation_deadline_ms: dict[str, int] = field(default_factory=dict)
    # classic members (online migration): the JoinGroup expected after REBALANCE_IN_PROGRESS and
    # the SyncGroup expected after a JoinGroup, each within the rebalance timeout (Kafka's
    # consumer group join and sync timers)
    join_deadline_ms: dict[str, int] = field(default_factory=dict)
    sync_deadline_ms: dict[str, int] = field(default_factory=dict)
    # the assignor of the last target assignment (ConsumerGroupDescribe's AssignorName)
    assignor_name: str = ""

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def is_empty(self) -> bool:
        return not self.members

    def owner_of(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.owners.get((topic_id, partition))

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Put `member` in place of its previous version, moving partition ownership."""
        old = self.members.get(member.member_id)
        if old is not None:
            for tp in old.owned():
                if self.owners.get(tp) == member.member_id:
                    del self.owners[tp]
        self.members[member.member_id] = member
        for tp in member.owned():
            self.owners[tp] = member.member_id
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        for deadlines in self.deadlines():
            deadlines.pop(member_id, None)
        self.target.pop(member_id, None)
        if member is None:
            return None
        for tp in member.owned():
            if self.owners.get(tp) == member_id:
                del self.owners[tp]
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    def deadlines(self) -> tuple[dict[str, int], ...]:
        """Every per-member timer; a member whose deadline passes is fenced."""
        return self.session_deadline_ms, self.revocation_deadline_ms, self.join_deadline_ms, self.sync_deadline_ms

    def classic_members(self) -> list[ConsumerGroupMember]:
        return [m for m in self.members.values() if m.uses_classic_protocol]

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Kafka `ConsumerGroup.supportsClassicProtocols`: a classic member may join when it uses
        the `consumer` protocol type and offers a protocol every classic member supports."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        for member in self.classic_members():
            assert member.classic is not None
            names = names & member.classic.protocol_names()
        return bool(names)

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Kafka `waitingOnUnreleasedPartition`: the member waits for a partition of its target
        that another member still owns."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target.get(member.member_id, {}).items():
            for p in partitions - member.assigned.get(topic_id, frozenset()):
                if self.owners.get((topic_id, p)) not in (None, member.member_id):
                    return True
        return False

    def target_covers(self, metadata: dict[uuid.UUID, int]) -> bool:
        """The target assignment hands out exactly the partitions of `metadata`'s topics."""
        targeted = {(t, p) for tps in self.target.values() for t, ps in tps.items() for p in ps}
        return targeted == {(t, p) for t, n in metadata.items() for p in range(n)}

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

"""The server-side assignors of KIP-848 (Kafka `UniformAssignor`, `RangeAssignor`).

An assignor is a pure function: the members' subscriptions, the subscribed topics' partition
counts and the current target assignment in, the next target assignment out. Topics are
named by topic id, as in Kafka's records and the ConsumerGroupHeartbeat response.

- `uniform` (Kafka's default): every subscribed partition goes to one subscriber; each member
  gets floor or ceil of its fair share; a partition stays with its current owner while the
  owner is under its quota (sticky), so a membership change moves as few partitions as it can.
- `range`: per topic, the subscribers sorted by member id each take a contiguous range
  (the first `partitions % members` take one more), which co-partitions topics of equal size.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

# member id -> topic id -> partitions
Assignment = dict[str, dict[uuid.UUID, frozenset[int]]]


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    member_id: str
    topic_ids: frozenset[uuid.UUID]


class Assignor(Protocol):
    name: str

    def assign(
        self,
        members: list[MemberSubscription],
        partition_counts: Mapping[uuid.UUID, int],
        current: Assignment,
    ) -> Assignment: ...


def _empty(members: list[MemberSubscription]) -> dict[str, dict[uuid.UUID, set[int]]]:
    return {m.member_id: {} for m in members}


def _freeze(raw: dict[str, dict[uuid.UUID, set[int]]]) -> Assignment:
    return {m: {t: frozenset(ps) for t, ps in topics.items() if ps} for m, topics in raw.items()}


class UniformAssignor:
    """Balanced and sticky. Homogeneous and heterogeneous subscriptions are handled alike:
    partitions are placed topic by topic, each with the subscribers of that topic, keeping a
    member's load within one partition of every other subscriber's where the subscriptions
    allow it."""

    name = "uniform"

    def assign(
        self,
        members: list[MemberSubscription],
        partition_counts: Mapping[uuid.UUID, int],
        current: Assignment,
    ) -> Assignment:
        result = _empty(members)
        load = {m.member_id: 0 for m in members}
        subscribers: dict[uuid.UUID, list[str]] = {}
        for m in sorted(members, key=lambda m: m.member_id):
            for topic_id in m.topic_ids:
                if topic_id in partition_counts:
                    subscribers.setdefault(topic_id, []).append(m.member_id)
        total_by_member: dict[str, float] = {m.member_id: 0.0 for m in members}
        for topic_id, subs in subscribers.items():
            for s in subs:
                total_by_member[s] += partition_counts[topic_id] / len(subs)
        # a member's quota: its fair share of everything it subscribes to, rounded up
        quota = {m: max(1, math.ceil(share - 1e-9)) for m, share in total_by_member.items()}
        unassigned: list[tuple[uuid.UUID, int]] = []
        # Stickiness: keep current owners under quota.
        for topic_id in sorted(subscribers, key=str):
            for p in range(partition_counts[topic_id]):
                owner = next(
                    (m for m in subscribers[topic_id] if p in current.get(m, {}).get(topic_id, frozenset())), None
                )
                if owner is not None and load[owner] < quota[owner]:
                    result[owner].setdefault(topic_id, set()).add(p)
                    load[owner] += 1
                else:
                    unassigned.append((topic_id, p))
        # The rest go to the least-loaded subscriber (ties by member id, for determinism).
        for topic_id, p in unassigned:
            target = min(subscribers[topic_id], key=lambda m: (load[m], m))
            result[target].setdefault(topic_id, set()).add(p)
            load[target] += 1
        return _balance(_freeze(result), subscribers)


def _balance(assignment: Assignment, subscribers: Mapping[uuid.UUID, list[str]]) -> Assignment:
    """Move partitions from the most to the least loaded subscriber of their topic until no
    move narrows the gap (stickiness may leave a member over its share after a join)."""
    raw = {m: {t: set(ps) for t, ps in topics.items()} for m, topics in assignment.items()}

    def load(member: str) -> int:
        return sum(len(ps) for ps in raw[member].values())

    moved = True
    while moved:
        moved = False
        for topic_id, subs in subscribers.items():
            if len(subs) < 2:
                continue
            heavy = max(subs, key=lambda m: (load(m), m))
            light = min(subs, key=lambda m: (load(m), m))
            if load(heavy) - load(light) > 1 and raw[heavy].get(topic_id):
                p = max(raw[heavy][topic_id])
                raw[heavy][topic_id].discard(p)
                raw[light].setdefault(topic_id, set()).add(p)
                moved = True
    return _freeze(raw)


class RangeAssignor:
    name = "range"

    def assign(
        self,
        members: list[MemberSubscription],
        partition_counts: Mapping[uuid.UUID, int],
        current: Assignment,
    ) -> Assignment:
        result = _empty(members)
        topics = {t for m in members for t in m.topic_ids if t in partition_counts}
        for topic_id in sorted(topics, key=str):
            subs = sorted(m.member_id for m in members if topic_id in m.topic_ids)
            count = partition_counts[topic_id]
            per, extra = divmod(count, len(subs))
            start = 0
            for i, member_id in enumerate(subs):
                size = per + (1 if i < extra else 0)
                if size:
                    result[member_id][topic_id] = set(range(start, start + size))
                start += size
        return _freeze(result)


ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
DEFAULT_ASSIGNORS = ("uniform", "range")

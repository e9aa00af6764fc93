"""The share group assignor ("simple", Kafka's only share assignor by name).

Share partitions may have several consumers, so every subscribed partition is assigned to at
least one member. Per topic, with its subscribers sorted by member id and its partitions in
order: when there are at least as many partitions as subscribers, partition p goes to
subscriber p mod n; otherwise subscriber i takes partition i mod p, so every subscriber gets
one and the partitions are shared as evenly as possible. The result depends only on the
members and the topics, so each member's assignment is stable while they do not change.
Kafka's SimpleAssignor also keeps the previous assignment where it can; kmirror recomputes
it (a share partition has no owner to hand over, so a move costs nothing but the fetch
sessions' partitions).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from kmirror.coordinator.share_group.group import ShareGroupMember, TopicPartitions

NAME = "simple"


def assign(members: Mapping[str, ShareGroupMember],
           topics: Mapping[str, tuple[uuid.UUID, int]]) -> dict[str, TopicPartitions]:
    """member id -> its partitions; `topics`: subscribed topic name -> (id, partition count),
    the topics the cluster has (a subscribed name it lacks is left out)."""
    assignment: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for name, (topic_id, count) in sorted(topics.items()):
        subscribers = sorted(m for m, member in members.items() if name in member.subscribed_topic_names)
        if not subscribers or count <= 0:
            continue
        if count >= len(subscribers):
            pairs = ((subscribers[p % len(subscribers)], p) for p in range(count))
        else:
            pairs = ((member_id, i % count) for i, member_id in enumerate(subscribers))
        for member_id, partition in pairs:
            assignment[member_id].setdefault(topic_id, set()).add(partition)
    return {m: {t: frozenset(ps) for t, ps in tps.items()} for m, tps in assignment.items()}

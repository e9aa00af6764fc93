"""Leader and ISR changes (Kafka's `PartitionChangeBuilder` and `ReplicationControlManager`).

Rules (Kafka's KRaft controller, without ELR):
- A leader must be an ISR member that is *eligible*: registered, unfenced and not in
  controlled shutdown. A clean election picks the first eligible ISR member in replica order.
- The ISR never becomes empty: removing its last member keeps that member in the ISR and leaves
  the partition offline (leader -1), so it can come back as a clean leader.
- With no eligible ISR member, an unclean election (topic `unclean.leader.election.enable`, else
  the broker's) picks the first eligible replica and sets ISR = [it]; the caller logs a WARN,
  since records acknowledged by the old ISR may be lost.
- Every change bumps the partition epoch; a new leader (including -1) bumps the leader epoch
  (`PartitionRegistration.merge`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

from kmirror.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from kmirror.metadata.records import NO_LEADER, NO_LEADER_CHANGE, PartitionChangeRecord


@dataclass(frozen=True, slots=True)
class Election:
    """The outcome of choosing a leader: `leader` (-1 when offline) and whether it was unclean."""

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def eligible_brokers(image: MetadataImage, shutting_down: Collection[int] = ()) -> frozenset[int]:
    """Brokers that may lead or join an ISR: registered, unfenced, not in controlled shutdown."""
    return frozenset(
        b.broker_id for b in image.brokers.values()
        if not b.fenced and not b.in_controlled_shutdown and b.broker_id not in shutting_down
    )


def eligible_for(image: MetadataImage, reg: PartitionRegistration, eligible: Collection[int]) -> Collection[int]:
    """`eligible` without the replicas of `reg` whose log directory is offline (KIP-858)."""
    offline = image.offline_replicas(reg)
    return eligible if not offline else frozenset(eligible) - set(offline)


def unclean_allowed(image: MetadataImage, topic: str, broker_default: bool) -> bool:
    """`unclean.leader.election.enable`: the topic's value, else the broker's."""
    value = image.topic_config(topic).get("unclean.leader.election.enable")
    return broker_default if value is None else value.strip().lower() == "true"


def elect(reg: PartitionRegistration, isr: tuple[int, ...], eligible: Collection[int], unclean_ok: bool) -> Election:
    """A clean leader from `isr` (replica order), else an unclean one if allowed, else offline."""
    for b in reg.replicas:
        if b in isr and b in eligible:
            return Election(b, isr)
    if unclean_ok:
        for b in reg.replicas:
            if b in eligible:
                return Election(b, (b,), unclean=True)
    return Election(NO_LEADER, isr)


def change_record(
    topic_id: uuid.UUID, partition_id: int, reg: PartitionRegistration, election: Election
) -> PartitionChangeRecord | None:
    """The record moving `reg` to `election`, or None when nothing changes."""
    isr_changed = election.isr != reg.isr
    leader_changed = election.leader != reg.leader
    if not isr_changed and not leader_changed:
        return None
    return PartitionChangeRecord(
        partition_id,
        topic_id,
        isr=election.isr if isr_changed else None,
        leader=election.leader if leader_changed else NO_LEADER_CHANGE,
    )


def partitions_of_broker(image: MetadataImage, broker_id: int) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    for topic in image.topics.values():
        for pid, reg in topic.partitions.items():
            if broker_id in reg.replicas:
                yield topic, pid, reg


def remove_broker_from_isrs(
    image: MetadataImage, broker_id: int, eligible: Collection[int], broker_unclean_default: bool,
    only: Callable[[PartitionRegistration], bool] | None = None,
) -> tuple[list[PartitionChangeRecord], list[tuple[str, int, int]]]:
    """Records taking `broker_id` out of every ISR and leadership (fencing, controlled shutdown),
    or only out of those of the partitions `only` selects (a failed log directory).

    Returns `(records, unclean)` where `unclean` lists `(topic, partition, new_leader)` elected
    uncleanly, for the caller's data-loss warning."""
    records: list[PartitionChangeRecord] = []
    unclean: list[tuple[str, int, int]] = []
    for topic, pid, reg in partitions_of_broker(image, broker_id):
        if broker_id not in reg.isr and reg.leader != broker_id:
            continue
        if only is not None and not only(reg):
            continue
        isr = tuple(b for b in reg.isr if b != broker_id) or reg.isr
        candidates = eligible_for(image, reg, eligible)
        if reg.leader != broker_id and reg.leader in candidates and reg.leader in isr:
            election = Election(reg.leader, isr)
        else:
            election = elect(reg, isr, candidates, unclean_allowed(image, topic.name, broker_unclean_default))
        record = change_record(topic.topic_id, pid, reg, election)
        if record is not None:
            records.append(record)
            if election.unclean:
                unclean.append((topic.name, pid, election.leader))
    return records, unclean


def elect_offline_partitions(
    image: MetadataImage, eligible: Collection[int], broker_unclean_default: bool, only_broker: int | None = None
) -> tuple[list[PartitionChangeRecord], list[tuple[str, int, int]]]:
    """Leaders for offline partitions (leader -1) that now have an eligible candidate, e.g. when
    the last ISR member is unfenced (Kafka `handleBrokerUnfenced`)."""
    records: list[PartitionChangeRecord] = []
    unclean: list[tuple[str, int, int]] = []
    for topic in image.topics.values():
        for pid, reg in topic.partitions.items():
            if reg.leader != NO_LEADER or (only_broker is not None and only_broker not in reg.replicas):
                continue
            election = elect(reg, reg.isr, eligible_for(image, reg, eligible),
                             unclean_allowed(image, topic.name, broker_unclean_default))
            if election.leader == NO_LEADER:
                continue
            record = change_record(topic.topic_id, pid, reg, election)
            if record is not None:
                records.append(record)
                if election.unclean:
                    unclean.append((topic.name, pid, election.leader))
    return records, unclean


def preferred_leader_change(
    topic_id: uuid.UUID, partition_id: int, reg: PartitionRegistration, eligible: Collection[int]
) -> PartitionChangeRecord | None:
    """The change making the preferred replica (first in `replicas`) the leader, if it is an
    eligible ISR member and not already leading."""
    preferred = reg.replicas[0] if reg.replicas else NO_LEADER
    if preferred == reg.leader or preferred not in reg.isr or preferred not in eligible:
        return None
    return PartitionChangeRecord(partition_id, topic_id, leader=preferred)


def imbalanced_partitions(image: MetadataImage, eligible: Collection[int]) -> list[PartitionChangeRecord]:
    """Preferred elections for every partition not led by its eligible preferred replica
    (`auto.leader.rebalance.enable`)."""
    out: list[PartitionChangeRecord] = []
    for topic in image.topics.values():
        for pid, reg in topic.partitions.items():
            record = preferred_leader_change(topic.topic_id, pid, reg, eligible_for(image, reg, eligible))
            if record is not None:
                out.append(record)
    return out

"""Classic and consumer groups side by side in one coordinator (Kafka 4's rules):

- a group id is either a classic group or a consumer group;
- JoinGroup for an empty consumer group downgrades it: its consumer-group records are
  tombstoned and a classic group takes its place with its offsets;
- a first ConsumerGroupHeartbeat for an empty classic group upgrades it (see `heartbeat`);
- groups with members migrate online (`migration`): a ConsumerGroupHeartbeat upgrades a classic
  group, whose classic members then JoinGroup into the consumer group (`classic_join`), and the
  last member of the consumer protocol leaving downgrades it;
- after a load, a group id with both kinds of records is the consumer group when its classic
  part is only offsets (the upgrade tombstoned the classic metadata), and offsets follow it.

`group.consumer.migration.policy` governs online migration only, as in Kafka; conversions of
empty groups happen under every policy.
"""

from __future__ import annotations

from kmirror.coordinator.consumer_group import records
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.consumer_group.ports import GroupsCore
from kmirror.coordinator.group.group import ClassicGroup
from kmirror.coordinator.results import GroupOutput


def before_classic_join(core: GroupsCore, group_id: str, out: GroupOutput) -> None:
    """An empty consumer group of that id is replaced by an (empty) classic group holding its
    offsets, which the JoinGroup then joins (a consumer group with members takes the JoinGroup
    itself: `classic_join`)."""
    group = core.consumer_groups.get(group_id)
    if group is None or not group.is_empty:
        return
    del core.consumer_groups[group_id]
    classic = ClassicGroup(group_id, state_timestamp_ms=core.clock.now_ms())
    classic.offsets.update(group.offsets)
    core.groups[group_id] = classic
    out.extend(core.append(group_id, records.group_tombstones(group_id), GroupOutput, lambda _e: GroupOutput()))


def merge_loaded(classic: dict[str, ClassicGroup], consumer: dict[str, ConsumerGroup]) -> None:
    """Offsets of a consumer group were replayed into an offsets-only classic group: move them."""
    for group_id, group in consumer.items():
        other = classic.get(group_id)
        if other is not None and other.is_empty and other.generation_id == 0:
            group.offsets.update(other.offsets)
            del classic[group_id]

"""Topic metadata sync of one mirror, as a plan (KIP-1279 "MirrorMetadataManager": source
cluster id validation, partition expansion, configuration sync).

`plan_topic_sync(view, source)` compares what the source answered with the destination
image and returns what to do, no I/O:
- the source's cluster id differs from the one the controller recorded for the mirror
  (`mirror.source.cluster.id`, set at the first AddTopicsToMirror): `HaltSync` and nothing
  else. KIP: "metadata sync for that mirror is halted and an error is logged". An empty id
  on either side (none recorded yet, a source that reports none) is not a mismatch.
- per ACTIVE mirror topic (paused and removed ones are not synced, KIP "Pause Topics": "
  Metadata synchronization (configs, groups, ACLs) is also halted for the paused topics")
  whose source topic has the destination's topic id (another id is another topic: never
  synced onto this one):
  - `CreatePartitions(topic, count)` when the source has more partitions;
  - `AlterTopicConfigs(topic, ops)`: SET every copied source config the destination lacks
    or holds with another value, DELETE every synced destination config the source does
    not set. Copied = the source's dynamic topic configs minus
    `mirror.topic.properties.exclude` (and `mirror.name`); synced = the destination's topic
    configs minus the same exclusions and minus the destination-local mirror topic configs
    (`MIRROR_TOPIC_CONFIG_DEFS`). Destination-side changes are thus overridden every cycle
    (KIP: "these changes are periodically overridden").
A topic the source does not have (deleted: the partition leaders stop it) or answered with
an error for is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from uuid import UUID

from kmirror.config.mirror import MIRROR_TOPIC_CONFIG_DEFS, MirrorConfig
from kmirror.metadata.controller.config_ops import AlterableConfig, AlterConfigOp
from kmirror.mirror.source_lookup import SourceDescription, SourceTopic

DESTINATION_LOCAL_TOPIC_CONFIGS = frozenset(d.name for d in MIRROR_TOPIC_CONFIG_DEFS)
"""Mirror topic configs that belong to the destination (never copied, never deleted)."""


@dataclass(frozen=True, slots=True)
class DestinationTopic:
    topic_id: UUID
    num_partitions: int
    configs: Mapping[str, str]
    """The topic's dynamic configs in the destination image."""


@dataclass(frozen=True, slots=True)
class MirrorTopicsView:
    """The destination's side of one mirror: its recorded source cluster id, its parsed
    configs and its ACTIVE topics (paused and removed ones are left out by the caller)."""

    mirror_name: str
    source_cluster_id: str
    config: MirrorConfig
    topics: Mapping[str, DestinationTopic]


@dataclass(frozen=True, slots=True)
class HaltSync:
    mirror_name: str
    expected_cluster_id: str
    source_cluster_id: str

    @property
    def reason(self) -> str:
        return (f"source cluster id is {self.source_cluster_id}, mirror {self.mirror_name} was created with "
                f"{self.expected_cluster_id}")


@dataclass(frozen=True, slots=True)
class CreatePartitions:
    topic: str
    count: int
    """The new total partition count (Kafka's CreatePartitions `count`)."""


@dataclass(frozen=True, slots=True)
class AlterTopicConfigs:
    topic: str
    ops: tuple[AlterableConfig, ...]


Action = CreatePartitions | AlterTopicConfigs


@dataclass(frozen=True, slots=True)
class TopicSyncPlan:
    halt: HaltSync | None = None
    actions: tuple[Action, ...] = field(default_factory=tuple)


def cluster_id_mismatch(expected: str, observed: str) -> bool:
    """A recorded id and an observed id that are both known and differ."""
    return bool(expected) and bool(observed) and expected != observed


def synced_configs(config: MirrorConfig, configs: Mapping[str, str]) -> dict[str, str]:
    """The configs topic config sync owns (copies, or deletes at the destination)."""
    return {k: v for k, v in config.topic_configs_to_copy(configs).items() if k not in DESTINATION_LOCAL_TOPIC_CONFIGS}


def config_ops(config: MirrorConfig, source: Mapping[str, str], destination: Mapping[str, str]) -> tuple[AlterableConfig, ...]:
    wanted = synced_configs(config, source)
    held = synced_configs(config, destination)
    sets = [AlterableConfig(k, AlterConfigOp.SET, v) for k, v in sorted(wanted.items()) if held.get(k) != v]
    deletes = [AlterableConfig(k, AlterConfigOp.DELETE, None) for k in sorted(held) if k not in wanted]
    return (*sets, *deletes)


def plan_topic_sync(view: MirrorTopicsView, source: SourceDescription) -> TopicSyncPlan:
    if cluster_id_mismatch(view.source_cluster_id, source.cluster_id):
        return TopicSyncPlan(halt=HaltSync(view.mirror_name, view.source_cluster_id, source.cluster_id))
    actions: list[Action] = []
    for name, dest in sorted(view.topics.items()):
        src = source.topics.get(name)
        if not isinstance(src, SourceTopic) or src.topic_id != dest.topic_id:
            continue
        if src.num_partitions > dest.num_partitions:
            actions.append(CreatePartitions(name, src.num_partitions))
        ops = config_ops(view.config, src.configs, dest.configs)
        if ops:
            actions.append(AlterTopicConfigs(name, ops))
    return TopicSyncPlan(actions=tuple(actions))

"""How KIP-1279 state lives in the metadata log.

The KIP adds no new metadata record type. It uses existing records:
- mirror configs are `ConfigRecord`s with resource type MIRROR (64, the new ConfigResource
  type) and the mirror name as resource name ("Create Mirror" workflow); deleting a mirror
  tombstones them (value None);
- the `mirror.version` feature level is a `FeatureLevelRecord` (0 = disabled, the default;
  1 = enabled), as `kafka-features.sh upgrade --feature mirror.version=1`;
- membership is the topic config `mirror.name` (a `ConfigRecord` of resource type TOPIC):
  `<mirror>` = mirrored, `<mirror>.removed` = removed (failover), `<mirror>.paused` = paused
  (parsed by `kmirror.kip1279.membership`);
- a mirror topic is created with the source's topic id (CreateTopics v8 MirrorInfo), an
  ordinary `TopicRecord`.
The KIP's "Metadata Records" (LastMirrorEpochs, MirrorPartitionState) are `__mirror_state`
records: see `kmirror.kip1279.state_records`.
"""

from collections.abc import Mapping
from typing import Final

from kmirror.metadata.image import ConfigResourceType
from kmirror.metadata.records import ConfigRecord, FeatureLevelRecord

MIRROR_CONFIG_RESOURCE_TYPE: Final = 64  # ConfigResource.Type.MIRROR
TOPIC_CONFIG_RESOURCE_TYPE: Final = int(ConfigResourceType.TOPIC)
CLUSTER_MIRROR_RESOURCE_TYPE: Final = 8  # ACL ResourceType.CLUSTER_MIRROR

MIRROR_VERSION_FEATURE: Final = "mirror.version"
MIRROR_VERSION_DISABLED: Final = 0
MIRROR_VERSION_ENABLED: Final = 1



def mirror_version_record(level: int) -> FeatureLevelRecord:
    if level not in (MIRROR_VERSION_DISABLED, MIRROR_VERSION_ENABLED):
        raise ValueError(f"unsupported {MIRROR_VERSION_FEATURE} level {level}")
    return FeatureLevelRecord(name=MIRROR_VERSION_FEATURE, feature_level=level)


def mirror_config_records(mirror_name: str, configs: Mapping[str, str | None]) -> list[ConfigRecord]:
    """One ConfigRecord per mirror config, sorted by key (None removes the key)."""
    return [ConfigRecord(resource_type=MIRROR_CONFIG_RESOURCE_TYPE, resource_name=mirror_name,
                         name=key, value=configs[key]) for key in sorted(configs)]

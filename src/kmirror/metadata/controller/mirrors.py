"""Controller operations of KIP-1279 (Cluster Mirroring) and of feature levels.

Every operation is sans-IO: it reads the image and returns `ControllerResult(records,
response)`; the state changes only when the records are replayed. Mirror state in the
metadata log (see `kmirror.metadata.mirror_records`):
- a mirror is its configs, `ConfigRecord`s of resource type MIRROR (64);
- membership is the topic config `mirror.name` (`kmirror.kip1279.membership`);
- `mirror.version` is a `FeatureLevelRecord`.
Partition states come from the MirrorCoordinator (the broker reads them and passes them in):
the controller holds no mirror partition state.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kio.schema.errors import ErrorCode

from kmirror.config.mirror import (
    MIRROR_STATE_TOPIC,
    InvalidMirrorConfig,
    parse_mirror_config,
    state_topic_configs,
)
from kmirror.config.server import ServerConfig
from kmirror.kip1279.errors import MirrorError, kio_error_code
from kmirror.kip1279.membership import (
    MIRROR_NAME_CONFIG,
    Rejected,
    SetMirrorName,
    refusal_error_code,
)
from kmirror.kip1279.membership import (
    delete_mirror as plan_delete_mirror,
)
from kmirror.kip1279.names import validate_mirror_name
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.metadata.controller.producer_ids import fence_producer_ids
from kmirror.metadata.controller.result import NONE, ApiError, ControllerResult, Rng
from kmirror.metadata.controller.topics import CreatableTopic, create_topics
from kmirror.metadata.image import ConfigResource, ConfigResourceType, MetadataImage
from kmirror.metadata.mirror_records import MIRROR_CONFIG_RESOURCE_TYPE, mirror_config_records
from kmirror.metadata.records import ConfigRecord, FeatureLevelRecord, PartitionChangeRecord, Record

# Mirror-level facts the broker learns and the controller stores next to the configs
# (not settable by operators: `parse_mirror_config` refuses the key).
SOURCE_CLUSTER_ID_KEY: Final = "mirror.source.cluster.id"

# UpdateFeatures upgrade types (Kafka's FeatureUpdate.UpgradeType).
UPGRADE: Final = 1
SAFE_DOWNGRADE: Final = 2
UNSAFE_DOWNGRADE: Final = 3

# A bump walks the epoch one PartitionChangeRecord at a time (a leader "re-election" is the
# only record that moves the epoch); refuse absurd targets rather than write millions.
MAX_EPOCH_BUMP: Final = 100_000


def mirror_error(error: MirrorError, message: str | None = None) -> ApiError:
    return ApiError(kio_error_code(int(error)), message or error.message)


def _mirror_resource(name: str) -> ConfigResource:
    return ConfigResource(MIRROR_CONFIG_RESOURCE_TYPE, name)


def mirror_exists(image: MetadataImage, name: str) -> bool:
    return bool(image.configs.get(_mirror_resource(name)))


# ---- features ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    feature: str
    max_version_level: int
    upgrade_type: int = UPGRADE


def update_features(
    image: MetadataImage,
    updates: Sequence[FeatureUpdate],
    supported: Mapping[str, tuple[int, int]],
    *,
    validate_only: bool = False,
) -> ControllerResult[ApiError]:
    """Kafka's FeatureControlManager.updateFeatures, all or nothing: the first update that
    fails (a level outside the supported range, an unknown feature, or a downgrade without a
    downgrade type: INVALID_UPDATE_VERSION) is the answer and nothing is applied. Level 0
    removes the feature (disable). `metadata.version` cannot be lowered below 1."""
    records: list[Record] = []
    for u in updates:
        error = _feature_update_error(image, u, supported)
        if error is not None:
            return ControllerResult([], error)
        if u.max_version_level != int(image.features.get(u.feature, 0)):
            records.append(FeatureLevelRecord(u.feature, u.max_version_level))
    return ControllerResult([] if validate_only else records, NONE)


def _feature_update_error(image: MetadataImage, u: FeatureUpdate,
                          supported: Mapping[str, tuple[int, int]]) -> ApiError | None:
    current = int(image.features.get(u.feature, 0))
    rng = supported.get(u.feature)
    if rng is None:
        return ApiError(ErrorCode.invalid_update_version, f"Feature {u.feature} is not supported by this cluster")
    low, high = rng
    level = u.max_version_level
    if level != 0 and not low <= level <= high:
        return ApiError(ErrorCode.invalid_update_version,
                        f"Invalid update version {level} for feature {u.feature}: supported range is [{low}, {high}]")
    if level == 0 and u.feature == "metadata.version":
        return ApiError(ErrorCode.invalid_update_version, "metadata.version cannot be disabled")
    if level < current and u.upgrade_type == UPGRADE:
        return ApiError(ErrorCode.invalid_update_version,
                        f"Can't downgrade the version of feature {u.feature} without setting "
                        "the upgrade type to safe or unsafe downgrade")
    if level > current and u.upgrade_type != UPGRADE:
        return ApiError(ErrorCode.invalid_update_version,
                        f"Can't upgrade feature {u.feature} with a downgrade upgrade type")
    return None


# ---- mirrors -----------------------------------------------------------------------------


def create_mirror(
    image: MetadataImage, name: str, configs: Mapping[str, str | None],
    config: ServerConfig | None = None, rng: Rng | None = None,
) -> ControllerResult[ApiError]:
    """CreateMirror: INVALID_MIRROR_NAME, INVALID_CONFIG for bad configs, INVALID_REQUEST when
    a mirror of that name exists. With the controller's `config` and `rng`, the first mirror
    also creates `__mirror_state` (KIP: "If this is the first mirror being created, the
    controller also auto creates the __mirror_state internal topic") in the same records."""
    bad_name = validate_mirror_name(name)
    if bad_name is not None:
        return ControllerResult([], mirror_error(MirrorError.INVALID_MIRROR_NAME, bad_name.message))
    if mirror_exists(image, name):
        return ControllerResult([], ApiError(ErrorCode.invalid_request, f"Mirror {name} already exists"))
    parsed = parse_mirror_config(configs)
    if isinstance(parsed, InvalidMirrorConfig):
        return ControllerResult([], ApiError(ErrorCode.invalid_config, parsed.message))
    present = {k: v for k, v in configs.items() if v is not None}
    records = list[Record](mirror_config_records(name, present))
    if config is not None and rng is not None:
        records.extend(mirror_state_topic_records(image, config, rng))
    return ControllerResult(records, NONE)


def mirror_state_topic_records(image: MetadataImage, config: ServerConfig, rng: Rng) -> list[Record]:
    """`__mirror_state` when missing: `mirror.topic.num.partitions` partitions, replication
    factor min(`mirror.topic.replication.factor`, live brokers) as the coordinator's own
    fallback creates it, compacted. Nothing when it exists or cannot be placed yet (no live
    broker): the MirrorCoordinator creates it on first use then."""
    if MIRROR_STATE_TOPIC in image.topics:
        return []
    partitions = int(config.values.get("mirror.topic.num.partitions", 50))
    wanted = int(config.values.get("mirror.topic.replication.factor", 3))
    live = len(image.live_brokers())
    if live == 0:
        return []
    spec = CreatableTopic(MIRROR_STATE_TOPIC, partitions, min(wanted, live), configs=state_topic_configs(config.values))
    result = create_topics(image, [spec], config, rng)
    created = result.response is not None and result.response[0].error.code == ErrorCode.none
    return list(result.records) if created else []


def set_source_cluster_id(image: MetadataImage, name: str, cluster_id: str) -> ControllerResult[ApiError]:
    """Record the source cluster id the broker learned on first connecting to the source."""
    values = image.configs.get(_mirror_resource(name))
    if not values:
        return ControllerResult([], mirror_error(MirrorError.UNKNOWN_MIRROR, f"Mirror {name} does not exist"))
    if values.get(SOURCE_CLUSTER_ID_KEY) == cluster_id:
        return ControllerResult([], NONE)
    return ControllerResult(list[Record](mirror_config_records(name, {SOURCE_CLUSTER_ID_KEY: cluster_id})), NONE)


def delete_mirror(
    image: MetadataImage, name: str, partition_states: Mapping[str, Iterable[MirrorPartitionState]]
) -> ControllerResult[ApiError]:
    """DeleteMirror: UNKNOWN_MIRROR, MIRROR_NOT_EMPTY (`membership.delete_mirror`); else the
    mirror's configs are tombstoned and detached topics lose their `mirror.name`."""
    values = image.configs.get(_mirror_resource(name))
    if not values:
        return ControllerResult([], mirror_error(MirrorError.UNKNOWN_MIRROR, f"Mirror {name} does not exist"))
    topic_configs = {
        res.name: cfg.get(MIRROR_NAME_CONFIG)
        for res, cfg in image.configs.items()
        if res.type == ConfigResourceType.TOPIC and MIRROR_NAME_CONFIG in cfg
    }
    plan = plan_delete_mirror(name, topic_configs, partition_states)
    if isinstance(plan, Rejected):
        return ControllerResult([], ApiError(kio_error_code(refusal_error_code(plan.refusal)), plan.message))
    records: list[Record] = list(mirror_config_records(name, dict.fromkeys(values)))
    for topic in plan.detached_topics:
        records.append(ConfigRecord(ConfigResourceType.TOPIC, topic, MIRROR_NAME_CONFIG, None))
    return ControllerResult(records, NONE)


def set_mirror_names(
    image: MetadataImage, decisions: Mapping[str, SetMirrorName | Rejected]
) -> ControllerResult[dict[str, ApiError]]:
    """Apply membership decisions (`membership.add_topic/remove_topic/pause_topic/resume_topic`
    made by the broker with the coordinator's partition states): one `mirror.name` record per
    accepted topic that exists; UNKNOWN_TOPIC_OR_PARTITION for a missing topic."""
    records: list[Record] = []
    results: dict[str, ApiError] = {}
    for topic, decision in decisions.items():
        if isinstance(decision, Rejected):
            results[topic] = ApiError(kio_error_code(refusal_error_code(decision.refusal)), decision.message)
            continue
        if topic not in image.topics:
            results[topic] = ApiError(ErrorCode.unknown_topic_or_partition, f"Topic {topic} does not exist")
            continue
        results[topic] = NONE
        if image.topic_config(topic).get(MIRROR_NAME_CONFIG) != decision.value:
            records.append(ConfigRecord(ConfigResourceType.TOPIC, topic, MIRROR_NAME_CONFIG, decision.value))
    return ControllerResult(records, results)


# ---- leader epochs -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EpochBump:
    topic_id: uuid.UUID
    partition: int
    min_leader_epoch: int


@dataclass(frozen=True, slots=True)
class EpochBumpResult:
    topic_id: uuid.UUID
    topic_name: str | None
    partition: int
    error: ApiError
    leader_epoch: int = -1


def bump_leader_epochs(
    image: MetadataImage, bumps: Sequence[EpochBump], min_producer_id: int = -1
) -> ControllerResult[list[EpochBumpResult]]:
    """BumpLeaderEpochs (KIP-1279 STOPPING): the partition's leader epoch becomes
    max(min_leader_epoch, current + 1), keeping the leader and ISR. Always at least one bump:
    records appended after failover start a leader epoch no mirrored batch carries.
    `min_producer_id` (>= 0): in the same records, producer ids below it are fenced
    (`fence_producer_ids`), so the producers of the now writable partitions get ids above
    every mirrored one.
    UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION for unknown partitions,
    LEADER_NOT_AVAILABLE when the partition has no leader."""
    records: list[Record] = []
    results: list[EpochBumpResult] = []
    for b in bumps:
        topic = image.topics_by_id.get(b.topic_id)
        if topic is None:
            results.append(EpochBumpResult(b.topic_id, None, b.partition, ApiError(ErrorCode.unknown_topic_id)))
            continue
        reg = topic.partitions.get(b.partition)
        if reg is None:
            results.append(EpochBumpResult(b.topic_id, topic.name, b.partition,
                                           ApiError(ErrorCode.unknown_topic_or_partition)))
            continue
        if reg.leader < 0:
            results.append(EpochBumpResult(b.topic_id, topic.name, b.partition,
                                           ApiError(ErrorCode.leader_not_available)))
            continue
        target = max(b.min_leader_epoch, reg.leader_epoch + 1)
        steps = target - reg.leader_epoch
        if steps > MAX_EPOCH_BUMP:
            results.append(EpochBumpResult(b.topic_id, topic.name, b.partition,
                                           ApiError(ErrorCode.invalid_request,
                                                    f"Leader epoch {b.min_leader_epoch} is too far ahead")))
            continue
        records.extend(PartitionChangeRecord(b.partition, b.topic_id, leader=reg.leader) for _ in range(steps))
        results.append(EpochBumpResult(b.topic_id, topic.name, b.partition, NONE, target))
    if min_producer_id >= 0:
        records.extend(fence_producer_ids(image, min_producer_id))
    return ControllerResult(records, results)

"""Dynamic configs (Kafka's ConfigurationControlManager): IncrementalAlterConfigs and the
legacy AlterConfigs, for TOPIC, BROKER and GROUP resources; IncrementalAlterConfigs also for
KIP-1279's MIRROR resources (`mirror_configs`).

BROKER resource names are a node id or "" (the cluster-wide default). Only the broker keys
Kafka updates dynamically are accepted there; topic keys are validated with their types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kmirror.config.broker_keys import BROKER_CONFIG_DEFS
from kmirror.config.cordoned_log_dirs import CORDONED_LOG_DIRS
from kmirror.config.definitions import ConfigError, ConfigType
from kmirror.config.group import DEFAULT_BOUNDS, validate_group_configs
from kmirror.config.topic import TOPIC_CONFIG_DEFS, validate_topic_config
from kmirror.kip1279.membership import HIDDEN_TOPIC_CONFIGS, managed_config_refusal
from kmirror.metadata.controller.config_ops import AlterableConfig as AlterableConfig
from kmirror.metadata.controller.config_ops import AlterConfigOp as AlterConfigOp
from kmirror.metadata.controller.config_ops import apply_list_op
from kmirror.metadata.controller.mirror_configs import alter_mirror_configs
from kmirror.metadata.controller.result import NONE, ApiError, ControllerResult
from kmirror.metadata.image import ConfigResource, ConfigResourceType, MetadataImage
from kmirror.metadata.mirror_records import MIRROR_CONFIG_RESOURCE_TYPE
from kmirror.metadata.records import ConfigRecord, Record

# Broker keys Kafka's DynamicBrokerConfig allows updating at runtime (the subset kmirror has).
DYNAMIC_BROKER_KEYS = frozenset(
    {
        "message.max.bytes",
        "log.segment.bytes",
        "log.roll.ms",
        "log.roll.hours",
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
        "log.retention.bytes",
        "log.cleanup.policy",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.index.interval.bytes",
        "log.segment.delete.delay.ms",
        "log.message.timestamp.type",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.preallocate",
        "compression.type",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "num.io.threads",
        "num.network.threads",
        "num.recovery.threads.per.data.dir",
        "producer.id.expiration.ms",  # KIP-854
        "mirror.replication.throttled.rate",  # KIP-1279: adjusted at runtime, as follower.replication.throttled.rate
        CORDONED_LOG_DIRS,  # KIP-1066
        "replica.alter.log.dirs.io.max.bytes.per.second",  # AlterReplicaLogDirs' throttle
    }
)
PER_BROKER_KEYS = frozenset({CORDONED_LOG_DIRS})
"""Dynamic keys set for one broker only, never as the cluster-wide default (Kafka's
DynamicBrokerConfig.PER_BROKER_CONFIGS)."""


@dataclass(frozen=True, slots=True)
class AlterConfigsResult:
    resource: ConfigResource
    error: ApiError = NONE


def _check_resource(image: MetadataImage, resource: ConfigResource) -> ApiError | None:
    if resource.type == ConfigResourceType.TOPIC:
        if resource.name not in image.topics:
            return ApiError(ErrorCode.unknown_topic_or_partition, f"Topic {resource.name} does not exist.")
        return None
    if resource.type == ConfigResourceType.BROKER:
        if resource.name != "" and not resource.name.isdigit():
            return ApiError(ErrorCode.invalid_request, f"Illegal broker id {resource.name!r}.")
        return None
    if resource.type == ConfigResourceType.GROUP:  # a group need not exist to carry configs, as in Kafka
        return None if resource.name else ApiError(ErrorCode.invalid_request, "Group name must not be empty.")
    if resource.type == MIRROR_CONFIG_RESOURCE_TYPE:  # KIP-1279: CreateMirror or IncrementalAlterConfigs only
        return ApiError(ErrorCode.invalid_request, "Mirror configs are altered with IncrementalAlterConfigs.")
    return ApiError(ErrorCode.invalid_request, f"Unsupported resource type {resource.type}.")


def _managed(resource: ConfigResource, names: Iterable[str]) -> ApiError | None:
    """INVALID_CONFIG for a topic's `mirror.name`, which only the mirror APIs change."""
    reason = managed_config_refusal(names) if resource.type == ConfigResourceType.TOPIC else None
    return None if reason is None else ApiError(ErrorCode.invalid_config, reason)


def _kept(resource: ConfigResource, current: Mapping[str, str]) -> dict[str, str]:
    if resource.type != ConfigResourceType.TOPIC:
        return {}
    return {k: v for k, v in current.items() if k in HIDDEN_TOPIC_CONFIGS}


def _is_list(resource: ConfigResource, name: str) -> bool:
    if resource.type == ConfigResourceType.TOPIC:
        d = TOPIC_CONFIG_DEFS.get(name)
        return d is not None and d.definition.type is ConfigType.LIST
    bd = BROKER_CONFIG_DEFS.get(name)
    return bd is not None and bd.type is ConfigType.LIST


def _validate(resource: ConfigResource, name: str, value: str) -> ApiError | None:
    if resource.type == ConfigResourceType.GROUP:  # checked as a whole by _validate_resource
        return None
    if resource.type == ConfigResourceType.TOPIC:
        reason = validate_topic_config(name, value)
        return None if reason is None else ApiError(ErrorCode.invalid_config, reason)
    d = BROKER_CONFIG_DEFS.get(name)
    if d is None:
        # A name kmirror does not define (another Kafka broker key, e.g. a SASL/Kerberos or
        # quota setting): stored as Kafka stores the dynamic configs it does not act on, and
        # described back; kmirror does not act on it (docs/operations.md).
        if not name or any(c.isspace() for c in name):
            return ApiError(ErrorCode.invalid_config, f"Invalid broker config name: {name!r}")
        return None
    if name not in DYNAMIC_BROKER_KEYS:
        return ApiError(ErrorCode.invalid_request, f"Cannot update these configs dynamically: {name}")
    if name in PER_BROKER_KEYS and resource.name == "":
        return ApiError(ErrorCode.invalid_request,
                        f"Cannot update these configs at default cluster level, broker id must be specified: {name}")
    try:
        d.parse(value)
    except ConfigError as e:
        return ApiError(ErrorCode.invalid_config, str(e))
    return None


def _diff(resource: ConfigResource, current: Mapping[str, str], new: Mapping[str, str]) -> list[Record]:
    out: list[Record] = []
    for name in sorted(set(current) | set(new)):
        if name not in new:
            out.append(ConfigRecord(resource.type, resource.name, name, None))
        elif current.get(name) != new[name]:
            out.append(ConfigRecord(resource.type, resource.name, name, new[name]))
    return out


def incremental_alter_configs(
    image: MetadataImage,
    changes: Sequence[tuple[ConfigResource, Sequence[AlterableConfig]]],
    *,
    validate_only: bool = False,
    group_bounds: Mapping[str, int] = DEFAULT_BOUNDS,
) -> ControllerResult[list[AlterConfigsResult]]:
    """`group_bounds`: the controller's `group.consumer.{min,max}.*` values, which bound GROUP
    configs."""
    records: list[Record] = []
    results: list[AlterConfigsResult] = []
    for resource, ops in changes:
        outcome = _incremental_one(image, resource, ops, group_bounds)
        if isinstance(outcome, ApiError):
            results.append(AlterConfigsResult(resource, outcome))
            continue
        if not validate_only:
            records.extend(outcome)
        results.append(AlterConfigsResult(resource))
    return ControllerResult(records, results)


def _incremental_one(
    image: MetadataImage, resource: ConfigResource, ops: Sequence[AlterableConfig], group_bounds: Mapping[str, int]
) -> list[Record] | ApiError:
    if resource.type == MIRROR_CONFIG_RESOURCE_TYPE:
        return alter_mirror_configs(image, resource.name, ops)
    err = _check_resource(image, resource) or _managed(resource, [op.name for op in ops])
    if err is not None:
        return err
    current = dict(image.configs.get(resource, {}))
    new = dict(current)
    for op in ops:
        if op.op == AlterConfigOp.DELETE:
            new.pop(op.name, None)
            continue
        if op.value is None:
            return ApiError(ErrorCode.invalid_request, f"Null value not supported for {op.name}")
        if op.op == AlterConfigOp.SET:
            value = op.value
        elif op.op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            if not _is_list(resource, op.name):
                verb = "append" if op.op == AlterConfigOp.APPEND else "subtract"
                return ApiError(ErrorCode.invalid_config, f"Config value {verb} is not allowed for config key: {op.name}")
            value = apply_list_op(op.op, new.get(op.name, _default_list(resource, op.name)), op.value)
        else:
            return ApiError(ErrorCode.invalid_request, f"Unknown alter config operation {int(op.op)}")
        err = _validate(resource, op.name, value)
        if err is not None:
            return err
        new[op.name] = value
    err = _validate_resource(resource, new, group_bounds)
    return err if err is not None else _diff(resource, current, new)


def _validate_resource(resource: ConfigResource, configs: Mapping[str, str],
                       group_bounds: Mapping[str, int]) -> ApiError | None:
    """Checks of a resource's configs as a whole (Kafka validates the merged map)."""
    if resource.type == ConfigResourceType.GROUP:
        reason = validate_group_configs(configs, group_bounds)
        return None if reason is None else ApiError(ErrorCode.invalid_config, reason)
    return None


def _default_list(resource: ConfigResource, name: str) -> str:
    if resource.type == ConfigResourceType.TOPIC:
        return TOPIC_CONFIG_DEFS[name].definition.default or ""
    return BROKER_CONFIG_DEFS[name].default or ""


def alter_configs(
    image: MetadataImage,
    changes: Sequence[tuple[ConfigResource, Mapping[str, str | None]]],
    *,
    validate_only: bool = False,
    group_bounds: Mapping[str, int] = DEFAULT_BOUNDS,
) -> ControllerResult[list[AlterConfigsResult]]:
    """Legacy AlterConfigs: the given set replaces every dynamic config of the resource."""
    records: list[Record] = []
    results: list[AlterConfigsResult] = []
    for resource, values in changes:
        err = _check_resource(image, resource) or _managed(resource, values)
        if err is None:
            for name, value in values.items():
                if value is None:
                    err = ApiError(ErrorCode.invalid_request, f"Null value not supported for {name}")
                else:
                    err = _validate(resource, name, value)
                if err is not None:
                    break
        current = image.configs.get(resource, {})
        # the legacy API replaces every config but those only the mirror APIs change
        new = {**{k: v for k, v in values.items() if v is not None}, **_kept(resource, current)}
        if err is None:
            err = _validate_resource(resource, new, group_bounds)
        if err is not None:
            results.append(AlterConfigsResult(resource, err))
            continue
        if not validate_only:
            records.extend(_diff(resource, current, new))
        results.append(AlterConfigsResult(resource))
    return ControllerResult(records, results)

"""IncrementalAlterConfigs on KIP-1279's MIRROR config resource (type 64): "Set via
CreateMirror or IncrementalAlterConfigs. Stored in cluster metadata records."

Rules (docs/design/mirroring.md, "Mirror configs"):
- `mirror.version` 0: UNSUPPORTED_VERSION, as every mirror RPC;
- no such mirror: RESOURCE_NOT_FOUND (Kafka's code for a config resource that does not
  exist; the KIP's UNKNOWN_MIRROR names a topic without a mirror and no existing client can
  decode it in an IncrementalAlterConfigs response);
- a key that is not a mirror config (including the controller's internal keys):
  INVALID_CONFIG; APPEND / SUBTRACT on a key that is not a list: INVALID_CONFIG;
- the configs after the operations are validated as CreateMirror's (`parse_mirror_config`):
  deleting `bootstrap.servers`, a bad host:port or an unusable security setting is
  INVALID_CONFIG and changes nothing.
The records are the changed keys only (a tombstone for a deleted one); the brokers replace
the source connection when the mirror's connection configs change in the image.
"""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from kmirror.config.mirror import (
    MIRROR_CONFIG_DEFAULTS,
    MIRROR_LIST_CONFIGS,
    InvalidMirrorConfig,
    is_mirror_config_key,
    parse_mirror_config,
)
from kmirror.metadata.controller.config_ops import AlterableConfig, AlterConfigOp, apply_list_op
from kmirror.metadata.controller.result import ApiError
from kmirror.metadata.image import ConfigResource, MetadataImage
from kmirror.metadata.mirror_records import MIRROR_CONFIG_RESOURCE_TYPE, mirror_config_records
from kmirror.metadata.mirrors import MIRRORING_DISABLED_MESSAGE, mirroring_enabled
from kmirror.metadata.records import Record


def check_mirror_resource(image: MetadataImage, name: str) -> ApiError | None:
    """The errors a MIRROR config resource gets before its configs are looked at
    (IncrementalAlterConfigs and DescribeConfigs)."""
    if not mirroring_enabled(image):
        return ApiError(ErrorCode.unsupported_version, MIRRORING_DISABLED_MESSAGE)
    if not image.configs.get(ConfigResource(MIRROR_CONFIG_RESOURCE_TYPE, name)):
        return ApiError(ErrorCode.resource_not_found, f"Mirror {name} does not exist.")
    return None


def alter_mirror_configs(image: MetadataImage, name: str, ops: Sequence[AlterableConfig]) -> list[Record] | ApiError:
    err = check_mirror_resource(image, name)
    if err is not None:
        return err
    stored = image.configs[ConfigResource(MIRROR_CONFIG_RESOURCE_TYPE, name)]
    current = {k: v for k, v in stored.items() if is_mirror_config_key(k)}
    new = dict(current)
    for op in ops:
        if not is_mirror_config_key(op.name):
            return ApiError(ErrorCode.invalid_config, f"Unknown mirror config: {op.name}")
        if op.op == AlterConfigOp.DELETE:
            new.pop(op.name, None)
            continue
        if op.value is None:
            return ApiError(ErrorCode.invalid_request, f"Null value not supported for {op.name}")
        if op.op == AlterConfigOp.SET:
            new[op.name] = op.value
        elif op.op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            if op.name not in MIRROR_LIST_CONFIGS:
                verb = "append" if op.op == AlterConfigOp.APPEND else "subtract"
                return ApiError(ErrorCode.invalid_config, f"Config value {verb} is not allowed for config key: {op.name}")
            new[op.name] = apply_list_op(op.op, new.get(op.name, MIRROR_CONFIG_DEFAULTS.get(op.name, "")), op.value)
        else:
            return ApiError(ErrorCode.invalid_request, f"Unknown alter config operation {int(op.op)}")
    parsed = parse_mirror_config(new)
    if isinstance(parsed, InvalidMirrorConfig):
        return ApiError(ErrorCode.invalid_config, parsed.message)
    changed = {k: new.get(k) for k in set(current) | set(new) if current.get(k) != new.get(k)}
    return list[Record](mirror_config_records(name, changed))

"""IncrementalAlterConfigs operations (Kafka's AlterConfigOp.OpType), shared by every
config resource type."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class AlterConfigOp(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class AlterableConfig:
    name: str
    op: AlterConfigOp
    value: str | None


def apply_list_op(op: AlterConfigOp, current: str, delta: str) -> str:
    """APPEND adds the items of `delta` missing from `current`; SUBTRACT removes them
    (comma-separated lists, order kept)."""
    items = [v for v in current.split(",") if v]
    changes = [v.strip() for v in delta.split(",") if v.strip()]
    if op == AlterConfigOp.APPEND:
        items += [v for v in changes if v not in items]
    else:
        items = [v for v in items if v not in changes]
    return ",".join(items)

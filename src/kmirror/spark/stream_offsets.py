"""Streaming offsets as Spark's Kafka source checkpoints them, and its per-trigger rules (sans-IO).

An offset is `{"topic": {"partition": offset}}` (Spark's `KafkaSourceOffset` JSON), the
next offset to read per partition: a checkpoint holds plain Kafka offsets, valid on any
cluster holding the same offsets (a mirror keeps them). `rate_limit` is Spark's
`KafkaMicroBatchStream.rateLimit`: `maxOffsetsPerTrigger` shared among partitions in
proportion to their backlog. `TriggerDelay` is its `delayBatch`: with `minOffsetsPerTrigger`,
a trigger with fewer new records waits, unless `maxTriggerDelay` has passed since the last
batch that ran.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kmirror.spark.options import KafkaOptionError
from kmirror.types import TopicPartition


def encode_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def decode_offsets(offsets: Mapping[str, Any]) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for topic, parts in offsets.items():
        if not isinstance(parts, Mapping):
            raise KafkaOptionError(f"checkpointed offsets are not Kafka source offsets: {dict(offsets)!r}")
        for p, o in parts.items():
            out[TopicPartition(topic, int(p))] = int(o)
    return out


def rate_limit(start: Mapping[TopicPartition, int], new_partitions: Mapping[TopicPartition, int],
               end: Mapping[TopicPartition, int], limit: int) -> dict[TopicPartition, int]:
    """End offsets holding at most about `limit` records, shared in proportion to backlog."""
    sizes: dict[TopicPartition, int] = {}
    for tp, until in end.items():
        begin = start.get(tp, new_partitions.get(tp))
        if begin is not None and until - begin > 0:
            sizes[tp] = until - begin
    total = sum(sizes.values())
    if total < 1:
        return dict(end)
    out: dict[TopicPartition, int] = {}
    for tp, until in end.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = until
            continue
        begin = start.get(tp, new_partitions.get(tp, 0))
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(until, begin + share)
    return out


def lost_partitions(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> list[TopicPartition]:
    """Partitions of the previous batch that no longer exist (a deleted topic)."""
    return sorted(tp for tp in start if tp not in end)


def rewound_partitions(start: Mapping[TopicPartition, int],
                       end: Mapping[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
    """Partitions whose end is below where the last batch stopped: the log was truncated
    or the topic re-created."""
    return {tp: (start[tp], o) for tp, o in sorted(end.items()) if tp in start and o < start[tp]}


@dataclass(slots=True)
class TriggerDelay:
    """Spark's `KafkaMicroBatchStream.delayBatch` (`minOffsetsPerTrigger`, `maxTriggerDelay`).
    `last_trigger_ms` is when the last batch was let through (None: never, so the first
    trigger runs, as Spark's `lastTriggerMillis = 0`); times are the caller's clock, in ms."""

    min_records: int
    max_delay_ms: int
    last_trigger_ms: float | None = None

    def delay(self, start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], now_ms: float) -> bool:
        """Whether this trigger waits (the batch ends where it starts). New partitions count
        from offset 0, as Spark counts them."""
        if self.last_trigger_ms is None or now_ms - self.last_trigger_ms >= self.max_delay_ms:
            self.last_trigger_ms = now_ms
            return False
        if sum(o - start.get(tp, 0) for tp, o in latest.items()) < self.min_records:
            return True
        self.last_trigger_ms = now_ms
        return False

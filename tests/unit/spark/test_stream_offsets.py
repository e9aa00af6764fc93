"""Spark's Kafka source offsets JSON, rate limit and data-loss checks."""

from __future__ import annotations

import json

from kmirror.spark.planning import OffsetRange, split_ranges
from kmirror.spark.stream_offsets import (
    TriggerDelay,
    decode_offsets,
    encode_offsets,
    lost_partitions,
    rate_limit,
    rewound_partitions,
)
from kmirror.types import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_offsets_are_spark_kafka_source_json() -> None:
    encoded = encode_offsets({A1: 7, A0: 500, B0: 0})
    assert json.dumps(encoded) == '{"a": {"0": 500, "1": 7}, "b": {"0": 0}}'
    assert decode_offsets(json.loads(json.dumps(encoded))) == {A0: 500, A1: 7, B0: 0}


def test_rate_limit_shares_the_limit_in_proportion_to_backlog() -> None:
    # a-0 has 300 waiting, a-1 100, b-0 (new, from 0) 0 -> 100 records: 75 / 25.
    assert rate_limit({A0: 0, A1: 50}, {B0: 0}, {A0: 300, A1: 150, B0: 0}, 100) == {A0: 75, A1: 75, B0: 0}
    # A share below one record rounds up, so every partition with data moves.
    assert rate_limit({A0: 0, A1: 0}, {}, {A0: 1000, A1: 1}, 10) == {A0: 9, A1: 1}
    assert rate_limit({A0: 5}, {}, {A0: 5}, 10) == {A0: 5}


def test_lost_and_rewound_partitions() -> None:
    assert lost_partitions({A0: 1, B0: 2}, {A0: 3}) == [B0]
    assert rewound_partitions({A0: 10, A1: 5}, {A0: 4, A1: 9}) == {A0: (10, 4)}


def test_split_ranges_is_sparks_offset_range_calculator() -> None:
    ranges = [OffsetRange("a", 0, 0, 100), OffsetRange("a", 1, 0, 300), OffsetRange("b", 0, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]
    assert split_ranges(ranges, 2) == ranges[:2]
    split = split_ranges(ranges, 8)
    assert [(r.partition, r.from_offset, r.until_offset) for r in split] == [
        (0, 0, 50), (0, 50, 100), (1, 0, 50), (1, 50, 100), (1, 100, 150), (1, 150, 200), (1, 200, 250),
        (1, 250, 300)]
    capped = split_ranges(ranges, None, max_records_per_partition=120)
    assert [r.size for r in capped] == [100, 100, 100, 100]


def test_trigger_delay_waits_for_min_records_until_max_delay_as_spark_delay_batch() -> None:
    delay = TriggerDelay(min_records=100, max_delay_ms=10_000)
    start = {A0: 0, A1: 0}
    assert not delay.delay(start, {A0: 1, A1: 0}, now_ms=5_000)  # the first trigger always runs
    assert delay.last_trigger_ms == 5_000
    assert delay.delay(start, {A0: 60, A1: 39}, now_ms=6_000)  # 99 new records: held back
    assert not delay.delay(start, {A0: 60, A1: 40}, now_ms=7_000)  # 100: runs, and the delay restarts
    assert delay.last_trigger_ms == 7_000
    assert delay.delay(start, {A0: 1, A1: 0}, now_ms=16_999)  # 9,999 ms after the last batch: still held
    assert delay.last_trigger_ms == 7_000
    assert not delay.delay(start, {A0: 1, A1: 0}, now_ms=17_000)  # maxTriggerDelay passed: runs with 1 record
    assert delay.last_trigger_ms == 17_000


def test_trigger_delay_counts_new_partitions_from_offset_zero() -> None:
    delay = TriggerDelay(min_records=10, max_delay_ms=60_000, last_trigger_ms=0)
    assert delay.delay({A0: 500}, {A0: 505, B0: 4}, now_ms=1)
    assert not delay.delay({A0: 500}, {A0: 505, B0: 5}, now_ms=2)

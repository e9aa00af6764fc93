"""Filters pushed into a batch read: which ones the source applies, and how they cut the
planned offset ranges."""

from __future__ import annotations

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from kmirror.spark.planning import OffsetRange
from kmirror.spark.pushdown import RangeFilter, apply_filter, push_filters

RANGES = [OffsetRange("a", 0, 0, 100), OffsetRange("a", 1, 50, 80), OffsetRange("b", 0, 10, 20)]


def test_topic_partition_and_offset_comparisons_are_applied_and_others_left_to_spark() -> None:
    kept = [Not(EqualTo(("offset",), 5)), EqualTo(("key",), b"k"), StringStartsWith(("topic",), "a"),
            IsNotNull(("value",)), In(("offset",), (1, 2)), EqualTo(("partition",), "0"),
            GreaterThan(("timestamp",), 3)]
    applied = [EqualTo(("topic",), "a"), In(("partition",), (0, 1)), GreaterThanOrEqual(("offset",), 60),
               LessThan(("offset",), 90)]
    rf, rest = push_filters([*kept, *applied])
    assert rest == kept and all(a is b for a, b in zip(rest, kept, strict=True))
    assert rf == RangeFilter(frozenset({"a"}), frozenset({0, 1}), 60, 90)
    assert apply_filter(RANGES, rf) == [OffsetRange("a", 0, 60, 90), OffsetRange("a", 1, 60, 80)]


def test_offset_bounds_are_exact() -> None:
    def cut(*filters: object) -> list[OffsetRange]:
        rf, rest = push_filters(list(filters))  # type: ignore[arg-type]
        assert rest == []
        return apply_filter(RANGES, rf)

    assert cut(EqualTo(("offset",), 15)) == [OffsetRange("a", 0, 15, 16), OffsetRange("b", 0, 15, 16)]
    assert cut(GreaterThan(("offset",), 79)) == [OffsetRange("a", 0, 80, 100)]
    assert cut(LessThanOrEqual(("offset",), 10)) == [OffsetRange("a", 0, 0, 11), OffsetRange("b", 0, 10, 11)]
    assert cut(LessThan(("offset",), 10), GreaterThan(("offset",), 3)) == [OffsetRange("a", 0, 4, 10)]
    assert cut(GreaterThanOrEqual(("OFFSET",), 50), LessThan(("offset",), 50)) == []
    assert cut(LessThan(("offset",), -3)) == []


def test_filters_that_allow_nothing_plan_no_read() -> None:
    for filters in ([EqualTo(("topic",), "a"), EqualTo(("topic",), "b")],
                    [In(("partition",), (1,)), EqualTo(("partition",), 0)],
                    [GreaterThan(("offset",), 10), LessThan(("offset",), 5)]):
        rf, _ = push_filters(filters)  # type: ignore[arg-type]
        assert rf.allows_nothing()
        assert apply_filter(RANGES, rf) == []
    assert not RangeFilter().allows_nothing()
    assert apply_filter(RANGES, RangeFilter()) == RANGES

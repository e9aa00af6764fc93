"""Filters Spark pushes into a batch read (`DataSourceReader.pushFilters`, PySpark 4.1+, with
`spark.sql.python.filterPushdown.enabled=true`) that narrow what is fetched (sans-IO).

Comparisons of `topic` (=, IN), `partition` (=, IN) and `offset` (=, <, <=, >, >=) with a
literal select whole partitions and cut offset ranges before any task runs: a query for
`offset >= 1000000` of one partition fetches only that tail. Each of these filters is applied
exactly (a range [from, until) holds exactly the records whose offsets are in it, gaps left
by compaction or transaction markers included), so Spark does not evaluate them again;
every other filter (on key, value, timestamp, a NOT, an OR) is returned to Spark, which
evaluates it on the rows. Spark's Kafka source pushes no filters; the rows a query returns
are the same with or without pushdown, only fewer records are fetched and decoded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from kmirror.spark.planning import OffsetRange


@dataclass(frozen=True, slots=True)
class RangeFilter:
    """What the pushed filters allow: topics and partitions (None: any), offsets in
    [min_offset, max_offset) (max None: no bound). Picklable, as the reader holding it."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    min_offset: int = 0
    max_offset: int | None = None

    def allows_nothing(self) -> bool:
        return (self.topics == frozenset() or self.partitions == frozenset()
                or (self.max_offset is not None and self.max_offset <= self.min_offset))


def _column(f: Filter) -> str | None:
    attribute: tuple[str, ...] = getattr(f, "attribute", ())
    return attribute[0].lower() if len(attribute) == 1 else None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _narrowed(current: frozenset[str] | frozenset[int] | None, allowed: Iterable[object]) -> frozenset:  # type: ignore[type-arg]
    allowed_set = frozenset(allowed)
    return allowed_set if current is None else current & allowed_set


def _push_one(rf: RangeFilter, f: Filter) -> RangeFilter | None:
    """`rf` narrowed by `f`, or None when `f` is not one this source applies."""
    column = _column(f)
    if column == "topic":
        if isinstance(f, EqualTo) and isinstance(f.value, str):
            return replace(rf, topics=_narrowed(rf.topics, [f.value]))
        if isinstance(f, In) and all(isinstance(v, str) for v in f.value):
            return replace(rf, topics=_narrowed(rf.topics, f.value))
        return None
    if column == "partition":
        if isinstance(f, EqualTo) and _is_int(f.value):
            return replace(rf, partitions=_narrowed(rf.partitions, [f.value]))
        if isinstance(f, In) and all(_is_int(v) for v in f.value):
            return replace(rf, partitions=_narrowed(rf.partitions, f.value))
        return None
    if column != "offset" or not _is_int(getattr(f, "value", None)):
        return None
    value: int = f.value  # type: ignore[attr-defined]
    low, high = rf.min_offset, rf.max_offset
    if isinstance(f, EqualTo):
        low, high = max(low, value), value + 1 if high is None else min(high, value + 1)
    elif isinstance(f, GreaterThan):
        low = max(low, value + 1)
    elif isinstance(f, GreaterThanOrEqual):
        low = max(low, value)
    elif isinstance(f, LessThan):
        high = value if high is None else min(high, value)
    elif isinstance(f, LessThanOrEqual):
        high = value + 1 if high is None else min(high, value + 1)
    else:
        return None
    return replace(rf, min_offset=low, max_offset=high)


def push_filters(filters: Sequence[Filter]) -> tuple[RangeFilter, list[Filter]]:
    """(what the applied filters allow, the filters left to Spark, the same objects)."""
    rf = RangeFilter()
    rest: list[Filter] = []
    for f in filters:
        narrowed = _push_one(rf, f)
        if narrowed is None:
            rest.append(f)
        else:
            rf = narrowed
    return rf, rest


def apply_filter(ranges: Iterable[OffsetRange], rf: RangeFilter) -> list[OffsetRange]:
    """The planned ranges cut to what `rf` allows; ranges left empty are dropped."""
    out = []
    for r in ranges:
        if rf.topics is not None and r.topic not in rf.topics:
            continue
        if rf.partitions is not None and r.partition not in rf.partitions:
            continue
        start = max(r.from_offset, rf.min_offset)
        until = r.until_offset if rf.max_offset is None else min(r.until_offset, rf.max_offset)
        if start < until:
            out.append(replace(r, from_offset=start, until_offset=until))
    return out

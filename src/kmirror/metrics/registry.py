"""`MetricsRegistry`: Kafka-named metrics, read at scrape time (sans-IO; clock port).

A metric is named like Kafka's JMX bean, `kafka.server:type=ReplicaManager,name=IsrShrinksPerSec`
(`MetricName(domain, type, name, tags)`). Four kinds, as Kafka exposes them through Yammer:
- gauge: a callable read at scrape time (`Value`); it may return None for "no value now";
- counter: a monotonically increasing count (`Count`);
- meter: count + 1/5/15-minute EWMA rates and mean rate (`kmirror.metrics.meter.Meter`).
  A meter either counts `mark()` calls or follows a cumulative count owned by another
  component (`source`): `poll()` marks the increase since the previous poll, so the owner
  needs no reference to the registry. Pollers call `poll()` every tick (5 s) or before a scrape;
- histogram: count, sum, min, max and recent-sample quantiles (`kmirror.metrics.histogram`).
Metrics whose tags come and go with the objects they describe (a mirror fetcher, a mirrored
partition) are registered as a set: `gauge_set(read)` reads (name, value) pairs at scrape time,
`meter_set(source)` keeps one meter per name its source reports, following that name's
cumulative count, and drops the meter when the name is no longer reported (Kafka removes the
metrics of a removed fetcher).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from kmirror.metrics.histogram import Histogram
from kmirror.metrics.meter import Meter
from kmirror.ports import Clock

GaugeFn = Callable[[], float | int | None]


class MetricName(NamedTuple):
    domain: str  # "kafka.server", "kafka.controller", "kafka.network"
    type: str  # "ReplicaManager", "KafkaController", ...
    name: str  # "UnderReplicatedPartitions", "IsrShrinksPerSec", ...
    tags: tuple[tuple[str, str], ...] = ()  # e.g. (("clientId", "Replica"),) in JMX order

    def jmx(self) -> str:
        tags = "".join(f",{k}={v}" for k, v in self.tags)
        return f"{self.domain}:type={self.type},name={self.name}{tags}"


def metric_name(domain: str, type: str, name: str, **tags: str) -> MetricName:
    return MetricName(domain, type, name, tuple(tags.items()))


class Counter:
    def __init__(self) -> None:
        self._count = 0.0

    def inc(self, n: float = 1) -> None:
        if n < 0:
            raise ValueError(f"a counter only increases; cannot add {n}")
        self._count += n

    @property
    def count(self) -> float:
        return self._count


@dataclass
class _SourcedMeter:
    meter: Meter
    source: Callable[[], float | int | None]
    last_seen: float | None = field(default=None)


def _constant(value: float | int | None) -> GaugeFn:
    return lambda: value


NamedValues = Callable[[], Iterable[tuple["MetricName", float | int | None]]]


class MetricsRegistry:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._gauges: dict[MetricName, GaugeFn] = {}
        self._counters: dict[MetricName, Counter] = {}
        self._meters: dict[MetricName, Meter] = {}
        self._histograms: dict[MetricName, Histogram] = {}
        self._sourced: list[_SourcedMeter] = []
        self._gauge_sets: list[NamedValues] = []
        self._meter_sets: list[tuple[NamedValues, dict[MetricName, _SourcedMeter]]] = []
        # one more for every scrape (`gauges()`) and every `poll()`: a provider whose values
        # cost a scan of every partition computes them once per read and shares them
        self.read_epoch = 0

    @property
    def clock(self) -> Clock:
        return self._clock

    def once_per_read(self, compute: Callable[[], Mapping[str, float]]) -> Callable[[], Mapping[str, float]]:
        """`compute` as its gauges read it: called once per read of the registry, its values
        shared by every gauge of that read (for a provider that scans many partitions or
        groups to answer)."""
        memo: dict[int, Mapping[str, float]] = {}

        def values() -> Mapping[str, float]:
            computed = memo.get(self.read_epoch)
            if computed is None:
                memo.clear()
                computed = memo[self.read_epoch] = compute()
            return computed

        return values

    def _check_new(self, name: MetricName) -> None:
        if name in self._gauges or name in self._counters or name in self._meters or name in self._histograms:
            raise ValueError(f"metric {name.jmx()} is already registered")

    def histogram(self, name: MetricName) -> Histogram:
        existing = self._histograms.get(name)
        if existing is not None:
            return existing
        self._check_new(name)
        histogram = self._histograms[name] = Histogram()
        return histogram

    def gauge_set(self, read: NamedValues) -> None:
        """Gauges named by `read()` at scrape time (a None value is left out)."""
        self._gauge_sets.append(read)

    def meter_set(self, source: NamedValues) -> Callable[[], Mapping[MetricName, Meter]]:
        """One meter per name `source()` reports, following that name's cumulative count
        (baseline on first sight, as `meter(source=...)`); a name no longer reported drops its
        meter. Returns a view of the set's current meters."""
        meters: dict[MetricName, _SourcedMeter] = {}
        self._meter_sets.append((source, meters))
        self._poll_set(source, meters)
        return lambda: {name: sourced.meter for name, sourced in meters.items()}

    def _poll_set(self, source: NamedValues, meters: dict[MetricName, _SourcedMeter]) -> None:
        seen: set[MetricName] = set()
        for name, value in source():
            seen.add(name)
            sourced = meters.get(name)
            if sourced is None:
                sourced = meters[name] = _SourcedMeter(Meter(self._clock), _constant(value))
            sourced.source = _constant(value)
            self._poll_one(sourced)
        for gone in set(meters) - seen:
            del meters[gone]

    def gauge(self, name: MetricName, read: GaugeFn) -> None:
        self._check_new(name)
        self._gauges[name] = read

    def counter(self, name: MetricName) -> Counter:
        existing = self._counters.get(name)
        if existing is not None:
            return existing
        self._check_new(name)
        counter = self._counters[name] = Counter()
        return counter

    def meter(self, name: MetricName, source: Callable[[], float | int | None] | None = None) -> Meter:
        """The meter named `name` (created once). With `source`, a cumulative count read by
        `poll()`; its first reading is the baseline (events before registration are not rated,
        but are counted)."""
        existing = self._meters.get(name)
        if existing is not None and source is None:
            return existing
        self._check_new(name)
        meter = self._meters[name] = Meter(self._clock)
        if source is not None:
            sourced = _SourcedMeter(meter, source)
            self._sourced.append(sourced)
            self._poll_one(sourced)
        return meter

    def remove(self, name: MetricName) -> None:
        self._gauges.pop(name, None)
        self._counters.pop(name, None)
        self._histograms.pop(name, None)
        meter = self._meters.pop(name, None)
        self._sourced = [s for s in self._sourced if s.meter is not meter]

    def poll(self) -> None:
        """Mark each sourced meter with its source's increase since the last poll. A source
        that went backwards (its owner restarted the count) starts a new baseline."""
        self.read_epoch += 1
        for sourced in self._sourced:
            self._poll_one(sourced)
        for source, meters in self._meter_sets:
            self._poll_set(source, meters)

    @staticmethod
    def _poll_one(sourced: _SourcedMeter) -> None:
        value = sourced.source()
        if value is None:
            return
        current = float(value)
        if sourced.last_seen is None:
            # baseline: count what happened before, without a burst in the rates
            sourced.meter.add_unrated(current)
        elif current > sourced.last_seen:
            sourced.meter.mark(current - sourced.last_seen)
        sourced.last_seen = current

    def gauges(self) -> Iterator[tuple[MetricName, GaugeFn]]:
        self.read_epoch += 1
        named: dict[MetricName, GaugeFn] = dict(self._gauges)
        for read in self._gauge_sets:
            for name, value in read():
                named[name] = _constant(value)
        yield from sorted(named.items())

    def counters(self) -> Iterator[tuple[MetricName, Counter]]:
        yield from sorted(self._counters.items())

    def meters(self) -> Iterator[tuple[MetricName, Meter]]:
        named = dict(self._meters)
        for _, meters in self._meter_sets:
            named.update((name, sourced.meter) for name, sourced in meters.items())
        yield from sorted(named.items())

    def histograms(self) -> Iterator[tuple[MetricName, Histogram]]:
        yield from sorted(self._histograms.items())

    def values(self) -> Mapping[str, float | None]:
        """JMX name -> gauge value or count: a flat view for tests and tools."""
        out: dict[str, float | None] = {}
        for name, read in self.gauges():
            value = read()
            out[name.jmx()] = None if value is None else float(value)
        for name, c in self.counters():
            out[name.jmx()] = c.count
        for name, m in self.meters():
            out[name.jmx()] = m.count
        for name, h in self.histograms():
            out[name.jmx()] = float(h.count)
        return out

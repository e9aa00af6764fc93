"""Prometheus text exposition format (version 0.0.4) of a `MetricsRegistry`.

Names follow the Prometheus JMX exporter's Kafka rules (lowercaseOutputName), so dashboards
built for Kafka read kmirror unchanged:
- gauge `kafka.D:type=T,name=N,k=v` -> `kafka_d_t_n{k="v"}`                       (gauge)
- counter                           -> `kafka_d_t_n_total{...}`                     (counter)
- meter `...name=XPerSec`           -> `kafka_d_t_x_total{...}`                     (counter; the
  exporter's `name=(.+)PerSec\\w*><>Count` rule) and the Yammer attributes as gauges
  `kafka_d_t_xpersec_oneminuterate`, `_fiveminuterate`, `_fifteenminuterate`, `_meanrate`
  (the exporter's generic `<type=T, name=N><>Attribute` rule).
- histogram `...,name=TotalTimeMs`  -> summary `kafka_d_t_totaltimems{...,quantile="0.99"}`
  (quantiles 0.5, 0.75, 0.95, 0.98, 0.99, 0.999, the Yammer percentile attributes) with
  `kafka_d_t_totaltimems_sum` and `_count`, and gauges `..._min`, `..._max`, `..._mean`.
Characters outside `[a-zA-Z0-9_]` become `_`. A gauge reading None is left out of the scrape.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from kmirror.metrics.registry import MetricName, MetricsRegistry

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(name: MetricName, *, strip_per_sec: bool = False) -> str:
    metric = name.name
    if strip_per_sec and metric.endswith("PerSec"):
        metric = metric[: -len("PerSec")]
    return _INVALID.sub("_", f"{name.domain}_{name.type}_{metric}".lower())


def _labels(name: MetricName, extra: tuple[tuple[str, str], ...] = ()) -> str:
    tags = name.tags + extra
    if not tags:
        return ""
    parts = []
    for key, value in tags:
        escaped = value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        parts.append(f'{_INVALID.sub("_", key)}="{escaped}"')
    return "{" + ",".join(parts) + "}"


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


class _Families:
    """Samples grouped by metric family: one `# TYPE` line per family, as the format requires."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, list[str]]] = {}

    def add(self, family: str, kind: str, labels: str, value: float) -> None:
        self.add_sample(family, kind, f"{family}{labels}", value)

    def add_sample(self, family: str, kind: str, sample: str, value: float) -> None:
        """A sample of `family` under its own series name (a summary's `_sum` and `_count`)."""
        self._families.setdefault(family, (kind, []))[1].append(f"{sample} {format_value(value)}")

    def lines(self) -> Iterable[str]:
        for family in sorted(self._families):
            kind, samples = self._families[family]
            yield f"# TYPE {family} {kind}"
            yield from samples


def render(registry: MetricsRegistry) -> str:
    families = _Families()
    for name, read in registry.gauges():
        value = read()
        if value is not None:
            families.add(prometheus_name(name), "gauge", _labels(name), float(value))
    for name, counter in registry.counters():
        families.add(prometheus_name(name) + "_total", "counter", _labels(name), counter.count)
    for name, meter in registry.meters():
        labels = _labels(name)
        families.add(prometheus_name(name, strip_per_sec=True) + "_total", "counter", labels, meter.count)
        base = prometheus_name(name)
        families.add(base + "_oneminuterate", "gauge", labels, meter.one_minute_rate())
        families.add(base + "_fiveminuterate", "gauge", labels, meter.five_minute_rate())
        families.add(base + "_fifteenminuterate", "gauge", labels, meter.fifteen_minute_rate())
        families.add(base + "_meanrate", "gauge", labels, meter.mean_rate())
    for name, histogram in registry.histograms():
        base, labels = prometheus_name(name), _labels(name)
        for q, value in histogram.quantiles():
            families.add(base, "summary", _labels(name, (("quantile", format_value(q)),)), value)
        families.add_sample(base, "summary", f"{base}_sum{labels}", histogram.sum)
        families.add_sample(base, "summary", f"{base}_count{labels}", histogram.count)
        if histogram.count:
            families.add(base + "_min", "gauge", labels, histogram.min)
            families.add(base + "_max", "gauge", labels, histogram.max)
        families.add(base + "_mean", "gauge", labels, histogram.mean())
    return "".join(line + "\n" for line in families.lines())

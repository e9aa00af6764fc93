"""The log cleaner's metrics under Kafka's names (`kafka.log:type=LogCleaner` and
`type=LogCleanerManager`), read at scrape time from the cleaner's `cleaner_metrics()`:
max-buffer-utilization-percent, cleaner-recopy-percent, max-clean-time-secs and
max-compaction-delay-secs (of the last round, as Kafka's report the last run),
uncleanable-partitions-count, time-since-last-run-ms and DeadThreadCount."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kmirror.metrics.registry import GaugeFn, MetricsRegistry, metric_name

_CLEANER = ("max-buffer-utilization-percent", "cleaner-recopy-percent", "max-clean-time-secs",
            "max-compaction-delay-secs", "DeadThreadCount")
_MANAGER = ("uncleanable-partitions-count", "time-since-last-run-ms")


def register_cleaner_metrics(registry: MetricsRegistry, read: Callable[[], Mapping[str, float]]) -> None:
    def reader(name: str) -> GaugeFn:
        def value() -> float | None:
            return read().get(name)
        return value

    for name in _CLEANER:
        registry.gauge(metric_name("kafka.log", "LogCleaner", name), reader(name))
    for name in _MANAGER:
        registry.gauge(metric_name("kafka.log", "LogCleanerManager", name), reader(name))

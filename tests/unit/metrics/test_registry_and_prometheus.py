import math

import pytest

from kmirror.metrics.meter import TICK_INTERVAL_MS
from kmirror.metrics.prometheus import format_value, prometheus_name, render
from kmirror.metrics.registry import MetricsRegistry, metric_name
from kmirror.ports import ManualClock


def test_jmx_names() -> None:
    name = metric_name("kafka.server", "ReplicaFetcherManager", "MaxLag", clientId="Replica")
    assert name.jmx() == "kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica"
    assert prometheus_name(name) == "kafka_server_replicafetchermanager_maxlag"


def test_render_exact_text_of_a_small_registry() -> None:
    clock = ManualClock()
    registry = MetricsRegistry(clock)
    registry.gauge(metric_name("kafka.server", "ReplicaManager", "UnderReplicatedPartitions"), lambda: 2)
    registry.gauge(metric_name("kafka.server", "ReplicaFetcherManager", "MaxLag", clientId="Replica"), lambda: 1.5)
    registry.gauge(metric_name("kafka.server", "ReplicaManager", "ReplicaLagTimeMax"), lambda: None)
    registry.counter(metric_name("kafka.network", "RequestMetrics", "Errors", request="Produce")).inc(3)
    meter = registry.meter(metric_name("kafka.server", "ReplicaManager", "IsrShrinksPerSec"))
    meter.mark(10)
    clock.advance(TICK_INTERVAL_MS + 1)
    assert render(registry) == (
        "# TYPE kafka_network_requestmetrics_errors_total counter\n"
        'kafka_network_requestmetrics_errors_total{request="Produce"} 3\n'
        "# TYPE kafka_server_replicafetchermanager_maxlag gauge\n"
        'kafka_server_replicafetchermanager_maxlag{clientId="Replica"} 1.5\n'
        "# TYPE kafka_server_replicamanager_isrshrinks_total counter\n"
        "kafka_server_replicamanager_isrshrinks_total 10\n"
        "# TYPE kafka_server_replicamanager_isrshrinkspersec_fifteenminuterate gauge\n"
        "kafka_server_replicamanager_isrshrinkspersec_fifteenminuterate 2\n"
        "# TYPE kafka_server_replicamanager_isrshrinkspersec_fiveminuterate gauge\n"
        "kafka_server_replicamanager_isrshrinkspersec_fiveminuterate 2\n"
        "# TYPE kafka_server_replicamanager_isrshrinkspersec_meanrate gauge\n"
        "kafka_server_replicamanager_isrshrinkspersec_meanrate 1.9996000799840032\n"
        "# TYPE kafka_server_replicamanager_isrshrinkspersec_oneminuterate gauge\n"
        "kafka_server_replicamanager_isrshrinkspersec_oneminuterate 2\n"
        "# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge\n"
        "kafka_server_replicamanager_underreplicatedpartitions 2\n"
    )


def test_samples_with_different_labels_share_one_type_line_and_labels_are_escaped() -> None:
    registry = MetricsRegistry(ManualClock())
    for request in ("Produce", 'Fe"tch\\'):
        registry.gauge(metric_name("kafka.network", "RequestMetrics", "Queue", request=request), lambda: 0)
    text = render(registry)
    assert text.count("# TYPE kafka_network_requestmetrics_queue gauge") == 1
    assert 'kafka_network_requestmetrics_queue{request="Fe\\"tch\\\\"} 0\n' in text


def test_format_value() -> None:
    assert format_value(3.0) == "3"
    assert format_value(0.25) == "0.25"
    assert format_value(float("nan")) == "NaN"
    assert format_value(float("inf")) == "+Inf"
    assert format_value(float("-inf")) == "-Inf"


def test_duplicate_names_are_refused_but_counters_and_meters_are_shared() -> None:
    registry = MetricsRegistry(ManualClock())
    name = metric_name("kafka.server", "ReplicaManager", "X")
    registry.gauge(name, lambda: 1)
    with pytest.raises(ValueError):
        registry.gauge(name, lambda: 2)
    with pytest.raises(ValueError):
        registry.counter(name)
    other = metric_name("kafka.server", "ReplicaManager", "Y")
    assert registry.counter(other) is registry.counter(other)
    m = metric_name("kafka.server", "ReplicaManager", "ZPerSec")
    assert registry.meter(m) is registry.meter(m)
    registry.remove(name)
    registry.gauge(name, lambda: 3)
    assert registry.values()[name.jmx()] == 3


def test_sourced_meter_rates_increases_of_a_cumulative_count() -> None:
    clock = ManualClock()
    registry = MetricsRegistry(clock)
    shrinks = {"n": 7}
    name = metric_name("kafka.server", "ReplicaManager", "IsrShrinksPerSec")
    meter = registry.meter(name, source=lambda: shrinks["n"])
    assert meter.count == 7  # counted, but not rated: happened before registration
    clock.advance(TICK_INTERVAL_MS + 1)
    assert meter.one_minute_rate() == 0.0
    shrinks["n"] = 12
    registry.poll()
    assert meter.count == 12
    clock.advance(TICK_INTERVAL_MS)
    # the first tick set the rate to 0; this one folds in 5 events / 5 s with the 1-minute alpha
    assert meter.one_minute_rate() == pytest.approx(1.0 * (1 - math.exp(-5 / 60)))
    shrinks["n"] = 2  # the owner restarted its count: a new baseline, the meter never goes back
    registry.poll()
    shrinks["n"] = 3
    registry.poll()
    assert meter.count == 13


def test_sourced_meter_waits_for_a_first_value() -> None:
    registry = MetricsRegistry(ManualClock())
    value: dict[str, int | None] = {"n": None}
    meter = registry.meter(metric_name("kafka.server", "ReplicaManager", "IsrExpandsPerSec"),
                           source=lambda: value["n"])
    registry.poll()
    assert meter.count == 0
    value["n"] = 4
    registry.poll()
    assert meter.count == 4
    value["n"] = 6
    registry.poll()
    assert meter.count == 6


def test_a_provider_read_once_per_read_is_computed_once_per_scrape() -> None:
    registry = MetricsRegistry(ManualClock())
    calls = []
    values = registry.once_per_read(lambda: calls.append(1) or {"a": 1.0, "b": float(len(calls))})
    registry.gauge(metric_name("kafka.server", "T", "A"), lambda: values()["a"])
    registry.gauge(metric_name("kafka.server", "T", "B"), lambda: values()["b"])
    assert "kafka_server_t_b 1" in render(registry)
    assert "kafka_server_t_b 2" in render(registry)  # a new read computes again
    assert len(calls) == 2

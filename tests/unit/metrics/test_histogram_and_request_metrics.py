from dataclasses import dataclass

import pytest

from kmirror.kip1279.errors import error_name
from kmirror.metrics.histogram import Histogram, quantile
from kmirror.metrics.prometheus import render
from kmirror.metrics.registry import MetricsRegistry, metric_name
from kmirror.metrics.request_metrics import RequestChannelMetrics, RequestTimesMs, _item_counts, error_counts
from kmirror.ports import ManualClock


def test_quantile_interpolates_like_yammer_uniform_snapshot() -> None:
    ordered = [float(v) for v in range(1, 11)]  # 1..10
    assert quantile(ordered, 0.5) == 5.5  # rank 5.5 between 5 and 6
    assert quantile(ordered, 0.75) == pytest.approx(8.25)
    assert quantile(ordered, 0.99) == 10.0  # rank past the end: the maximum
    assert quantile(ordered, 0.0) == 1.0
    assert quantile([], 0.5) == 0.0
    with pytest.raises(ValueError):
        quantile(ordered, 1.5)


def test_histogram_totals_cover_every_update_and_quantiles_the_recent_window() -> None:
    h = Histogram(reservoir_size=4)
    for v in (100.0, 1.0, 2.0, 3.0, 4.0):
        h.update(v)
    assert (h.count, h.sum, h.min, h.max) == (5, 110.0, 1.0, 100.0)
    assert h.mean() == 22.0
    # the first sample (100) left the window of 4
    assert dict(h.quantiles((0.999,)))[0.999] == 4.0


@dataclass
class Partition:
    index: int
    error_code: int


@dataclass
class Topic:
    name: str
    partitions: tuple[Partition, ...]


@dataclass
class Response:
    error_code: int
    topics: tuple[Topic, ...]
    names: tuple[str, ...]


def test_error_counts_walks_every_nested_error_code() -> None:
    response = Response(0, (Topic("a", (Partition(0, 0), Partition(1, 135))), Topic("b", (Partition(0, 135),))),
                        ("x", "y"))
    assert error_counts(response) == {0: 2, 135: 2}
    assert error_counts(Topic("empty", ())) == {}


def test_a_large_item_reused_by_the_next_response_is_counted_once_and_the_same() -> None:
    wide = Topic("wide", tuple(Partition(i, 5 if i % 10 == 0 else 0) for i in range(1000)))
    first = error_counts(Response(0, (wide, Topic("b", (Partition(0, 3),))), ()))
    assert first == {0: 901, 5: 100, 3: 1}
    assert _item_counts(wide) is _item_counts(wide)  # kept for that object
    assert error_counts(Response(0, (wide,), ())) == {0: 901, 5: 100}
    other = Topic("wide", tuple(Partition(i, 7) for i in range(1000)))  # an equal name is not the same item
    assert error_counts(Response(0, (other,), ())) == {0: 1, 7: 1000}


def test_request_metrics_by_request_version_and_error() -> None:
    registry = MetricsRegistry(ManualClock())
    metrics = RequestChannelMetrics(registry, error_name)
    refused = Response(0, (Topic("m", (Partition(0, 135),)),), ())
    metrics.record("Produce", 9, _times(2.0), 100, refused)
    metrics.record("Produce", 9, _times(4.0), 300, refused)
    metrics.record("Produce", 7, _times(6.0), 200, None)  # acks=0: no response, no error counted
    metrics.record("Fetch", 12, _times(1.0), 50, Response(0, (), ()), from_follower=False)
    values = registry.values()
    rm = "kafka.network:type=RequestMetrics"
    assert values[f"{rm},name=RequestsPerSec,request=Produce,version=9"] == 2
    assert values[f"{rm},name=RequestsPerSec,request=Produce,version=7"] == 1
    assert values[f"{rm},name=ErrorsPerSec,request=Produce,error=READ_ONLY_TOPIC"] == 2
    assert values[f"{rm},name=ErrorsPerSec,request=Produce,error=NONE"] == 2
    assert values[f"{rm},name=TotalTimeMs,request=Produce"] == 3
    assert values[f"{rm},name=RequestsPerSec,request=FetchConsumer,version=12"] == 1
    assert values[f"{rm},name=RequestsPerSec,request=Fetch,version=12"] == 1
    assert f"{rm},name=ErrorsPerSec,request=FetchConsumer,error=NONE" not in values
    text = render(registry)
    assert 'kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.5"} 4\n' in text
    assert 'kafka_network_requestmetrics_totaltimems_count{request="Produce"} 3\n' in text
    assert 'kafka_network_requestmetrics_totaltimems_sum{request="Produce"} 12\n' in text
    assert 'kafka_network_requestmetrics_requestbytes_max{request="Produce"} 300\n' in text
    assert 'kafka_network_requestmetrics_errors_total{request="Produce",error="READ_ONLY_TOPIC"} 2\n' in text
    assert 'kafka_network_requestmetrics_requests_total{request="Produce",version="9"} 2\n' in text
    assert text.count("# TYPE kafka_network_requestmetrics_totaltimems summary\n") == 1


def _times(total: float) -> RequestTimesMs:
    return RequestTimesMs(queue=total / 8, local=total / 4, remote=total / 2, throttle=0.0,
                          response_queue=total / 16, response_send=total / 16, total=total)


def test_each_part_of_a_requests_time_has_its_kafka_histogram() -> None:
    registry = MetricsRegistry(ManualClock())
    metrics = RequestChannelMetrics(registry, error_name)
    metrics.record("Fetch", 12, RequestTimesMs(queue=1.0, local=2.0, remote=500.0, throttle=0.0,
                                               response_queue=0.5, response_send=0.25, total=503.75),
                   50, None, from_follower=True)
    text = render(registry)
    for request in ("Fetch", "FetchFollower"):
        for name, expected in (("requestqueuetimems", "1"), ("localtimems", "2"), ("remotetimems", "500"),
                               ("throttletimems", "0"), ("responsequeuetimems", "0.5"),
                               ("responsesendtimems", "0.25"), ("totaltimems", "503.75")):
            assert f'kafka_network_requestmetrics_{name}_sum{{request="{request}"}} {expected}\n' in text


def test_gauge_and_meter_sets_follow_the_names_their_source_reports() -> None:
    clock = ManualClock()
    registry = MetricsRegistry(clock)
    lags = {"t-0": 5, "t-1": None}
    counts = {"f1": 10}
    registry.gauge_set(lambda: [(metric_name("kafka.server", "FetcherLagMetrics", "ConsumerLag", partition=p), v)
                                for p, v in lags.items()])
    registry.meter_set(lambda: [(metric_name("kafka.server", "FetcherStats", "BytesPerSec", clientId=c), v)
                                for c, v in counts.items()])
    text = render(registry)
    assert 'kafka_server_fetcherlagmetrics_consumerlag{partition="t-0"} 5\n' in text
    assert 't-1' not in text
    assert 'kafka_server_fetcherstats_bytes_total{clientId="f1"} 10\n' in text
    counts["f1"] = 25
    counts["f2"] = 3
    registry.poll()
    text = render(registry)
    assert 'kafka_server_fetcherstats_bytes_total{clientId="f1"} 25\n' in text
    assert 'kafka_server_fetcherstats_bytes_total{clientId="f2"} 3\n' in text
    del counts["f1"]
    del lags["t-0"]
    registry.poll()
    text = render(registry)
    assert 'clientId="f1"' not in text and "consumerlag" not in text

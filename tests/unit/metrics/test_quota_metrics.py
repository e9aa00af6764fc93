"""Quota metrics read at scrape time: a sensor's byte-rate and throttle-time with Kafka's
user/client-id tags, the KIP-599 tokens, the mirror throttle's byte-rate, in Prometheus form."""

from __future__ import annotations

from kmirror.broker.quotas.managers import QuotaManagers
from kmirror.client.sampled_rate import QuotaWindow
from kmirror.metrics.prometheus import render
from kmirror.metrics.quota_metrics import register_quota_metrics
from kmirror.metrics.registry import MetricsRegistry
from kmirror.ports import ManualClock
from kmirror.replication.replication_quota import ReplicationQuotaManager


def test_quota_metrics_render_with_kafka_names() -> None:
    clock = ManualClock()
    registry = MetricsRegistry(clock)
    quotas = QuotaManagers(QuotaWindow(), QuotaWindow())
    mirror = ReplicationQuotaManager(1, QuotaWindow(), 1000, clock.monotonic_ms())
    register_quota_metrics(registry, quotas, clock, mirror)
    quotas.update_quotas({(("client-id", "app"),): {"consumer_byte_rate": 1000.0, "controller_mutation_rate": 1.0}})
    now = clock.monotonic_ms()
    throttle = quotas.fetch.record_and_get_throttle_ms("ANONYMOUS", "app", 20_000, now)
    quotas.fetch.record_throttle_time("ANONYMOUS", "app", throttle, now)
    quotas.controller_mutation.new_quota_for("CreateTopics", 6, "ANONYMOUS", "app", now).record(15, now)
    mirror.record(5000, now)
    text = render(registry)
    assert 'kafka_server_fetch_byte_rate{user="",client_id="app"} 2000' in text
    assert f'kafka_server_fetch_throttle_time{{user="",client_id="app"}} {throttle}' in text
    assert 'kafka_server_fetch_throttled_requests{user="",client_id="app"} 1' in text
    assert 'kafka_server_controllermutation_tokens{user="",client_id="app"} -4' in text
    assert "kafka_server_mirrorreplication_byte_rate 500" in text
    assert "kafka_server_mirrorreplication_throttled_bytes_total 5000" in text

"""`register_quota_metrics`: Kafka's client quota metrics, read at scrape time from the node's
`QuotaManagers` (one set per sensor, i.e. per (user, client-id) a quota applies to):
- `kafka.server:type=Produce|Fetch,name=byte-rate,user=U,client-id=C`: bytes/s over the
  quota window;
- `kafka.server:type=Request,name=request-time,user=U,client-id=C`: percent of a handler;
- `kafka.server:type=Produce|Fetch|Request,name=throttle-time,...`: mean throttle time (ms) per
  request of that sensor, and `throttle-time-max`, `throttled-requests`;
- `kafka.server:type=ControllerMutation,name=tokens,user=U,client-id=C`: tokens left in the
  KIP-599 bucket (negative while throttled);
- `kafka.server:type=MirrorReplication,name=byte-rate`: bytes/s the mirror fetchers took for
  throttled replicas (`mirror.replication.throttled.*`), `throttled-bytes-total`, and
  `throttled-fetches-total` (fetch rounds that left throttled partitions out).
Metrics of a sensor dropped for inactivity disappear with it.
"""

from __future__ import annotations

from collections.abc import Iterator

from kmirror.broker.quotas.client_quota_manager import ClientQuotaManager
from kmirror.broker.quotas.managers import QuotaManagers
from kmirror.metrics.registry import MetricName, MetricsRegistry, metric_name
from kmirror.ports import Clock
from kmirror.replication.replication_quota import ReplicationQuotaManager

DOMAIN = "kafka.server"


def register_quota_metrics(registry: MetricsRegistry, quotas: QuotaManagers, clock: Clock,
                           mirror_quota: ReplicationQuotaManager | None = None) -> None:
    now_ms = clock.monotonic_ms
    if mirror_quota is not None:
        # Kafka's replication quota metrics, for the mirror fetchers' throttle
        registry.gauge(metric_name(DOMAIN, "MirrorReplication", "byte-rate"),
                       lambda: mirror_quota.byte_rate(now_ms()))
        registry.gauge(metric_name(DOMAIN, "MirrorReplication", "throttled-bytes-total"),
                       lambda: mirror_quota.throttled_bytes_total)
        registry.gauge(metric_name(DOMAIN, "MirrorReplication", "throttled-fetches-total"),
                       lambda: mirror_quota.throttled_fetches_total)

    def read() -> Iterator[tuple[MetricName, float | int | None]]:
        now = now_ms()
        for manager, rate_name in ((quotas.produce, "byte-rate"), (quotas.fetch, "byte-rate"),
                                   (quotas.request, "request-time")):
            yield from _client_sensors(manager, rate_name, now)
        for (user, client_id), bucket in list(quotas.controller_mutation.buckets.items()):
            yield (metric_name(DOMAIN, "ControllerMutation", "tokens", user=user, **{"client-id": client_id}),
                   bucket.measure(now))

    registry.gauge_set(read)


def _client_sensors(manager: ClientQuotaManager, rate_name: str,
                    now: int) -> Iterator[tuple[MetricName, float | int | None]]:
    kind = manager.quota_type.metric_type
    for (user, client_id), sensor in list(manager.sensors.items()):
        tags = {"user": user, "client-id": client_id}
        yield metric_name(DOMAIN, kind, rate_name, **tags), sensor.rate.measure(now)
        mean = sensor.throttle_total_ms / sensor.requests if sensor.requests else 0.0
        yield metric_name(DOMAIN, kind, "throttle-time", **tags), mean
        yield metric_name(DOMAIN, kind, "throttle-time-max", **tags), sensor.throttle_max_ms
        yield metric_name(DOMAIN, kind, "throttled-requests", **tags), sensor.throttled_requests

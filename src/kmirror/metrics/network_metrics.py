"""Kafka's client network metrics of a node's fetchers (`kmirror.client.network_stats`), as
Kafka exposes the `Selector` metrics of its fetcher threads: one group per fetcher, each
metric an attribute of it (`kafka.server:type=<group>,<tags>`, attribute connection-count,
request-rate, ...):
- `replica-fetcher-metrics`, tags `broker-id` (the leader) and `fetcher-id`: a follower's
  connections to each leader it replicates from (one fetcher per leader here, fetcher-id 0);
- `mirror-broker-{id}-fetcher-{n}-mirror-{name}-metrics`, tags `broker-id` (the source broker)
  and `fetcher-id`: KIP-1279's mirror fetchers (`mirror_metrics`).
Fetchers whose endpoint is not a network one (in-process tests) have none.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kmirror.metrics.registry import MetricName, MetricsRegistry, metric_name
from kmirror.replication.fetcher.remote_endpoint import RemoteLeaderEndPoint

REPLICA_FETCHER_GROUP = "replica-fetcher-metrics"


def fetcher_network_values(fetcher: Any, group: str, now_ms: int,
                           **tags: str) -> Iterator[tuple[MetricName, float | None]]:
    """The metrics of one fetcher (`Fetcher`: `endpoint`), none without a network endpoint."""
    endpoint = fetcher.endpoint
    if isinstance(endpoint, RemoteLeaderEndPoint):
        for name, value in endpoint.network_stats.values(now_ms).items():
            yield metric_name("kafka.server", group, name, **tags), value


def register_replica_fetcher_network_metrics(registry: MetricsRegistry, fetcher_manager: Any) -> None:
    """`fetcher_manager`: `ReplicaFetcherManager` (`fetchers`: leader id -> Fetcher)."""

    def read() -> Iterator[tuple[MetricName, float | None]]:
        now = registry.clock.monotonic_ms()
        for leader, fetcher in list(fetcher_manager.fetchers.items()):
            yield from fetcher_network_values(fetcher, REPLICA_FETCHER_GROUP, now,
                                              **{"broker-id": str(leader), "fetcher-id": "0"})

    registry.gauge_set(read)

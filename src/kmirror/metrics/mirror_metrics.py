"""`register_mirror_metrics`: the KIP-1279 "Metrics" table for one broker's mirror data plane.

Read at scrape time from the `MirrorDataPlane` (never pushed; the data plane knows nothing of
the registry):
- `kafka.server.mirror:type=MirrorFetcherManager,clientId=MirrorReplica`:
  `MaxLag` (largest ConsumerLag, 0 without mirrored partitions, as Kafka's fetcher managers),
  `MinFetchRate` (smallest one-minute Fetch request rate over the mirror fetchers, 0 without
  fetchers), `DeadThreadCount` (fetchers whose task ended without being stopped),
  `FailedPartitionsCount` (partitions in FAILED plus partitions whose source leader cannot be
  resolved: source unreachable, unauthorized, topic missing);
- `kafka.server:type=FetcherLagMetrics,name=ConsumerLag,clientId=MirrorFetcherThread-{source
  broker}-{fetcherId}-{mirror},topic,partition`: source high watermark - local log end offset;
- `kafka.server:type=FetcherStats,name=BytesPerSec|RequestsPerSec,clientId=...,brokerHost,
  brokerPort,mirror-name`: per mirror fetcher, record bytes fetched and Fetch requests sent;
- `kafka.server.mirror:type=MirrorMetadataManager`: `{Preparing,Mirroring,Stopping,Stopped,
  Failed}PartitionState` (mirror partitions led here, per state; `Pausing`/`Paused` too, which
  the KIP's table omits), the sync error counters and `SourceTopicDeletedPartitionsCount`
  (partitions stopped because their source topic was deleted or re-created);
- `kafka.server:type=mirror-broker-{broker}-fetcher-{fetcherId}-mirror-{mirror}-metrics,
  broker-id={source broker},fetcher-id={fetcherId}`: Kafka's client network metrics of each
  mirror fetcher's connections (connection-count, request-rate, incoming-byte-total,
  failed-authentication-total, ...; `kmirror.client.network_stats`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kmirror.kip1279.state import MirrorPartitionState
from kmirror.metrics.network_metrics import fetcher_network_values
from kmirror.metrics.registry import MetricName, MetricsRegistry, metric_name

S = MirrorPartitionState
MIRROR_FETCHER_MANAGER = ("kafka.server.mirror", "MirrorFetcherManager")
MIRROR_METADATA_MANAGER = ("kafka.server.mirror", "MirrorMetadataManager")
MANAGER_CLIENT_ID = "MirrorReplica"

STATE_GAUGES: tuple[tuple[str, MirrorPartitionState], ...] = (
    ("PreparingPartitionState", S.PREPARING),
    ("MirroringPartitionState", S.MIRRORING),
    ("PausingPartitionState", S.PAUSING),
    ("PausedPartitionState", S.PAUSED),
    ("StoppingPartitionState", S.STOPPING),
    ("StoppedPartitionState", S.STOPPED),
    ("FailedPartitionState", S.FAILED),
)
SOURCE_TOPIC_DELETED = "SourceTopicDeletedPartitionsCount"
"""Mirror partitions this broker stopped because their source topic was deleted or
re-created under another topic id (cumulative)."""
SYNC_ERROR_COUNTERS: tuple[tuple[str, str], ...] = (
    ("MetadataRefreshError", "metadata_refresh"),
    ("TopicConfigMetadataSyncError", "topic_config"),
    ("ConsumerGroupOffsetSyncError", "consumer_group_offset"),
    ("AclSyncError", "acl"),
)


def fetcher_thread_client_id(source_broker_id: int, fetcher_id: int, mirror_name: str) -> str:
    """KIP-1279: `MirrorFetcherThread-{sourceBroker.id}-{fetcherId}-{mirrorName}`."""
    return f"MirrorFetcherThread-{source_broker_id}-{fetcher_id}-{mirror_name}"


def state_counts(partitions: Any) -> dict[MirrorPartitionState, int]:
    """Mirror partitions (`MirrorManager.partitions` values with `.state`) per state."""
    counts: dict[MirrorPartitionState, int] = {}
    for mp in partitions.values():
        counts[mp.state] = counts.get(mp.state, 0) + 1
    return counts


def register_mirror_metrics(registry: MetricsRegistry, data_plane: Any) -> None:
    """`data_plane` has `manager` (MirrorManager: `partitions`, `fetchers`) and `sync_errors`."""

    def fetchers() -> Any:
        return data_plane.manager.fetchers

    def lags() -> dict[Any, tuple[Any, int]]:
        return fetchers().partition_lags()  # type: ignore[no-any-return]

    def consumer_lags() -> Iterator[tuple[MetricName, int]]:
        for tp, (key, lag) in lags().items():
            client_id = fetcher_thread_client_id(key.source_broker_id, key.fetcher_id, key.mirror_name)
            yield (metric_name("kafka.server", "FetcherLagMetrics", "ConsumerLag",
                               clientId=client_id, topic=tp.topic, partition=str(tp.partition)), lag)

    def fetcher_tags(key: Any) -> dict[str, str]:
        host, port = fetchers().fetcher_address.get(key, ("", 0))
        return {"clientId": fetcher_thread_client_id(key.source_broker_id, key.fetcher_id, key.mirror_name),
                "brokerHost": host, "brokerPort": str(port), "mirror-name": key.mirror_name}

    def fetcher_counts() -> Iterator[tuple[MetricName, int]]:
        for key, fetcher in list(fetchers().fetchers.items()):
            tags = fetcher_tags(key)
            yield metric_name("kafka.server", "FetcherStats", "BytesPerSec", **tags), fetcher.fetched_bytes_total
            yield metric_name("kafka.server", "FetcherStats", "RequestsPerSec", **tags), fetcher.fetch_requests_total

    request_meters = registry.meter_set(fetcher_counts)

    def fetcher_networks() -> Iterator[tuple[MetricName, float | None]]:
        now = registry.clock.monotonic_ms()
        for key, fetcher in list(fetchers().fetchers.items()):
            # KIP-1279: "mirror-" + the fetcher's client id (broker-{this broker}-fetcher-{n}-
            # mirror-{name}) + "-metrics", as Kafka names a client's metric group after it
            yield from fetcher_network_values(fetcher, f"mirror-{fetcher.name}-metrics", now,
                                              **{"broker-id": str(key.source_broker_id),
                                                 "fetcher-id": str(key.fetcher_id)})

    registry.gauge_set(fetcher_networks)

    def min_fetch_rate() -> float:
        rates = [m.one_minute_rate() for name, m in request_meters().items() if name.name == "RequestsPerSec"]
        return min(rates) if rates else 0.0

    def failed_partitions() -> int:
        counts = state_counts(data_plane.manager.partitions)
        return counts.get(S.FAILED, 0) + len(fetchers().pending)

    manager = MIRROR_FETCHER_MANAGER
    registry.gauge(metric_name(*manager, "MaxLag", clientId=MANAGER_CLIENT_ID),
                   lambda: max((lag for _, lag in lags().values()), default=0))
    registry.gauge(metric_name(*manager, "MinFetchRate", clientId=MANAGER_CLIENT_ID), min_fetch_rate)
    registry.gauge(metric_name(*manager, "DeadThreadCount", clientId=MANAGER_CLIENT_ID),
                   lambda: sum(1 for f in list(fetchers().fetchers.values()) if f.dead))
    registry.gauge(metric_name(*manager, "FailedPartitionsCount", clientId=MANAGER_CLIENT_ID), failed_partitions)
    registry.gauge_set(consumer_lags)
    for gauge, state in STATE_GAUGES:
        registry.gauge(metric_name(*MIRROR_METADATA_MANAGER, gauge),
                       lambda state=state: state_counts(data_plane.manager.partitions).get(state, 0))  # type: ignore[misc]
    registry.gauge(metric_name(*MIRROR_METADATA_MANAGER, SOURCE_TOPIC_DELETED),
                   lambda: data_plane.manager.source_topic_deleted_partitions)
    for counter, field in SYNC_ERROR_COUNTERS:
        registry.gauge(metric_name(*MIRROR_METADATA_MANAGER, counter),
                       lambda field=field: getattr(data_plane.sync_errors, field))  # type: ignore[misc]

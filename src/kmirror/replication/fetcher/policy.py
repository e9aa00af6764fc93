"""What differs between fetchers sharing the engine: who fetches and how much.

Follower replication: `replica_id` = this broker, read up to the leader's LEO
(isolation READ_UNCOMMITTED), truncation on fetch through `last_fetched_epoch`.
A later mirror fetcher (KIP-1279) uses `replica_id` -1 (a consumer of the source cluster),
`isolation_level` READ_COMMITTED to stop at the source LSO, and keeps offsets and epochs
as the follower does.
"""

from __future__ import annotations

from dataclasses import dataclass

from kmirror.config.server import ServerConfig


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    replica_id: int
    replica_epoch: int = -1  # KIP-903 broker epoch, Fetch v15+
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    isolation_level: int = 0
    # Send last_fetched_epoch and truncate on diverging_epoch (Fetch v12+); otherwise
    # truncate through OffsetsForLeaderEpoch before fetching.
    truncate_on_fetch: bool = True


def replica_fetch_policy(config: ServerConfig | None, replica_id: int) -> FetchPolicy:
    """A fetcher's sizes and timings from Kafka's `replica.fetch.*` broker keys (the
    defaults without a config)."""
    if config is None:
        return FetchPolicy(replica_id=replica_id)
    return FetchPolicy(
        replica_id=replica_id,
        max_wait_ms=int(config.get("replica.fetch.wait.max.ms")),
        min_bytes=int(config.get("replica.fetch.min.bytes")),
        max_bytes=int(config.get("replica.fetch.response.max.bytes")),
        partition_max_bytes=int(config.get("replica.fetch.max.bytes")),
        backoff_ms=int(config.get("replica.fetch.backoff.ms")),
    )

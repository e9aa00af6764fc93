"""The mirror fetch policy (KIP-1279 "MirrorFetcher"): the shared fetch engine reading a
source cluster as a consumer.

- replica id -1 and READ_COMMITTED: the source answers like any consumer, never past its
  last stable offset, so undecided transactional data is never mirrored;
- no truncation on fetch: a consumer Fetch carries no `last_fetched_epoch` check on the
  source, so divergence within an epoch is resolved before fetching through
  OffsetsForLeaderEpoch (the engine's TRUNCATING phase), as a pre-v12 follower does;
- `current_leader_epoch` -1 on every request: the destination's leader epochs are its own
  and mean nothing to the source.
"""

from __future__ import annotations

import dataclasses

from kmirror.config.server import ServerConfig
from kmirror.replication.fetcher.policy import FetchPolicy, replica_fetch_policy

CONSUMER_REPLICA_ID = -1
READ_COMMITTED = 1
NO_LEADER_EPOCH = -1


def mirror_fetch_policy(config: ServerConfig | None = None) -> FetchPolicy:
    """The follower's fetch sizes and timings (Kafka's replica.fetch.* keys) for a consumer
    of the source."""
    return dataclasses.replace(replica_fetch_policy(config, CONSUMER_REPLICA_ID),
                               isolation_level=READ_COMMITTED, truncate_on_fetch=False)


def mirror_fetcher_client_id(broker_id: int, fetcher_id: int, mirror_name: str) -> str:
    """KIP-1279: the client id the source sees for this fetcher."""
    return f"broker-{broker_id}-fetcher-{fetcher_id}-mirror-{mirror_name}"


def mirror_fetcher_id(partition_key: str, num_fetchers: int) -> int:
    """Which of `mirror.num.replica.fetchers` fetchers a partition uses (stable per key;
    Kafka: abs(31 * topic.hashCode + partition) % numFetchers, here a hash that does not
    change between processes)."""
    h = 0
    for ch in partition_key.encode():
        h = (h * 31 + ch) & 0x7FFFFFFF
    return h % max(1, num_fetchers)

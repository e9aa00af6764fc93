"""The mirror replication throttle: which replicas `mirror.replication.throttled.replicas`
throttles, and a fetch engine that leaves throttled partitions out while the rate is over
`mirror.replication.throttled.rate` holding that rate over 30 s (simulated clock)."""

from __future__ import annotations

from kmirror.client.sampled_rate import QuotaWindow
from kmirror.replication.replication_quota import UNLIMITED, ReplicationQuotaManager, throttled_partitions
from kmirror.types import TopicPartition


def test_throttled_replicas_notations() -> None:
    assert throttled_partitions(["0:1", "1:2", "2:1"], 1) == frozenset({0, 2})
    assert throttled_partitions(["[0:4]"], 4) == frozenset({0})  # the KIP's notation
    assert throttled_partitions(["*"], 7) is None
    assert throttled_partitions(["junk", "3:x", ""], 1) == frozenset()


def test_only_named_replicas_are_throttled_and_unlimited_throttles_nothing() -> None:
    quota = ReplicationQuotaManager(1, QuotaWindow(), 1000, 0)
    quota.update_throttled_replicas({"a": ["0:1"], "b": ["*"]})
    assert quota.is_throttled(TopicPartition("a", 0)) and not quota.is_throttled(TopicPartition("a", 1))
    assert quota.is_throttled(TopicPartition("b", 5)) and not quota.is_throttled(TopicPartition("c", 0))
    quota.set_rate(UNLIMITED)
    assert not quota.is_throttled(TopicPartition("b", 5))


def _mirrored(rate: int, chunk: int, seconds: int) -> int:
    """Bytes a fetcher copies in `seconds` when it fetches `chunk` every 20 ms unless the quota
    is exceeded, then backs off 1 s (replica.fetch.backoff.ms), as the fetch engine does."""
    quota = ReplicationQuotaManager(1, QuotaWindow(), rate, 0)
    now = copied = 0
    while now < seconds * 1000:
        if quota.is_quota_exceeded(now):
            now += 1000
            continue
        quota.record(chunk, now)
        copied += chunk
        now += 20
    return copied


def test_rate_holds_within_20_percent_over_30_seconds() -> None:
    for rate in (300_000, 1_000_000, 10_000_000):
        for chunk in (65_536, 1_048_576):
            if chunk > rate or chunk * 50 < 2 * rate:  # the quota must be what limits the fetcher
                continue
            assert 0.8 <= _mirrored(rate, chunk, 30) / (30 * rate) <= 1.2, (rate, chunk)

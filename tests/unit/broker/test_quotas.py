"""Quota managers (sans-IO, driven by explicit times): Kafka's sampled rate and throttle time,
the DefaultQuotaCallback's entity precedence and sharing, the Fetch quota's unrecord, the
request quota's bound, KIP-599's strict and permissive token bucket, and throttle_after."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import pytest

from kmirror.broker.quotas.client_quota_manager import ClientQuotaManager, QuotaType, resolve_quota
from kmirror.broker.quotas.controller_mutation import ControllerMutationQuotaManager
from kmirror.broker.quotas.managers import QuotaManagers, client_throttles
from kmirror.client.sampled_rate import QuotaWindow, SampledRate, TokenBucket

W = QuotaWindow(samples=11, window_ms=1000)


def test_rate_counts_at_least_samples_minus_one_windows() -> None:
    rate = SampledRate(W, 0)
    rate.record(10_000, 0)
    assert rate.window_size_ms(0) == 10_000  # a fresh sensor: 10 full windows, not 0 ms
    assert rate.measure(0) == pytest.approx(1000.0)
    assert rate.measure(25_000) == 0.0  # every sample obsolete


def test_avg_and_max_are_kafkas_over_the_same_samples() -> None:
    stat = SampledRate(QuotaWindow(samples=2, window_ms=30_000), 0)
    assert stat.avg(0) is None and stat.max(0) is None  # Kafka reports NaN
    stat.record(10, 0)
    stat.record(30, 20_000)
    stat.record(5, 40_000)  # the second sample
    assert (stat.avg(40_000), stat.max(40_000)) == (15.0, 30)
    assert (stat.avg(61_000), stat.max(61_000)) == (5.0, 5)  # the first sample is obsolete after 60 s
    assert stat.avg(101_000) is None


def test_throttle_time_is_kafkas_formula() -> None:
    rate = SampledRate(W, 0)
    rate.record(20_000, 0)  # 2,000 B/s over 10 s against a 1,000 B/s bound
    assert rate.throttle_time_ms(1000.0, 0) == 10_000  # (2000 - 1000) / 1000 * 10,000 ms
    assert rate.throttle_time_ms(2000.0, 0) == 0


def test_steady_producer_is_held_at_the_quota() -> None:
    """A client that sends 100 KB whenever it is not throttled, and waits out every throttle,
    averages the 50 KB/s quota over a minute."""
    manager = ClientQuotaManager(QuotaType.PRODUCE, W)
    manager.update_quotas({(("client-id", "p"),): {"producer_byte_rate": 50_000.0}})
    now, sent = 0, 0
    while now < 60_000:
        throttle = manager.record_and_get_throttle_ms("ANONYMOUS", "p", 100_000, now)
        sent += 100_000
        now += max(10, throttle)
    assert 0.9 <= sent / 60 / 50_000 <= 1.2


def test_precedence_and_sharing_follow_the_default_quota_callback() -> None:
    quotas = {
        (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 1.0},
        (("user", "alice"),): {"producer_byte_rate": 2.0, "consumer_byte_rate": 20.0},
        (("client-id", None), ("user", None)): {"producer_byte_rate": 3.0},
        (("user", None),): {"producer_byte_rate": 4.0},
        (("client-id", "app"),): {"producer_byte_rate": 5.0},
        (("client-id", None),): {"producer_byte_rate": 6.0, "consumer_byte_rate": 60.0},
    }
    key = "producer_byte_rate"
    assert resolve_quota(quotas, key, "alice", "app") == resolve_quota(quotas, key, "alice", "app")
    assert (q := resolve_quota(quotas, key, "alice", "app")) is not None and (q.bound, q.tags) == (1.0, ("alice", "app"))
    assert (q := resolve_quota(quotas, key, "alice", "other")) is not None and (q.bound, q.tags) == (2.0, ("alice", ""))
    assert (q := resolve_quota(quotas, key, "bob", "app")) is not None and (q.bound, q.tags) == (3.0, ("bob", "app"))
    # each key resolves on its own: alice's consumer quota is hers, bob's falls to the client default
    assert (q := resolve_quota(quotas, "consumer_byte_rate", "alice", "x")) is not None and q.bound == 20.0
    assert (q := resolve_quota(quotas, "consumer_byte_rate", "bob", "x")) is not None and (q.bound, q.tags) == (
        60.0, ("", "x"))
    assert resolve_quota(quotas, "request_percentage", "bob", "x") is None


def test_fetch_unrecord_and_window_bound() -> None:
    manager = ClientQuotaManager(QuotaType.FETCH, W)
    assert manager.max_value_in_window("ANONYMOUS", "c") is None and not manager.enabled
    manager.update_quotas({(("client-id", "c"),): {"consumer_byte_rate": 1000.0}})
    assert manager.max_value_in_window("ANONYMOUS", "c") == 10_000.0
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "c", 20_000, 0) > 0
    manager.unrecord("ANONYMOUS", "c", 20_000, 0)
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "c", 5_000, 1) == 0
    manager.record_throttle_time("ANONYMOUS", "c", 120, 1)
    sensor = manager.sensors[("", "c")]
    assert (sensor.requests, sensor.throttled_requests, sensor.throttle_max_ms) == (1, 1, 120)


def test_request_quota_throttle_is_bounded_by_one_window() -> None:
    manager = ClientQuotaManager(QuotaType.REQUEST, W, bounded_throttle=True)
    manager.update_quotas({(("user", None),): {"request_percentage": 1.0}})
    assert manager.record_and_get_throttle_ms("ANONYMOUS", "c", 10_000.0, 0) == 1000


def test_token_bucket_burst_refill_and_throttle() -> None:
    bucket = TokenBucket(W, rate=2.0, now_ms=0)
    assert bucket.measure(0) == 22.0  # rate * samples * window
    bucket.record(30, 0)
    assert bucket.measure(0) == -8.0
    assert bucket.throttle_time_ms(0) == 4000
    assert bucket.throttle_time_ms(4000) == 0
    assert bucket.measure(100_000) == 22.0  # never above the burst
    bucket.record(2**50, 100_000)
    assert bucket.throttle_time_ms(100_000) == 2**31 - 1  # fits throttle_time_ms (int32)


def test_strict_quota_refuses_once_negative_and_permissive_only_throttles() -> None:
    manager = ControllerMutationQuotaManager(W)
    manager.update_quotas({(("client-id", "admin"),): {"controller_mutation_rate": 2.0}})
    strict = manager.new_quota_for("CreateTopics", 6, "ANONYMOUS", "admin", 0)
    assert strict.strict
    assert strict.record(20, 0) == 0 and strict.record(10, 0) == 0  # a large mutation is accepted while >= 0
    assert strict.record(1, 0) == 4000  # the bucket is at -8: refused for 8 / 2 s
    assert strict.throttle_time_ms(1000) == 3000
    permissive = manager.new_quota_for("CreateTopics", 5, "ANONYMOUS", "admin", 1000)
    assert not permissive.strict
    assert permissive.record(4, 1000) == 0  # accepted, but the client is throttled
    assert permissive.throttle_time_ms(1000) == 5000  # -10 tokens at 2/s
    unlimited = manager.new_quota_for("DeleteTopics", 6, "ANONYMOUS", "someone-else", 0)
    assert unlimited.record(10_000, 0) == 0 and unlimited.throttle_time_ms(0) == 0


@dataclass(frozen=True)
class _Response:
    throttle_time: datetime.timedelta


def test_throttle_after_takes_the_largest_throttle_and_rewrites_the_response() -> None:
    quotas = QuotaManagers(W, W)
    quotas.update_quotas({(("client-id", "p"),): {"producer_byte_rate": 1000.0}})
    response, throttle_ms = quotas.throttle_after(0, None, "p", 20_000, 1000, _Response(datetime.timedelta(0)), 0)
    assert throttle_ms == 10_000 and response.throttle_time == datetime.timedelta(milliseconds=10_000)
    # acks=0: no response, the throttle still mutes the channel
    assert quotas.throttle_after(0, None, "p", 20_000, 1000, None, 0)[1] > 0
    # another client is not recorded
    assert quotas.throttle_after(0, None, "q", 10**9, 1000, _Response(datetime.timedelta(0)), 0)[1] == 0


def test_kip219_versions() -> None:
    assert not client_throttles(0, 5) and client_throttles(0, 6)
    assert not client_throttles(1, 7) and client_throttles(1, 8)
    assert client_throttles(48, 0)


def test_connection_creation_rate_per_ip_and_default() -> None:
    quotas = QuotaManagers(W, W)
    quotas.update_quotas({(("ip", "10.0.0.1"),): {"connection_creation_rate": 1.0},
                          (("ip", None),): {"connection_creation_rate": 100.0}})
    admitted = sum(quotas.connection_rate.admit("10.0.0.1", 0) for _ in range(30))
    assert admitted == 10  # 1/s over the 10 s minimum window
    assert all(quotas.connection_rate.admit("10.0.0.2", 0) for _ in range(30))  # the default entity
    assert quotas.connection_rate.admit("10.0.0.1", 20_000)  # the window has passed
    quotas.update_quotas({})
    assert all(quotas.connection_rate.admit("10.0.0.1", 20_001) for _ in range(100))

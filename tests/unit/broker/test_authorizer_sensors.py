"""The authorizer's sensors: Kafka's Rate per minute over a windowed count (2 samples of 30 s)."""

from __future__ import annotations

import pytest

from kmirror.broker.authorizer_sensors import AuthorizerSensors
from kmirror.metadata.authorizer import AuthorizationResult
from kmirror.ports import ManualClock

ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED


def test_a_decision_is_a_request_and_an_allowed_or_a_denied() -> None:
    clock = ManualClock()
    sensors = AuthorizerSensors(clock)
    assert (sensors.request_rate_per_minute(), sensors.allowed_rate_per_minute(),
            sensors.denied_rate_per_minute()) == (0.0, 0.0, 0.0)
    for result in (ALLOWED, ALLOWED, ALLOWED, DENIED):
        sensors.record(result)
    # a fresh window counts as one full 30 s window at least (Kafka's Rate.windowSize)
    assert (sensors.request_rate_per_minute(), sensors.allowed_rate_per_minute(),
            sensors.denied_rate_per_minute()) == (8.0, 6.0, 2.0)


def test_rates_are_over_about_the_last_minute() -> None:
    clock = ManualClock()
    sensors = AuthorizerSensors(clock)
    for _ in range(30):
        sensors.record(DENIED)
    clock.advance(45_000)
    # 30 decisions over the 45 s since the oldest sample
    assert sensors.denied_rate_per_minute() == pytest.approx(40.0)
    sensors.record(ALLOWED)  # a second sample
    clock.advance(30_000)
    # the first sample (75 s old) is obsolete past 2 x 30 s; the second remains
    assert sensors.denied_rate_per_minute() == 0.0
    assert sensors.allowed_rate_per_minute() == pytest.approx(2.0)
    clock.advance(60_000)
    assert sensors.request_rate_per_minute() == 0.0

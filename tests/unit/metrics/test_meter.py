import math

import pytest

from kmirror.metrics.meter import TICK_INTERVAL_MS, Ewma, Meter
from kmirror.ports import ManualClock


def test_first_tick_sets_the_rate_then_decays_with_yammer_alpha() -> None:
    clock = ManualClock()
    meter = Meter(clock)
    meter.mark(10)
    assert meter.one_minute_rate() == 0.0  # no tick has elapsed yet
    clock.advance(TICK_INTERVAL_MS + 1)
    assert meter.one_minute_rate() == pytest.approx(2.0)  # 10 events / 5 s
    assert meter.five_minute_rate() == pytest.approx(2.0)
    assert meter.fifteen_minute_rate() == pytest.approx(2.0)
    clock.advance(TICK_INTERVAL_MS)
    alpha_1m = 1 - math.exp(-5 / 60)
    assert meter.one_minute_rate() == pytest.approx(2.0 * (1 - alpha_1m))
    alpha_15m = 1 - math.exp(-5 / 60 / 15)
    assert meter.fifteen_minute_rate() == pytest.approx(2.0 * (1 - alpha_15m))


def test_a_steady_rate_converges() -> None:
    clock = ManualClock()
    meter = Meter(clock)
    clock.advance(1)  # marks fall strictly inside ticks
    for _ in range(600):  # 50 minutes of 3 events/s
        meter.mark(15)
        clock.advance(TICK_INTERVAL_MS)
    assert meter.one_minute_rate() == pytest.approx(3.0, rel=1e-6)
    assert meter.five_minute_rate() == pytest.approx(3.0, rel=1e-3)
    assert meter.fifteen_minute_rate() == pytest.approx(3.0, rel=0.05)
    assert meter.count == 9000
    assert meter.mean_rate() == pytest.approx(3.0, rel=1e-6)


def test_idle_time_decays_one_minute_rate_faster_than_fifteen() -> None:
    clock = ManualClock()
    meter = Meter(clock)
    meter.mark(100)
    clock.advance(TICK_INTERVAL_MS + 1)
    meter.one_minute_rate()
    clock.advance(10 * 60_000)
    assert meter.one_minute_rate() < meter.five_minute_rate() < meter.fifteen_minute_rate()
    assert meter.count == 100


def test_an_exact_tick_boundary_waits_for_the_next_millisecond() -> None:
    # Yammer ticks only when the age is strictly greater than the interval
    clock = ManualClock()
    meter = Meter(clock)
    meter.mark(5)
    clock.advance(TICK_INTERVAL_MS)
    assert meter.one_minute_rate() == 0.0
    clock.advance(1)
    assert meter.one_minute_rate() == pytest.approx(1.0)


def test_mean_rate_and_negative_marks() -> None:
    clock = ManualClock()
    meter = Meter(clock)
    assert meter.mean_rate() == 0.0
    meter.mark(4)
    clock.advance(2_000)
    assert meter.mean_rate() == pytest.approx(2.0)
    with pytest.raises(ValueError):
        meter.mark(-1)
    with pytest.raises(ValueError):
        meter.add_unrated(-1)


def test_ewma_alpha_matches_yammer() -> None:
    assert Ewma(1).alpha == pytest.approx(1 - math.exp(-5 / 60 / 1))
    assert Ewma(5).alpha == pytest.approx(1 - math.exp(-5 / 60 / 5))

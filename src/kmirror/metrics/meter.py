"""Yammer `Meter` semantics, as behind Kafka's `*PerSec` JMX beans.

A meter counts events and keeps exponentially weighted moving averages of the event rate
over 1, 5 and 15 minutes (`OneMinuteRate`, `FiveMinuteRate`, `FifteenMinuteRate`, events per
second) plus `MeanRate` (count over the meter's age). As in Yammer's `EWMA`, events are
accumulated in 5-second ticks; every elapsed tick folds the tick's instant rate into each
average with alpha = 1 - exp(-5 s / window); the first tick sets the average outright.
Reads tick first, so idle time decays the rates. Time comes from the clock port.
"""

from __future__ import annotations

import math

from kmirror.ports import Clock

TICK_INTERVAL_MS = 5_000


class Ewma:
    """Yammer `EWMA`: `update(n)` adds events to the current tick; `tick()` folds them in."""

    def __init__(self, window_minutes: int) -> None:
        self.alpha = 1.0 - math.exp(-TICK_INTERVAL_MS / 1000.0 / 60.0 / window_minutes)
        self._uncounted = 0.0
        self._rate_per_ms = 0.0
        self._initialized = False

    def update(self, n: float) -> None:
        self._uncounted += n

    def tick(self) -> None:
        instant_rate = self._uncounted / TICK_INTERVAL_MS
        self._uncounted = 0.0
        if self._initialized:
            self._rate_per_ms += self.alpha * (instant_rate - self._rate_per_ms)
        else:
            self._rate_per_ms = instant_rate
            self._initialized = True

    def rate_per_second(self) -> float:
        return self._rate_per_ms * 1000.0


class Meter:
    """Count plus 1/5/15-minute EWMA rates and the mean rate, per second."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._start_ms = clock.monotonic_ms()
        self._last_tick_ms = self._start_ms
        self._count = 0.0
        self._uncounted = 0.0  # events of the current tick, folded into every EWMA on tick
        self._m1, self._m5, self._m15 = Ewma(1), Ewma(5), Ewma(15)

    def mark(self, n: float = 1) -> None:
        if n < 0:
            raise ValueError(f"a meter counts events; cannot mark {n}")
        self._tick_if_necessary()
        self._count += n
        self._uncounted += n

    def add_unrated(self, n: float) -> None:
        """Count events that happened before this meter existed, without rating them."""
        if n < 0:
            raise ValueError(f"a meter counts events; cannot add {n}")
        self._count += n

    def _tick_if_necessary(self) -> None:
        now = self._clock.monotonic_ms()
        age = now - self._last_tick_ms
        if age > TICK_INTERVAL_MS:
            self._last_tick_ms = now - age % TICK_INTERVAL_MS
            uncounted, self._uncounted = self._uncounted, 0.0
            for ewma in (self._m1, self._m5, self._m15):
                ewma.update(uncounted)
            for _ in range(age // TICK_INTERVAL_MS):
                for ewma in (self._m1, self._m5, self._m15):
                    ewma.tick()

    @property
    def count(self) -> float:
        return self._count

    def one_minute_rate(self) -> float:
        self._tick_if_necessary()
        return self._m1.rate_per_second()

    def five_minute_rate(self) -> float:
        self._tick_if_necessary()
        return self._m5.rate_per_second()

    def fifteen_minute_rate(self) -> float:
        self._tick_if_necessary()
        return self._m15.rate_per_second()

    def mean_rate(self) -> float:
        elapsed_ms = self._clock.monotonic_ms() - self._start_ms
        return 0.0 if elapsed_ms <= 0 else self._count * 1000.0 / elapsed_ms

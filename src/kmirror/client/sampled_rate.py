"""Kafka's sampled statistics (`org.apache.kafka.common.metrics.stats`, which Kafka ships in its
clients library): `Rate` over a `SampledStat` of `samples` windows of `window_ms` each, for
quotas and rate metrics (a client's network metrics among them), and the `TokenBucket` of KIP-599.

Rate (org.apache.kafka.common.metrics.stats.Rate):
- a recorded value goes into the current sample; a sample older than `window_ms` is complete
  and the next value starts a new one (reusing the oldest slot once `samples` exist);
- samples older than `samples * window_ms` are obsolete and reset before measuring;
- the rate is the samples' total divided by the elapsed window, which counts at least
  `samples - 1` full windows so that a fresh sensor does not report a burst as a huge rate.

The throttle time of a violation is Kafka's `QuotaUtils.throttleTime`: the time for the
rate to come back to the bound if nothing more is recorded, `(rate - bound) / bound * window`.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_THROTTLE_MS = 2**31 - 1
"""A throttle time fits the responses' int32 `throttle_time_ms`."""


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """`quota.window.num` and `quota.window.size.seconds` (and the controller/replication twins)."""

    samples: int = 11
    window_ms: int = 1000


METRICS_WINDOW = QuotaWindow(samples=2, window_ms=30_000)
"""Kafka's default metrics configuration (`metrics.num.samples`, `metrics.sample.window.ms`),
the window of a broker's rate metrics other than the quotas'."""


class _Sample:
    __slots__ = ("start_ms", "value", "count", "max")

    def __init__(self, start_ms: int) -> None:
        self.reset(start_ms)

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.value = 0.0
        self.count = 0
        self.max = float("-inf")


class SampledRate:
    """Units per second over the sampled window; also the average and the largest of the
    values recorded in it (Kafka's `Avg` and `Max` over the same samples), None when the
    window holds none (Kafka reports NaN)."""

    def __init__(self, window: QuotaWindow, now_ms: int) -> None:
        self.window = window
        self._samples = [_Sample(now_ms)]
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window.window_ms:
            self._current = (self._current + 1) % self.window.samples
            if self._current >= len(self._samples):
                self._samples.append(_Sample(now_ms))
            else:
                self._samples[self._current].reset(now_ms)
            sample = self._samples[self._current]
        sample.value += value
        sample.count += 1
        sample.max = max(sample.max, value)

    def _purge(self, now_ms: int) -> None:
        expire_age = self.window.samples * self.window.window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire_age:
                sample.reset(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """Kafka's Rate.windowSize: elapsed since the oldest sample, at least samples-1 windows."""
        self._purge(now_ms)
        oldest = min(s.start_ms for s in self._samples)
        elapsed = now_ms - oldest
        full = elapsed // self.window.window_ms
        minimum = self.window.samples - 1
        if full < minimum:
            elapsed += (minimum - full) * self.window.window_ms
        return max(elapsed, 1)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._samples)

    def avg(self, now_ms: int) -> float | None:
        self._purge(now_ms)
        count = sum(s.count for s in self._samples)
        return sum(s.value for s in self._samples) / count if count else None

    def max(self, now_ms: int) -> float | None:
        self._purge(now_ms)
        recorded = [s.max for s in self._samples if s.count]
        return max(recorded) if recorded else None

    def measure(self, now_ms: int) -> float:
        """Units per second."""
        window = self.window_size_ms(now_ms)
        return self.total(now_ms) * 1000.0 / window

    def throttle_time_ms(self, bound: float, now_ms: int) -> int:
        """0 within `bound`, else Kafka's QuotaUtils.throttleTime."""
        rate = self.measure(now_ms)
        if rate <= bound:
            return 0
        if bound <= 0:
            return self.window_size_ms(now_ms)
        return min(MAX_THROTTLE_MS, round((rate - bound) / bound * self.window_size_ms(now_ms)))


class TokenBucket:
    """KIP-599's token bucket: `rate` tokens per second, at most `rate * samples * window`
    (the burst); a record takes tokens and may drive the bucket negative. Kafka's throttle time
    of a negative bucket is the time to refill it to zero: `-tokens / rate * 1000`."""

    def __init__(self, window: QuotaWindow, rate: float, now_ms: int) -> None:
        self.window = window
        self.rate = rate
        self.tokens = self.burst
        self._last_ms = now_ms

    @property
    def burst(self) -> float:
        return self.rate * self.window.samples * self.window.window_ms / 1000.0

    def set_rate(self, rate: float, now_ms: int) -> None:
        self._refill(now_ms)
        self.rate = rate
        self.tokens = min(self.tokens, self.burst)

    def _refill(self, now_ms: int) -> None:
        elapsed = max(0, now_ms - self._last_ms)
        self._last_ms = now_ms
        self.tokens = min(self.burst, self.tokens + self.rate * elapsed / 1000.0)

    def measure(self, now_ms: int) -> float:
        self._refill(now_ms)
        return self.tokens

    def record(self, permits: float, now_ms: int) -> None:
        self._refill(now_ms)
        self.tokens -= permits

    def throttle_time_ms(self, now_ms: int) -> int:
        tokens = self.measure(now_ms)
        if tokens >= 0:
            return 0
        if self.rate <= 0:
            return self.window.samples * self.window.window_ms
        return min(MAX_THROTTLE_MS, round(-tokens / self.rate * 1000))

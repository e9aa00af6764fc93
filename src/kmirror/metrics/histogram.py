"""Yammer `Histogram` semantics, as behind Kafka's `*TimeMs` and `RequestBytes` JMX beans.

`Count`, `Min`, `Max`, `Mean` cover every update; percentiles (`50thPercentile` ... `999thPercentile`)
come from a reservoir of the most recent `RESERVOIR_SIZE` updates (Yammer's
`SlidingWindowReservoir` with the size of Kafka's default `ExponentiallyDecayingReservoir`:
deterministic, no random port). A quantile is the sample at rank `q * (n + 1)` of the sorted
reservoir with linear interpolation, as Yammer's `UniformSnapshot.getValue`.
"""

from __future__ import annotations

import math

RESERVOIR_SIZE = 1028
QUANTILES: tuple[float, ...] = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)


class Histogram:
    def __init__(self, reservoir_size: int = RESERVOIR_SIZE) -> None:
        self._size = reservoir_size
        self._samples: list[float] = []
        self._next = 0
        self.count = 0
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf

    def update(self, value: float) -> None:
        self.count += 1
        self.sum += value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value
        if len(self._samples) < self._size:
            self._samples.append(value)
        else:
            self._samples[self._next] = value
            self._next = (self._next + 1) % self._size

    def mean(self) -> float:
        return self.sum / self.count if self.count else 0.0

    def quantiles(self, qs: tuple[float, ...] = QUANTILES) -> list[tuple[float, float]]:
        """(q, value) for each q; 0 for an empty histogram (Yammer's empty snapshot)."""
        ordered = sorted(self._samples)
        return [(q, quantile(ordered, q)) for q in qs]


def quantile(ordered: list[float], q: float) -> float:
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"{q} is not in [0..1]")
    n = len(ordered)
    if n == 0:
        return 0.0
    pos = q * (n + 1)
    if pos < 1:
        return ordered[0]
    if pos >= n:
        return ordered[-1]
    lower = ordered[int(pos) - 1]
    upper = ordered[int(pos)]
    return lower + (pos - math.floor(pos)) * (upper - lower)

"""Kafka's client network metrics for a group of connections (a client `Selector`'s metrics:
connection-count, request-rate, incoming-byte-total, failed-authentication-total, ...).

The connections of one fetcher (a mirror fetcher's to its source broker, a follower's to its
leader) record into one `NetworkStats`, which the broker exposes as KIP-1279's
`mirror-broker-{id}-fetcher-{n}-mirror-{name}-metrics` or Kafka's `replica-fetcher-metrics`
(`kmirror.metrics.network_metrics`).

Rates, averages and maxima are taken over `metrics.num.samples` (2) samples of
`metrics.sample.window.ms` (30 s), as Kafka's `Rate`, `Avg` and `Max` over sampled stats:
a rate divides by the time since the oldest live sample began, counted as at least one full
window, and an average or maximum without a value in the window is NaN. Sans-IO: every call
takes the time (monotonic milliseconds) from its caller.
"""

from __future__ import annotations

import math

WINDOW_MS = 30_000
SAMPLES = 2

# The sampled stats a NetworkStats keeps; "request" records each request's size (request-rate
# counts them, outgoing-byte-rate sums them, request-size-avg/max), "incoming-byte" each read.
_STATS = ("connection-creation", "connection-close", "request", "response", "incoming-byte", "network-io",
          "successful-authentication", "failed-authentication", "successful-reauthentication",
          "failed-reauthentication", "reauthentication-latency")
_COUNTED = ("connection-creation", "connection-close", "request", "response", "network-io",
            "successful-authentication", "failed-authentication", "successful-reauthentication",
            "failed-reauthentication")


class SampledStat:
    """Count, sum and maximum of the values recorded in the live samples, plus the
    cumulative count and sum since creation."""

    __slots__ = ("_samples", "count", "sum")

    def __init__(self) -> None:
        self._samples: list[list[float]] = []  # [start ms, count, sum, max]
        self.count = 0
        self.sum = 0.0

    def record(self, value: float, now_ms: float) -> None:
        self.count += 1
        self.sum += value
        samples = self._samples
        if not samples or now_ms - samples[-1][0] >= WINDOW_MS:
            samples.append([now_ms, 0, 0.0, -math.inf])
            if len(samples) > SAMPLES:
                del samples[0]
        current = samples[-1]
        current[1] += 1
        current[2] += value
        if value > current[3]:
            current[3] = value

    def _live(self, now_ms: float) -> list[list[float]]:
        return [s for s in self._samples if now_ms - s[0] < SAMPLES * WINDOW_MS]

    def rate(self, now_ms: float, *, of_sum: bool = False) -> float:
        """Per second: of the values' sum (`of_sum`) or of their count."""
        live = self._live(now_ms)
        value = sum(s[2] if of_sum else s[1] for s in live)
        elapsed = now_ms - live[0][0] if live else 0.0
        full_windows = int(elapsed // WINDOW_MS)
        if full_windows < SAMPLES - 1:
            elapsed += (SAMPLES - 1 - full_windows) * WINDOW_MS
        return value * 1000 / elapsed

    def avg(self, now_ms: float) -> float:
        live = self._live(now_ms)
        count = sum(s[1] for s in live)
        return sum(s[2] for s in live) / count if count else math.nan

    def max(self, now_ms: float) -> float:
        return max((s[3] for s in self._live(now_ms) if s[1]), default=math.nan)


class NetworkStats:
    """What a group of client connections did: `BrokerConnection` records, `values` reads."""

    def __init__(self) -> None:
        self.connection_count = 0
        self._stats = {name: SampledStat() for name in _STATS}

    def _record(self, name: str, now_ms: float, value: float = 1.0) -> None:
        self._stats[name].record(value, now_ms)

    def connection_created(self, now_ms: float) -> None:
        self.connection_count += 1
        self._record("connection-creation", now_ms)

    def connection_closed(self, now_ms: float) -> None:
        self.connection_count -= 1
        self._record("connection-close", now_ms)

    def request_sent(self, size: int, now_ms: float) -> None:
        self._record("request", now_ms, size)
        self._record("network-io", now_ms)

    def response_received(self, now_ms: float) -> None:
        self._record("response", now_ms)
        self._record("network-io", now_ms)

    def bytes_received(self, size: int, now_ms: float) -> None:
        self._record("incoming-byte", now_ms, size)

    def authenticated(self, now_ms: float) -> None:
        self._record("successful-authentication", now_ms)

    def authentication_failed(self, now_ms: float) -> None:
        self._record("failed-authentication", now_ms)

    def reauthenticated(self, latency_ms: float, now_ms: float) -> None:
        self._record("successful-reauthentication", now_ms)
        self._record("reauthentication-latency", now_ms, latency_ms)

    def reauthentication_failed(self, now_ms: float) -> None:
        self._record("failed-reauthentication", now_ms)

    def values(self, now_ms: float) -> dict[str, float]:
        """Every metric by its Kafka name. select-rate/select-total are not measured: the
        connections share the node's event loop, which has no per-client select count."""
        stats = self._stats
        out: dict[str, float] = {"connection-count": self.connection_count}
        for name in _COUNTED:
            out[f"{name}-rate"] = stats[name].rate(now_ms)
            out[f"{name}-total"] = stats[name].count
        for name, stat in (("outgoing-byte", stats["request"]), ("incoming-byte", stats["incoming-byte"])):
            out[f"{name}-rate"] = stat.rate(now_ms, of_sum=True)
            out[f"{name}-total"] = stat.sum
        out["request-size-avg"] = stats["request"].avg(now_ms)
        out["request-size-max"] = stats["request"].max(now_ms)
        # A client's connections never learn whether re-authentication is possible before
        # they need it: Kafka's client selectors count every authentication here too.
        out["successful-authentication-no-reauth-total"] = stats["successful-authentication"].count
        out["reauthentication-latency-avg"] = stats["reauthentication-latency"].avg(now_ms)
        out["reauthentication-latency-max"] = stats["reauthentication-latency"].max(now_ms)
        return out

"""Kafka's client network metrics for a group of connections (a client `Selector`'s metrics:
connection-count, request-rate, incoming-byte-total, failed-authentication-total, ...).

The connections of one fetcher (a mirror fetcher's to its source broker, a follower's to its
leader) record into one `NetworkStats`, which the broker exposes as KIP-1279's
`mirror-broker-{id}-fetcher-{n}-mirror-{name}-metrics` or Kafka's `replica-fetcher-metrics`
(`kmirror.metrics.network_metrics`).

Each `-rate`, `-avg` and `-max` is Kafka's over `metrics.num.samples` x
`metrics.sample.window.ms` (`SampledRate` over `METRICS_WINDOW`); each `-total` counts from
the creation of the stats. An average or maximum with no value in the window is None (Kafka
reports NaN). Sans-IO: every call takes the time (monotonic milliseconds) from its caller.
"""

from __future__ import annotations

from kmirror.client.sampled_rate import METRICS_WINDOW, SampledRate

_COUNTED = ("connection-creation", "connection-close", "request", "response", "network-io",
            "successful-authentication", "failed-authentication", "successful-reauthentication",
            "failed-reauthentication")
_SUMMED = ("outgoing-byte", "incoming-byte")


class NetworkStats:
    """What a group of client connections did: `BrokerConnection` records, `values` reads."""

    def __init__(self) -> None:
        self.connection_count = 0
        self._rates = {name: SampledRate(METRICS_WINDOW, 0) for name in (*_COUNTED, *_SUMMED)}
        self._totals = dict.fromkeys((*_COUNTED, *_SUMMED), 0.0)
        self._reauthentication_latency = SampledRate(METRICS_WINDOW, 0)

    def _record(self, name: str, now_ms: int, value: float = 1.0) -> None:
        self._totals[name] += value
        self._rates[name].record(value, now_ms)

    def connection_created(self, now_ms: int) -> None:
        self.connection_count += 1
        self._record("connection-creation", now_ms)

    def connection_closed(self, now_ms: int) -> None:
        self.connection_count -= 1
        self._record("connection-close", now_ms)

    def request_sent(self, size: int, now_ms: int) -> None:
        """Kafka's bytes-sent sensor: a request, its bytes, one network operation."""
        self._record("request", now_ms)
        self._record("outgoing-byte", now_ms, size)
        self._record("network-io", now_ms)

    def response_received(self, now_ms: int) -> None:
        self._record("response", now_ms)
        self._record("network-io", now_ms)

    def bytes_received(self, size: int, now_ms: int) -> None:
        self._record("incoming-byte", now_ms, size)

    def authenticated(self, now_ms: int) -> None:
        self._record("successful-authentication", now_ms)

    def authentication_failed(self, now_ms: int) -> None:
        self._record("failed-authentication", now_ms)

    def reauthenticated(self, latency_ms: int, now_ms: int) -> None:
        self._record("successful-reauthentication", now_ms)
        self._reauthentication_latency.record(latency_ms, now_ms)

    def reauthentication_failed(self, now_ms: int) -> None:
        self._record("failed-reauthentication", now_ms)

    def values(self, now_ms: int) -> dict[str, float | None]:
        """Every metric by its Kafka name. select-rate/select-total are not measured: the
        connections share the node's event loop, which has no per-client select count."""
        out: dict[str, float | None] = {"connection-count": self.connection_count}
        for name, rate in self._rates.items():
            out[f"{name}-rate"] = rate.measure(now_ms)
            out[f"{name}-total"] = self._totals[name]
        sizes = self._rates["outgoing-byte"]
        out["request-size-avg"], out["request-size-max"] = sizes.avg(now_ms), sizes.max(now_ms)
        # Kafka's client selectors record this beside every successful authentication: only a
        # server learns whether its peer can re-authenticate.
        out["successful-authentication-no-reauth-total"] = self._totals["successful-authentication"]
        latency = self._reauthentication_latency
        out["reauthentication-latency-avg"], out["reauthentication-latency-max"] = latency.avg(now_ms), latency.max(now_ms)
        return out

"""The authorizer's sensors (Kafka's StandardAuthorizer metrics, KAFKA-18888): every decision
of the authorizer is one authorization request, and one allowed or one denied. Each is a
`Rate` per minute over a windowed count, with Kafka's default metrics configuration (2
samples of 30 s, `metrics.num.samples` and `metrics.sample.window.ms`): the decisions of about
the last minute, over at least 30 s. Probes and filters count as Kafka counts them: every
decision, whether or not it is audit-logged.
"""

from __future__ import annotations

from kmirror.client.sampled_rate import METRICS_WINDOW, SampledRate
from kmirror.metadata.authorizer import AuthorizationResult
from kmirror.ports import Clock


class AuthorizerSensors:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        now = clock.monotonic_ms()
        self._request = SampledRate(METRICS_WINDOW, now)
        self._allowed = SampledRate(METRICS_WINDOW, now)
        self._denied = SampledRate(METRICS_WINDOW, now)

    def record(self, result: AuthorizationResult) -> None:
        now = self._clock.monotonic_ms()
        self._request.record(1, now)
        (self._allowed if result is AuthorizationResult.ALLOWED else self._denied).record(1, now)

    def request_rate_per_minute(self) -> float:
        return self._per_minute(self._request)

    def allowed_rate_per_minute(self) -> float:
        return self._per_minute(self._allowed)

    def denied_rate_per_minute(self) -> float:
        return self._per_minute(self._denied)

    def _per_minute(self, rate: SampledRate) -> float:
        return rate.measure(self._clock.monotonic_ms()) * 60.0

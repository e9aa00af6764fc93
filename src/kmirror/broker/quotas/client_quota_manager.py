"""`ClientQuotaManager`: one quota type's client quotas, as Kafka's ClientQuotaManager with its
DefaultQuotaCallback.

The quota of a request is the most specific entity of the metadata image that sets this
manager's key, in Kafka's order:
  1. user + client-id        2. user + default client-id   3. user
  4. default user + client-id  5. default user + default client-id  6. default user
  7. client-id               8. default client-id
The matched entity also decides who shares the rate (the metric tags): a quota on user U is
shared by every client of U (tags user=U, client-id=""); a default quota applies to each
user or client id on its own. Without any entity setting the key, nothing is recorded.

`record_and_get_throttle_ms` records a value and returns 0 or the throttle time (Kafka's
QuotaUtils.throttleTime; the request quota bounds it by one window, as Kafka's
ClientRequestQuotaManager). `unrecord` takes a value back: a throttled Fetch answers
empty, so its bytes are not counted. Sensors unused for an hour are dropped (Kafka's
inactive sensor expiration), so a client cycling through ids cannot grow memory forever.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from kmirror.client.sampled_rate import QuotaWindow, SampledRate
from kmirror.config.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotaEntity,
)

INACTIVE_SENSOR_EXPIRATION_MS = 3_600_000
ANONYMOUS = "ANONYMOUS"


class QuotaType(Enum):
    """Kafka's QuotaType: the metric type name and the quota key."""

    PRODUCE = ("Produce", PRODUCER_BYTE_RATE)
    FETCH = ("Fetch", CONSUMER_BYTE_RATE)
    REQUEST = ("Request", REQUEST_PERCENTAGE)
    CONTROLLER_MUTATION = ("ControllerMutation", CONTROLLER_MUTATION_RATE)

    @property
    def metric_type(self) -> str:
        return self.value[0]

    @property
    def key(self) -> str:
        return self.value[1]


MetricTags = tuple[str, str]
"""(user, client-id) of a sensor; "" where the matched entity does not split by that part."""


@dataclass(frozen=True, slots=True)
class ClientQuota:
    bound: float
    tags: MetricTags


@dataclass
class ClientSensor:
    """The rate of one (user, client-id) and its throttle-time statistics (cumulative)."""

    rate: SampledRate
    last_used_ms: int
    requests: int = 0
    throttled_requests: int = 0
    throttle_total_ms: int = 0
    throttle_max_ms: int = 0
    value_total: float = 0.0


def resolve_quota(
    quotas: Mapping[ClientQuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str
) -> ClientQuota | None:
    """DefaultQuotaCallback.quotaMetricTags + quotaLimit for one key."""
    candidates: tuple[tuple[ClientQuotaEntity, MetricTags], ...] = (
        (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
        (((CLIENT_ID, None), (USER, user)), (user, client_id)),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
        (((CLIENT_ID, None), (USER, None)), (user, client_id)),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    )
    for entity, tags in candidates:
        values = quotas.get(entity)
        if values is not None and key in values:
            return ClientQuota(values[key], tags)
    return None


class ClientQuotaManager:
    def __init__(self, quota_type: QuotaType, window: QuotaWindow, *, bounded_throttle: bool = False) -> None:
        self.quota_type = quota_type
        self.window = window
        self._bounded = bounded_throttle
        self._quotas: Mapping[ClientQuotaEntity, Mapping[str, float]] = {}
        self._enabled = False
        self.sensors: dict[MetricTags, ClientSensor] = {}
        self._next_expiry_ms = 0

    def update_quotas(self, quotas: Mapping[ClientQuotaEntity, Mapping[str, float]]) -> None:
        """The image's client quotas (called on every metadata change)."""
        self._quotas = quotas
        self._enabled = any(self.quota_type.key in values for values in quotas.values())

    @property
    def enabled(self) -> bool:
        return self._enabled

    def quota(self, user: str, client_id: str) -> ClientQuota | None:
        if not self._enabled:
            return None
        return resolve_quota(self._quotas, self.quota_type.key, user, client_id)

    def _sensor(self, tags: MetricTags, now_ms: int) -> ClientSensor:
        sensor = self.sensors.get(tags)
        if sensor is None:
            sensor = self.sensors[tags] = ClientSensor(SampledRate(self.window, now_ms), now_ms)
        sensor.last_used_ms = now_ms
        if now_ms >= self._next_expiry_ms:
            self._expire(now_ms)
        return sensor

    def _expire(self, now_ms: int) -> None:
        self._next_expiry_ms = now_ms + 60_000
        for tags in [t for t, s in self.sensors.items() if now_ms - s.last_used_ms > INACTIVE_SENSOR_EXPIRATION_MS]:
            del self.sensors[tags]

    def record_and_get_throttle_ms(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        quota = self.quota(user, client_id)
        if quota is None:
            return 0
        sensor = self._sensor(quota.tags, now_ms)
        sensor.rate.record(value, now_ms)
        sensor.value_total += value
        throttle_ms = sensor.rate.throttle_time_ms(quota.bound, now_ms)
        if self._bounded:
            throttle_ms = min(throttle_ms, self.window.window_ms)
        return throttle_ms

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        quota = self.quota(user, client_id)
        if quota is None:
            return
        sensor = self._sensor(quota.tags, now_ms)
        sensor.rate.record(-value, now_ms)
        sensor.value_total -= value

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """Kafka's getMaxValueInQuotaWindow: what the quota allows over `samples - 1` windows
        (a Fetch asks for no more than that); None without a quota."""
        quota = self.quota(user, client_id)
        if quota is None:
            return None
        return quota.bound * (self.window.samples - 1) * self.window.window_ms / 1000.0

    def record_throttle_time(self, user: str, client_id: str, throttle_ms: int, now_ms: int) -> None:
        """The throttle-time metric of the request's sensor (every request with a quota counts,
        0 included, as Kafka's throttle-time avg)."""
        quota = self.quota(user, client_id)
        if quota is None:
            return
        sensor = self._sensor(quota.tags, now_ms)
        sensor.requests += 1
        if throttle_ms > 0:
            sensor.throttled_requests += 1
            sensor.throttle_total_ms += throttle_ms
            sensor.throttle_max_ms = max(sensor.throttle_max_ms, throttle_ms)

"""`connection_creation_rate` of the `ip` quota entity (KIP-612, Kafka's ConnectionQuotas):
connections a host may open per second, for that IP or the default IP entity. Each accepted
connection is recorded in the host's sampled rate; one that takes the rate past the quota is
not counted and is closed at once (Kafka delays and then closes it; closing at once is what the
client sees either way). Hosts without a quota are not recorded."""

from __future__ import annotations

from collections.abc import Mapping

from kmirror.client.sampled_rate import QuotaWindow, SampledRate
from kmirror.config.client_quotas import CONNECTION_CREATION_RATE, IP, ClientQuotaEntity

INACTIVE_EXPIRATION_MS = 3_600_000


class ConnectionRateQuotas:
    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self._quotas: dict[str | None, float] = {}
        self._rates: dict[str, tuple[SampledRate, int]] = {}
        self.throttled_total = 0

    def update_quotas(self, quotas: Mapping[ClientQuotaEntity, Mapping[str, float]]) -> None:
        self._quotas = {entity[0][1]: values[CONNECTION_CREATION_RATE] for entity, values in quotas.items()
                        if len(entity) == 1 and entity[0][0] == IP and CONNECTION_CREATION_RATE in values}

    def quota(self, host: str) -> float | None:
        return self._quotas.get(host, self._quotas.get(None))

    def admit(self, host: str, now_ms: int) -> bool:
        """Record a new connection from `host`; False when it is over the host's quota."""
        bound = self.quota(host)
        if bound is None:
            return True
        entry = self._rates.get(host)
        rate = entry[0] if entry is not None else SampledRate(self.window, now_ms)
        self._rates[host] = (rate, now_ms)
        rate.record(1, now_ms)
        if rate.measure(now_ms) > bound:
            rate.record(-1, now_ms)
            self.throttled_total += 1
            return False
        if len(self._rates) > 10_000:
            for stale in [h for h, (_, seen) in self._rates.items() if now_ms - seen > INACTIVE_EXPIRATION_MS]:
                del self._rates[stale]
        return True

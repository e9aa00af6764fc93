"""`QuotaManagers`: a broker's quota managers (Kafka's `QuotaFactory.QuotaManagers`), fed with
the metadata image's client quotas, and the throttle a request earns once handled.

`throttle_after` runs after a handler, with the request's size and handler time:
- Produce records the request size into `producer_byte_rate` (Kafka records after the append,
  acks=0 included: the channel is muted even though no response goes out);
- every request of a client listener records its handler time into `request_percentage`
  (percent of one handler per second, Kafka's ClientRequestQuotaManager; ApiVersions and
  the controller plane are exempt, as Kafka exempts cluster actions);
- Fetch's own bandwidth throttle is set by its handler (`consumer_byte_rate`).
The throttle of the response is the largest of these; `throttle_time_ms` is rewritten to it.
Whether the client throttles itself (KIP-219) decides what the connection does: newer
versions get the response at once and the channel is muted for the throttle time; older
versions get the response after the throttle time (`client_throttles`).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

from kmirror.broker.quotas.client_quota_manager import ANONYMOUS, ClientQuotaManager, QuotaType
from kmirror.broker.quotas.connection_rate import ConnectionRateQuotas
from kmirror.broker.quotas.controller_mutation import ControllerMutationQuotaManager
from kmirror.client.sampled_rate import QuotaWindow
from kmirror.config.client_quotas import ClientQuotaEntity

PRODUCE, FETCH, API_VERSIONS = 0, 1, 18
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9
EXEMPT_FROM_REQUEST_QUOTA = frozenset({API_VERSIONS})

# First version of a response whose client throttles itself (KIP-219, Kafka's
# AbstractResponse.shouldClientThrottle); APIs not listed throttle from every served version.
_CLIENT_THROTTLES_SINCE = {0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2,
                           19: 3, 20: 2, 21: 1, 22: 1, 32: 2, 33: 1, 37: 1}


def client_throttles(api_key: int, api_version: int) -> bool:
    return api_version >= _CLIENT_THROTTLES_SINCE.get(api_key, 0)


class QuotaManagers:
    def __init__(self, window: QuotaWindow, controller_window: QuotaWindow) -> None:
        self.produce = ClientQuotaManager(QuotaType.PRODUCE, window)
        self.fetch = ClientQuotaManager(QuotaType.FETCH, window)
        self.request = ClientQuotaManager(QuotaType.REQUEST, window, bounded_throttle=True)
        self.controller_mutation = ControllerMutationQuotaManager(controller_window)
        self.connection_rate = ConnectionRateQuotas(window)

    @classmethod
    def from_config(cls, get: Any) -> QuotaManagers:
        """From the broker config's `quota.window.*` and `controller.quota.window.*` keys."""
        return cls(
            QuotaWindow(int(get("quota.window.num")), int(get("quota.window.size.seconds")) * 1000),
            QuotaWindow(int(get("controller.quota.window.num")), int(get("controller.quota.window.size.seconds")) * 1000),
        )

    def update_quotas(self, quotas: Mapping[ClientQuotaEntity, Mapping[str, float]]) -> None:
        for manager in (self.produce, self.fetch, self.request):
            manager.update_quotas(quotas)
        self.controller_mutation.update_quotas(quotas)
        self.connection_rate.update_quotas(quotas)

    def throttle_after(self, api_key: int, principal: str | None, client_id: str | None, request_size: int,
                       handler_ns: int, response: Any, now_ms: int) -> tuple[Any, int]:
        """(the response with its throttle time, the throttle time in ms)."""
        user, cid = principal or ANONYMOUS, client_id or ""
        throttle_ms = _throttle_of(response)
        if api_key == PRODUCE:
            produce_ms = self.produce.record_and_get_throttle_ms(user, cid, request_size, now_ms)
            self.produce.record_throttle_time(user, cid, produce_ms, now_ms)
            throttle_ms = max(throttle_ms, produce_ms)
        if api_key not in EXEMPT_FROM_REQUEST_QUOTA and self.request.enabled:
            request_ms = self.request.record_and_get_throttle_ms(
                user, cid, handler_ns * NANOS_TO_PERCENTAGE_PER_SECOND, now_ms)
            self.request.record_throttle_time(user, cid, request_ms, now_ms)
            throttle_ms = max(throttle_ms, request_ms)
        if response is not None and throttle_ms > _throttle_of(response):
            response = dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
        return response, throttle_ms


def _throttle_of(response: Any) -> int:
    throttle = getattr(response, "throttle_time", None)
    if isinstance(throttle, datetime.timedelta):
        return int(throttle.total_seconds() * 1000)
    return 0

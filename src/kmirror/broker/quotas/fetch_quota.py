"""`consumer_byte_rate` on a consumer Fetch (Kafka's handleFetchRequest with QuotaType.FETCH).

Follower fetches are exempt (replication has its own throttle). A consumer fetch asks for at
most `getMaxValueInQuotaWindow` bytes; after the read its bytes are recorded, and a fetch that
takes the rate past the quota is unrecorded and answered empty with the throttle time, so a
throttled client gets no data it was not entitled to and retries once the throttle ends.
"""

from __future__ import annotations

from typing import Any

from kmirror.broker.quotas.client_quota_manager import ClientQuotaManager


class FetchQuota:
    def __init__(self, manager: ClientQuotaManager, user: str, client_id: str) -> None:
        self._manager = manager
        self._user = user
        self._client_id = client_id

    def bound_max_bytes(self, max_bytes: int) -> int:
        window_bytes = self._manager.max_value_in_window(self._user, self._client_id)
        return max_bytes if window_bytes is None else max(1, min(max_bytes, int(window_bytes)))

    def record(self, response_bytes: int, now_ms: int) -> int:
        """The throttle time (0: answer with the records read)."""
        throttle_ms = self._manager.record_and_get_throttle_ms(self._user, self._client_id, response_bytes, now_ms)
        if throttle_ms > 0:
            self._manager.unrecord(self._user, self._client_id, response_bytes, now_ms)
        self._manager.record_throttle_time(self._user, self._client_id, throttle_ms, now_ms)
        return throttle_ms


def fetch_quota_for(services: Any, ctx: Any, replica_id: int) -> FetchQuota | None:
    """The consumer's fetch quota, or None (follower, controller plane, no quota set)."""
    quotas = getattr(services, "quotas", None)
    if quotas is None or replica_id >= 0 or not quotas.fetch.enabled:
        return None
    client_id = ctx.header.client_id or ""
    if quotas.fetch.quota(ctx.principal, client_id) is None:
        return None
    return FetchQuota(quotas.fetch, ctx.principal, client_id)

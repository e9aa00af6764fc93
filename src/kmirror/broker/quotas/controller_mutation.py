"""KIP-599's controller mutation quota (Kafka's ControllerMutationQuotaManager).

`controller_mutation_rate` is partitions created or deleted per second, per (user, client-id)
as client quotas resolve (`client_quota_manager.resolve_quota`), kept in a token bucket
whose burst is `rate * controller.quota.window.num * controller.quota.window.size.seconds`.
A request gets a `ControllerMutationQuota` for its life:
- strict (CreateTopics >= v6, CreatePartitions >= v3, DeleteTopics >= v5): a topic whose
  mutation finds the bucket already negative is refused with THROTTLING_QUOTA_EXCEEDED and
  the time to refill it; one that finds it non-negative is accepted whatever its size (the
  bucket may go negative), so a request is never refused only for being large;
- permissive (older versions, whose clients do not know the error): every mutation is
  accepted and only the response's throttle time (and the channel's mute) slows the client.
The throttle time is the time for the bucket to refill to zero, less the time since it was
measured.
"""

from __future__ import annotations

from collections.abc import Mapping

from kmirror.broker.quotas.client_quota_manager import QuotaType, resolve_quota
from kmirror.client.sampled_rate import QuotaWindow, TokenBucket
from kmirror.config.client_quotas import ClientQuotaEntity

# The first version of each API whose clients handle THROTTLING_QUOTA_EXCEEDED (KIP-599).
STRICT_SINCE_VERSION = {"CreateTopics": 6, "CreatePartitions": 3, "DeleteTopics": 5}


class ControllerMutationQuota:
    """One request's view of its bucket; an unbounded quota (no bucket) never throttles."""

    def __init__(self, bucket: TokenBucket | None, strict: bool) -> None:
        self._bucket = bucket
        self.strict = strict
        self._throttle_ms = 0
        self._recorded_ms = 0

    def record(self, permits: float, now_ms: int) -> int:
        """0 when the mutation may go ahead, else (strict only) the throttle time it is refused with."""
        bucket = self._bucket
        if bucket is None:
            return 0
        if self.strict:
            throttle_ms = bucket.throttle_time_ms(now_ms)
            if throttle_ms > 0:
                self._throttle_ms, self._recorded_ms = throttle_ms, now_ms
                return throttle_ms
            bucket.record(permits, now_ms)
            return 0
        bucket.record(permits, now_ms)
        throttle_ms = bucket.throttle_time_ms(now_ms)
        if throttle_ms > 0:
            self._throttle_ms, self._recorded_ms = throttle_ms, now_ms
        return 0

    def throttle_time_ms(self, now_ms: int) -> int:
        return max(0, self._throttle_ms - (now_ms - self._recorded_ms))


UNBOUNDED = ControllerMutationQuota(None, strict=False)


class ControllerMutationQuotaManager:
    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self._quotas: Mapping[ClientQuotaEntity, Mapping[str, float]] = {}
        self.buckets: dict[tuple[str, str], TokenBucket] = {}
        self.throttled: dict[tuple[str, str], int] = {}
        """Mutations refused or throttled per (user, client-id): the `throttle-time` count."""

    def update_quotas(self, quotas: Mapping[ClientQuotaEntity, Mapping[str, float]]) -> None:
        self._quotas = quotas

    def new_quota_for(self, api: str, api_version: int, user: str, client_id: str,
                      now_ms: int) -> ControllerMutationQuota:
        quota = resolve_quota(self._quotas, QuotaType.CONTROLLER_MUTATION.key, user, client_id)
        if quota is None:
            return UNBOUNDED
        bucket = self.buckets.get(quota.tags)
        if bucket is None:
            bucket = self.buckets[quota.tags] = TokenBucket(self.window, quota.bound, now_ms)
        elif bucket.rate != quota.bound:
            bucket.set_rate(quota.bound, now_ms)
        return ControllerMutationQuota(bucket, strict=api_version >= STRICT_SINCE_VERSION[api])

    def tokens(self) -> dict[tuple[str, str], float]:
        return {tags: b.tokens for tags, b in self.buckets.items()}

"""KIP-599 at the edge: which topics of a CreateTopics, CreatePartitions or DeleteTopics
request may mutate the cluster now (`ControllerMutationQuota`), and the answer for the others.

The node that receives the client's request applies its quota, before it creates, deletes or
forwards anything (a broker-only node forwards only the admitted topics to the controller,
which does not charge the forwarding broker again: the controller plane is exempt). Each topic
is charged its partitions in request order: created partitions, added partitions, or the
partitions of the topic deleted. A `validate_only` request mutates nothing and is not charged.
Refused topics are answered THROTTLING_QUOTA_EXCEEDED; the response carries the quota's
throttle time, and the server mutes the channel for it.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Sequence
from typing import Any

from kmirror.broker.quotas.controller_mutation import UNBOUNDED, ControllerMutationQuota
from kmirror.protocol.errors import ErrorCode

THROTTLING_QUOTA_EXCEEDED = ErrorCode.throttling_quota_exceeded
MESSAGE = "The throttling quota has been exceeded."


@dataclasses.dataclass
class Admission:
    refused: dict[str, int]
    quota: ControllerMutationQuota
    now_ms: Callable[[], int]

    def complete(self, response: Any, results_field: str, refused_result: Callable[[str], Any]) -> Any:
        """The response with a THROTTLING_QUOTA_EXCEEDED result per refused topic, and the
        quota's throttle time when it is larger than the response's."""
        throttle_ms = self.quota.throttle_time_ms(self.now_ms())
        current = response.throttle_time
        current_ms = int(current.total_seconds() * 1000) if isinstance(current, datetime.timedelta) else 0
        changes: dict[str, Any] = {}
        if self.refused:
            changes[results_field] = tuple(getattr(response, results_field)) + tuple(
                refused_result(name) for name in self.refused)
        if throttle_ms > current_ms:
            changes["throttle_time"] = datetime.timedelta(milliseconds=throttle_ms)
        return dataclasses.replace(response, **changes) if changes else response


def admit_mutations(services: Any, ctx: Any, api: str, items: Sequence[tuple[str, int]],
                    validate_only: bool = False, batch_limit: int | None = None) -> Admission:
    """Charge each `(topic, partitions)` to the client's quota; `refused` names the others.
    A creation past `batch_limit` partitions is refused whole by the controller's policy
    (POLICY_VIOLATION, before any work), so it is not charged."""
    quotas = getattr(services, "quotas", None)
    now_ms = services.clock.monotonic_ms
    if quotas is None or validate_only or (batch_limit is not None and sum(p for _, p in items) > batch_limit):
        return Admission({}, UNBOUNDED, now_ms)
    now = now_ms()
    quota = quotas.controller_mutation.new_quota_for(api, ctx.api_version, ctx.principal, ctx.header.client_id or "", now)
    refused: dict[str, int] = {}
    for name, permits in items:
        throttle_ms = quota.record(permits, now)
        if throttle_ms > 0:
            refused[name] = throttle_ms
    return Admission(refused, quota, now_ms)

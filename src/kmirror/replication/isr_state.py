"""The leader's view of the ISR while AlterPartition requests are in flight (Kafka `PartitionState`).

Committed: the ISR of the last registration. PendingExpand / PendingShrink: a change sent to
the controller, not yet committed. The *maximal* ISR (committed ISR plus a replica being
added; the committed ISR while one is being removed) is what the high watermark and acks=all
must respect, so that neither advances on the strength of a change the controller may reject
(KIP-497). At most one change is in flight per partition.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IsrState:
    isr: tuple[int, ...]  # the committed ISR
    pending_add: int | None = None
    pending_remove: frozenset[int] = frozenset()

    @property
    def is_inflight(self) -> bool:
        return self.pending_add is not None or bool(self.pending_remove)

    @property
    def maximal_isr(self) -> frozenset[int]:
        if self.pending_add is not None:
            return frozenset(self.isr) | {self.pending_add}
        return frozenset(self.isr)

    def expanding(self, replica: int) -> IsrState:
        return IsrState(self.isr, pending_add=replica)

    def shrinking(self, replicas: frozenset[int]) -> IsrState:
        return IsrState(self.isr, pending_remove=replicas)

    def proposed_isr(self) -> tuple[int, ...]:
        """The ISR this state asks the controller for (order kept: replicas order of the ISR)."""
        if self.pending_add is not None:
            return (*self.isr, self.pending_add)
        return tuple(r for r in self.isr if r not in self.pending_remove)

"""What a voter persists of its election (Kafka's `quorum-state` file, `ElectionState`)."""

from __future__ import annotations

from typing import NamedTuple

NO_VOTER = -1
"""Kafka's -1 for "no leader" and "voted for nobody"."""


class ElectionState(NamedTuple):
    epoch: int
    leader_id: int = NO_VOTER
    voted_id: int = NO_VOTER

    @property
    def has_leader(self) -> bool:
        return self.leader_id != NO_VOTER

"""Kafka's vocabulary as types shared by every layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType

Offset = NewType("Offset", int)
LeaderEpoch = NewType("LeaderEpoch", int)
BrokerId = NewType("BrokerId", int)
ProducerId = NewType("ProducerId", int)
ProducerEpoch = NewType("ProducerEpoch", int)

NO_LEADER_EPOCH = LeaderEpoch(-1)
NO_PRODUCER_ID = ProducerId(-1)


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        """The partition directory name inside a log dir: `<topic>-<partition>`."""
        return f"{self.topic}-{self.partition}"

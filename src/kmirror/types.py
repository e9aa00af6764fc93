"""Kafka's vocabulary as types shared by every layer."""

from __future__ import annotations

from typing import NamedTuple, NewType

Offset = NewType("Offset", int)
LeaderEpoch = NewType("LeaderEpoch", int)
BrokerId = NewType("BrokerId", int)
ProducerId = NewType("ProducerId", int)
ProducerEpoch = NewType("ProducerEpoch", int)

NO_LEADER_EPOCH = LeaderEpoch(-1)
NO_PRODUCER_ID = ProducerId(-1)


class TopicPartition(NamedTuple):
    """A partition's name. A named tuple rather than a dataclass: it is the key of every
    per-partition table, looked up several times per batch on the hot paths, and a tuple
    is built, hashed and compared in C (about 3x faster than a frozen dataclass)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        """The partition directory name inside a log dir: `<topic>-<partition>`."""
        return f"{self.topic}-{self.partition}"
